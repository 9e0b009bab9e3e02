package telemetry

import (
	"context"
	"log/slog"

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

// WithRequestID returns ctx carrying the tracing ID id (X-Request-ID) of
// the request it belongs to: every line logged with it carries the ID (see
// TraceLogs).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
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
