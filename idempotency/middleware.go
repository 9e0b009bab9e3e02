package idempotency

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

const (
	ctxKey         = "payd.idempotency_key"
	ctxFingerprint = "payd.idempotency_fingerprint"
	ctxFinal       = "payd.idempotency_final"
	ctxSeal        = "payd.idempotency_seal"
)

// KeyMode says whether a route requires an idempotency key.
type KeyMode int

// The modes of the idempotency middleware.
const (
	KeyRequired KeyMode = iota // pay, cancel, refunds, admin actions (an answer that carries a secret is sealed by its handler: Seal)
	KeyOptional                // order creation: without a key, no dedupe; the stored response is encrypted (it carries the order's client secret)
	KeySealed                  // required, and the stored response is encrypted (it carries a token)
)

// Errors about the request itself, raised before the engine runs; the
// HTTP error table renders them.
var (
	// ErrMalformedBody: the body is not JSON (or not a readable multipart form).
	ErrMalformedBody = errors.New("request body is not valid JSON")
	// ErrKeyConflict: the Idempotency-Key header and the body's request_id differ.
	ErrKeyConflict = errors.New("the Idempotency-Key header and the request_id field differ")
)

// Middleware is the one mechanism every mutating route goes through
// (docs/guarantees.md#idempotency-rules): it reads and fingerprints the request, takes the key or replays
// the stored answer, runs the handler, and stores what it answered.
type Middleware struct {
	Engine *Engine
	Log    *slog.Logger
	// Scope is the caller's identity, the key's scope: keys never cross callers.
	Scope func(c echo.Context) string
	// Body reads the request body once (its size limit and content type
	// checked) and keeps it for the handler, which reads it again.
	Body func(c echo.Context) ([]byte, error)
	// RetryAfter, optional, is the Retry-After in seconds (0: none) a
	// replayed answer carries. A record keeps an answer's status and body,
	// not its headers, yet a concurrent duplicate given a stored 503 must
	// hear when to retry, as the original did.
	RetryAfter func(r Response) int
}

// Wrap wraps one route. It must run after authentication: the caller's
// identity is the key's scope.
func (m *Middleware) Wrap(mode KeyMode) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			raw, err := m.Body(c)
			if err != nil {
				return err
			}
			canonical, bodyKey, err := canonicalBody(raw)
			if IsMultipart(c) {
				canonical, bodyKey, err = canonicalMultipart(c, raw)
			}
			if err != nil {
				return err
			}
			key, err := requestKey(c.Request().Header.Get("Idempotency-Key"), bodyKey, mode)
			if err != nil || key == "" {
				return orNext(err, next, c)
			}
			c.Set(ctxKey, key)
			call := Call{
				Scope: m.Scope(c), Key: key, Method: c.Request().Method, Path: c.Request().URL.Path,
				Body: canonical, OrderID: c.Param("id"), Seal: mode == KeySealed || mode == KeyOptional,
			}
			call.fingerprint = call.Fingerprint() // once: Begin checks it again
			c.Set(ctxFingerprint, call.fingerprint)
			start, err := m.Engine.Begin(c.Request().Context(), call)
			if errors.Is(err, ErrStoredResponseUnreadable) {
				// The caller gets 410; the operator learns why (the key changed).
				m.Log.WarnContext(c.Request().Context(), "stored response unreadable: was PAYD_SECRET_KEY changed?", "err", err,
					"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
			}
			if err != nil {
				return err
			}
			if start.Replay != nil {
				return m.replay(c, *start.Replay)
			}
			return m.execute(c, next, start.For(call))
		}
	}
}

// execute runs the handler with the response held back, stores it, and
// only then sends it (ADR 0051). An answer sent but not stored would not be
// the key's answer: the record left processing, a retry would take over,
// run again and answer the order as it then stands. So an answer that
// cannot be stored is not sent; the caller is told to retry instead
// (ErrAnswerNotStored: 503 with Retry-After). And a caller who has the
// answer and retries at once must find the record complete, or a decline
// it already saw would be replayed to it as a concurrent duplicate's
// instead of starting a new attempt. The store uses a context the client
// cannot cancel: a client hanging up must not leave the record
// half-finished.
func (m *Middleware) execute(c echo.Context, next echo.HandlerFunc, call Call) error {
	res := c.Response()
	w, headers := res.Writer, res.Header().Clone()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	res.Writer = rec
	if err := next(c); err != nil {
		c.Error(err)
	}
	call.final, _ = c.Get(ctxFinal).(bool)
	if sealed, _ := c.Get(ctxSeal).(bool); sealed {
		call.Seal = true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
	defer cancel()
	f, err := m.Engine.Finish(ctx, call, Response{Status: res.Status, Body: rec.buf.Bytes()})
	if err == nil && !f.Replayed {
		return rec.send()
	}
	// Another answer than the handler's goes out: the handler's is
	// dropped, headers and all.
	res.Writer, res.Status, res.Size, res.Committed = w, http.StatusOK, 0, false
	h := res.Header()
	clear(h)
	for k, v := range headers {
		h[k] = v
	}
	if err != nil {
		return err // the error table logs it (WARN) and answers 503
	}
	return m.replay(c, f.Response)
}

func orNext(err error, next echo.HandlerFunc, c echo.Context) error {
	if err != nil {
		return err
	}
	return next(c)
}

// requestKey picks the idempotency key from the header or the body's
// request_id; both present and different is a 400.
func requestKey(header, bodyKey string, mode KeyMode) (string, error) {
	if header != "" && bodyKey != "" && header != bodyKey {
		return "", ErrKeyConflict
	}
	key := header
	if key == "" {
		key = bodyKey
	}
	switch {
	case key == "" && mode == KeyOptional:
		return "", nil
	case key == "":
		return "", domain.ErrKeyMissing
	case !domain.ValidKey(key):
		return "", domain.ErrKeyInvalid
	}
	return key, nil
}

// KeyOf is the key the middleware accepted for this request ("" without one).
func KeyOf(c echo.Context) string {
	k, _ := c.Get(ctxKey).(string)
	return k
}

// Final marks the failure this request is answering as final for its
// key: stored once and replayed to every later request with the key,
// instead of leaving the key free to run again (Engine.Finish). A route
// whose retry could only find what its first try did — a refund, asked
// of the provider under its own key — marks every failure but "outcome
// unknown" so, and a key keeps one answer (ADR 0043).
func Final(c echo.Context) { c.Set(ctxFinal, true) }

// Seal marks this request's answer as carrying a secret, on a route whose
// other answers carry none (a merchant's cancel answers the order's
// client secret; a buyer's does not): it is stored encrypted, as a
// KeySealed route's, and its look-up shows its status, not its body.
func Seal(c echo.Context) { c.Set(ctxSeal, true) }

// FingerprintOf is the fingerprint (Call.Fingerprint) of the request the
// middleware accepted a key for, for use cases that keep it on the row they
// create.
func FingerprintOf(c echo.Context) string {
	fp, _ := c.Get(ctxFingerprint).(string)
	return fp
}

// replay sends the stored answer of the original request, marked as such.
// Every answer payd stores is JSON; an error is a problem document.
func (m *Middleware) replay(c echo.Context, r Response) error {
	c.Response().Header().Set("Idempotent-Replayed", "true")
	if m.RetryAfter != nil {
		if s := m.RetryAfter(r); s > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(s))
		}
	}
	if r.Status >= 400 {
		return c.Blob(r.Status, "application/problem+json", r.Body)
	}
	return c.Blob(r.Status, echo.MIMEApplicationJSON, r.Body)
}

// recorder holds what the handler writes until the answer is stored; send
// then writes it out.
type recorder struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) { r.status = code }

func (r *recorder) Write(b []byte) (int, error) { return r.buf.Write(b) }

func (r *recorder) send() error {
	r.ResponseWriter.WriteHeader(r.status)
	_, err := r.ResponseWriter.Write(r.buf.Bytes())
	return err
}
