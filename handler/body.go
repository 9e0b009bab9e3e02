package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
)

// MaxBodyBytes is the largest request body payd reads (1 MiB,
// docs/guarantees.md#http-conventions), but for an upload: MaxUploadBytes
// is the largest multipart body of a route that takes one (a settlement
// CSV of up to 200,000 rows, provider.MaxSettlementRows; ADR 0066).
const (
	MaxBodyBytes   = 1 << 20
	MaxUploadBytes = 64 << 20
)

const ctxBody = "payd.body"

// body returns the request body, read once and kept for the handler: the
// idempotency middleware reads it first to fingerprint it. It enforces the
// size limit (413) and, for a non-empty body, the JSON content type (415).
func body(c echo.Context) ([]byte, error) {
	if b, ok := c.Get(ctxBody).([]byte); ok {
		return b, nil
	}
	r := c.Request()
	limit, tooLargeErr := int64(MaxBodyBytes), errTooLarge
	if idempotency.IsMultipart(c) {
		limit, tooLargeErr = MaxUploadBytes, errUploadTooLarge
	}
	if r.ContentLength > limit {
		return nil, tooLargeErr
	}
	// A body that says its length is read into a buffer of that size:
	// io.ReadAll would grow its buffer by doubling, holding up to twice a
	// large upload (a settlement file of 100,000 lines, 16 MiB) while it
	// reads.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), r.Body, limit))
	b := buf.Bytes()
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, tooLargeErr
	}
	if err != nil {
		return nil, errMalformedJSON
	}
	if ct := r.Header.Get(echo.HeaderContentType); ct != echo.MIMEApplicationJSON && len(bytes.TrimSpace(b)) > 0 {
		// The plain "application/json" every client sends needs no parsing.
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != echo.MIMEApplicationJSON && !(mt == echo.MIMEMultipartForm && idempotency.MultipartAllowed(c)) {
			return nil, errContentType
		}
	}
	// Put the bytes back, so a multipart form can still be parsed from them.
	r.Body = io.NopCloser(bytes.NewReader(b))
	c.Set(ctxBody, b)
	return b, nil
}

// decode reads the request body into dst strictly: unknown fields,
// trailing data, type mismatches and what strictJSON refuses are 400
// validation_failed.
func decode(c echo.Context, dst any) error {
	b, err := requestBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		// encoding/json names only the first unknown field or wrong type;
		// the caller is told all of them at once.
		if invalid := fieldProblems(b, reflect.TypeOf(dst)); len(invalid) > 0 {
			return invalid.Err()
		}
		return decodeProblem(err)
	}
	if dec.More() {
		return errMalformedJSON
	}
	return nil
}

func decodeProblem(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return &domain.ValidationError{Field: typeErr.Field, Reason: "has the wrong type (amounts are decimal strings such as \"12.30\")"}
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errMalformedJSON
	default:
		// encoding/json reports an unknown field only as text.
		return &domain.ValidationError{Reason: "invalid request body: " + trimJSONPrefix(err.Error())}
	}
}

func trimJSONPrefix(s string) string {
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// keyField lets every mutating request carry its idempotency key in the
// body as request_id, for clients that cannot set headers.
type keyField struct {
	RequestID string `json:"request_id,omitempty"`
}

// writeJSON renders v; errors get the problem media type.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeRaw(c, status, b)
}

func writeRaw(c echo.Context, status int, b []byte) error {
	ct := echo.MIMEApplicationJSON
	if status >= 400 {
		ct = "application/problem+json"
	}
	return c.Blob(status, ct, b)
}
