package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/provider"
)

// Tracing is payd's OpenTelemetry tracing (ADR 0022): off unless
// OTEL_EXPORTER_OTLP_ENDPOINT is set. Off means nothing is wrapped — no
// span is made, no header added — so it costs nothing. Nothing is global:
// the tracer provider and the W3C propagator are handed to the server
// handler and the provider client that use them.
type Tracing struct {
	tp trace.TracerProvider // nil: tracing is off
	// Shutdown flushes the spans still batched and stops exporting.
	Shutdown func(context.Context) error
}

// TracingConfig says where spans go.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP collector's base URL
	// (OTEL_EXPORTER_OTLP_ENDPOINT); empty is tracing off.
	Endpoint string
	Env      string // PAYD_ENV, a resource attribute of every span
	// Provider, optional (tests), is used instead of an exporter.
	Provider trace.TracerProvider
}

// propagator is the W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// StartTracing exports spans over OTLP/HTTP to cfg.Endpoint (the
// collector's base URL: spans go to its /v1/traces), batched. A test may
// hand its own provider in cfg.Provider instead.
func StartTracing(ctx context.Context, cfg TracingConfig) (Tracing, error) {
	off := Tracing{Shutdown: func(context.Context) error { return nil }}
	if cfg.Provider != nil {
		return Tracing{tp: cfg.Provider, Shutdown: off.Shutdown}, nil
	}
	if cfg.Endpoint == "" {
		return off, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return off, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "payd"), attribute.String("payd.env", cfg.Env))))
	return Tracing{tp: tp, Shutdown: tp.Shutdown}, nil
}

// On reports whether spans are made.
func (t Tracing) On() bool { return t.tp != nil }

// Server wraps payd's handler: one server span per request, continuing the
// caller's trace when it sent a traceparent. The span is named after the
// route once Echo has matched it (routeSpan).
func (t Tracing) Server(e *echo.Echo) http.Handler {
	if !t.On() {
		return e
	}
	e.Use(routeSpan)
	return otelhttp.NewHandler(e, "payd", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(propagator),
		otelhttp.WithFilter(traced))
}

// traced leaves probes and scrapes out of the traces: a span every few
// seconds per replica for /healthz, /readyz and /metrics tells nothing.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return true
}

// routeSpan names the server span "METHOD /route/:pattern": a name from a
// fixed set, never the raw path with its IDs.
func routeSpan(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if route := c.Path(); route != "" {
			span := trace.SpanFromContext(c.Request().Context())
			span.SetName(c.Request().Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		return next(c)
	}
}

// ProviderOptions make the provider client send through an instrumented
// transport: a client span per call, and the traceparent header so the
// provider's own traces join payd's. timeout is one call's
// (PAYD_PROVIDER_TIMEOUT).
func (t Tracing) ProviderOptions(timeout time.Duration) []provider.Option {
	opts := []provider.Option{provider.WithTimeout(timeout)}
	if !t.On() {
		return opts
	}
	hc := &http.Client{Transport: otelhttp.NewTransport(provider.NewTransport(),
		otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return "provider " + r.Method + " " + providerRoute(r.URL.Path)
		}))}
	return append(opts, provider.WithHTTPClient(hc))
}

// providerRoute is a provider path without its key: /v1/charges/{key}.
func providerRoute(path string) string {
	if rest, ok := strings.CutPrefix(path, "/v1/charges/"); ok && rest != "" {
		return "/v1/charges/{key}"
	}
	return path
}
