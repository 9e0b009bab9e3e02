package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"

	"github.com/labstack/echo/v4"
)

const ctxMultipart = "payd.multipart"

// maxFormMemory is how much of a form's files parsing keeps in memory; the
// body itself is already capped by the Body reader (64 MiB for an upload).
const maxFormMemory = 1 << 20

// AcceptMultipart lets one route take a multipart/form-data upload (the
// settlement CSV) besides JSON; the middleware then fingerprints the form.
func AcceptMultipart(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(ctxMultipart, true)
		return next(c)
	}
}

// MultipartAllowed reports whether the route accepts a multipart upload
// (AcceptMultipart).
func MultipartAllowed(c echo.Context) bool {
	ok, _ := c.Get(ctxMultipart).(bool)
	return ok
}

// IsMultipart reports whether this request is an accepted multipart upload.
func IsMultipart(c echo.Context) bool {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return MultipartAllowed(c) && mt == echo.MIMEMultipartForm
}

// canonicalMultipart is a multipart body as the fingerprint sees it: its
// fields and the SHA-256 of each file, sorted, so a client retrying the same
// upload (with a new boundary) presents the same request.
func canonicalMultipart(c echo.Context, raw []byte) ([]byte, string, error) {
	_, params, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || params["boundary"] == "" {
		return nil, "", ErrMalformedBody
	}
	form, err := multipart.NewReader(bytes.NewReader(raw), params["boundary"]).ReadForm(maxFormMemory)
	if err != nil {
		return nil, "", ErrMalformedBody
	}
	defer func() { _ = form.RemoveAll() }() // the form's temporary files; a failure leaves them to the OS
	files := map[string][]string{}
	for name, fhs := range form.File {
		for _, fh := range fhs {
			f, err := fh.Open()
			if err != nil {
				return nil, "", err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return nil, "", err
			}
			files[name] = append(files[name], hex.EncodeToString(h.Sum(nil)))
		}
	}
	out, err := json.Marshal(map[string]any{"fields": form.Value, "files": files})
	return out, "", err
}
