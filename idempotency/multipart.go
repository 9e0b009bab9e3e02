package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"

	"github.com/labstack/echo/v4"
)

const ctxMultipart = "payd.multipart"

// Bounds of an upload's form the fingerprint reads, as ReadForm(1 MiB)
// bounded its own: at most maxFormParts parts, and maxFieldBytes of fields
// (not files) in all, its 1 MiB and the 10 MiB it adds for fields. The body
// itself is already capped by the Body reader (64 MiB for an upload), and
// a file is hashed as it streams.
const (
	maxFormParts  = 1000
	maxFieldBytes = 11 << 20
)

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
// upload (with a new boundary) presents the same request. It reads the
// parts from raw as they stream, so that a file is hashed where it lies,
// never copied to memory or spilled to a temporary file as
// multipart.Reader.ReadForm would. A part is a file when it names one, as
// ReadForm has it, and a part without a form name is left out.
func canonicalMultipart(c echo.Context, raw []byte) ([]byte, string, error) {
	_, params, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || params["boundary"] == "" {
		return nil, "", ErrMalformedBody
	}
	r := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
	fields, files := map[string][]string{}, map[string][]string{}
	fieldBytes := int64(maxFieldBytes)
	for parts := 0; ; parts++ {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || parts == maxFormParts {
			return nil, "", ErrMalformedBody
		}
		name := p.FormName()
		if name == "" {
			continue
		}
		if p.FileName() == "" {
			v, err := io.ReadAll(io.LimitReader(p, fieldBytes+1))
			if fieldBytes -= int64(len(v)); err != nil || fieldBytes < 0 {
				return nil, "", ErrMalformedBody
			}
			fields[name] = append(fields[name], string(v))
			continue
		}
		h := sha256.New()
		if _, err := io.Copy(h, p); err != nil {
			return nil, "", ErrMalformedBody
		}
		files[name] = append(files[name], hex.EncodeToString(h.Sum(nil)))
	}
	out, err := json.Marshal(map[string]any{"fields": fields, "files": files})
	return out, "", err
}
