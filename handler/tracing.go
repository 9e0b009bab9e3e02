package handler

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/otel/trace"
)

// requestIDKey carries the tracing ID in a request's context.
type requestIDKey struct{}

// RequestIDFrom returns the tracing ID (X-Request-ID) of the request ctx
// belongs to, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID is Echo's RequestID middleware (X-Request-ID is the tracing ID,
// docs/guarantees.md#http-conventions) with two additions: the ID goes into the request's context, so
// every line logged with that context carries it (see TraceLogs), and a
// caller's own ID is kept only when it is a short plain token — it ends up
// in every log line, so it may not be an arbitrary blob.
func requestID() echo.MiddlewareFunc {
	return middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: uuid.NewString,
		RequestIDHandler: func(c echo.Context, id string) {
			if !validTraceID(id) {
				id = uuid.NewString()
				c.Response().Header().Set(echo.HeaderXRequestID, id)
			}
			r := c.Request()
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
		},
	})
}

// validTraceID accepts 1 to 128 characters of [A-Za-z0-9._:-].
func validTraceID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// TraceLogs wraps a slog handler so that every record logged with a
// request's context carries its request_id, whoever logs it — the access
// log, the error handler, or any later code that passes ctx along.
func TraceLogs(h slog.Handler) slog.Handler {
	if _, ok := h.(traceHandler); ok {
		return h
	}
	return traceHandler{h}
}

type traceHandler struct{ slog.Handler }

// Handle adds request_id unless the record already has one, and the
// OpenTelemetry trace_id and span_id when ctx carries a valid span context
// (ADR 0022), sampled or not, so a log line leads to its trace and the
// lines of one traced request share an id even when it was not exported.
func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestIDFrom(ctx); id != "" && !hasAttr(r, "request_id") {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !hasAttr(r, "trace_id") {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs and WithGroup keep the wrapper around derived handlers.
func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

// WithGroup keeps the wrapper around a grouped handler.
func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
