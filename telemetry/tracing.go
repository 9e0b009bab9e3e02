package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/payd/payd/internal/version"
	"github.com/payd/payd/provider"
)

// Tracing is payd's OpenTelemetry tracing (ADR 0022, ADR 0035), configured
// by the specification's OTEL_* variables alone (tracingEnv). Off means
// nothing is wrapped — no span is made, no header added, no driver or
// client instrumented — so it costs nothing. Nothing is global: the tracer
// provider and the propagator are handed to the server handler, the
// provider client, the database pools and the Redis client that use them.
type Tracing struct {
	tp   trace.TracerProvider // nil: tracing is off
	prop propagation.TextMapPropagator
	// Shutdown flushes the spans still batched and stops exporting.
	Shutdown func(context.Context) error
}

// TracingConfig is what payd adds to the OTEL_* variables.
type TracingConfig struct {
	Env string // PAYD_ENV: payd.env and deployment.environment.name, unless OTEL_RESOURCE_ATTRIBUTES says otherwise
	// Version is service.version unless OTEL_RESOURCE_ATTRIBUTES says
	// otherwise; empty: the binary's build version (internal/version: stamped
	// with -ldflags, else the toolchain's record), as payd_build_info and
	// `payd version` show it.
	Version string
	// Provider, optional (tests), is used instead of an exporter: tracing
	// is then on whatever the variables say.
	Provider trace.TracerProvider
	// Log, optional, gets the SDK's own errors (a collector that cannot
	// be reached, a rejected batch) as JSON lines like payd's others.
	Log *slog.Logger
}

// StartTracing starts tracing as the OTEL_* variables say (tracingEnv):
// spans batched and exported over OTLP, gRPC or HTTP/protobuf, flushed by
// Shutdown. A test may hand its own provider in cfg.Provider instead.
// Invalid variables are an error naming the variable: payd refuses to start
// rather than trace differently from what was asked. The variables are
// read from the process environment, where the exporters and the SDK read
// theirs.
func StartTracing(ctx context.Context, cfg TracingConfig) (Tracing, error) {
	off := Tracing{Shutdown: func(context.Context) error { return nil }}
	env, err := readTracingEnv(os.Getenv)
	if err != nil {
		return off, err
	}
	if cfg.Provider != nil {
		return Tracing{tp: schemaScoped{tp: cfg.Provider}, prop: env.propagator, Shutdown: off.Shutdown}, nil
	}
	if !env.on {
		return off, nil
	}
	exp, err := newExporter(ctx, env.protocol)
	if err != nil {
		return off, err
	}
	serviceVersion := cfg.Version
	if serviceVersion == "" {
		serviceVersion = version.Read().Version
	}
	res, err := tracingResource(ctx, cfg.Env, serviceVersion)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return off, err
	}
	// No WithSampler: the SDK reads OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG itself (checked in readTracingEnv);
	// parentbased_always_on when unset.
	if cfg.Log != nil {
		// The SDK reports export failures only through OpenTelemetry's
		// global error handler, by default the standard log package's
		// plain text: send them through payd's logger instead.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			cfg.Log.Warn("opentelemetry", "err", err.Error())
		}))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	if cfg.Log != nil {
		// Where the spans go, so an operator missing them can tell; never
		// the headers (OTEL_EXPORTER_OTLP_HEADERS holds credentials), and
		// a password in the endpoint redacted.
		sampler := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))
		if sampler == "" {
			sampler = "parentbased_always_on"
		}
		cfg.Log.Info("tracing on: exporting spans over OTLP", "protocol", env.protocol, "endpoint", env.endpoint, "sampler", sampler)
	}
	return Tracing{tp: schemaScoped{tp: tp}, prop: env.propagator, Shutdown: tp.Shutdown}, nil
}

// schemaScoped is a tracer provider whose tracers say which version of the
// semantic conventions their spans follow (the scope's schema URL), so a
// collector can translate them when the conventions move on. The version
// is otelhttp's; payd's SQL and Redis spans use the same names
// (db.system.name, db.query.text, server.address). A library that names
// its own schema keeps it.
type schemaScoped struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p schemaScoped) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return p.tp.Tracer(name, append([]trace.TracerOption{trace.WithSchemaURL(semconv.SchemaURL)}, opts...)...)
}

// TracerProvider is what spans of payd's own are made with (a notify
// delivery's): nil when tracing is off.
func (t Tracing) TracerProvider() trace.TracerProvider { return t.tp }

// On reports whether spans are made.
func (t Tracing) On() bool { return t.tp != nil }

// Server wraps payd's handler: one server span per request, continuing the
// caller's trace (and baggage) when it sent one in the headers the
// propagators read. The span is named after the route once Echo has
// matched it (routeSpan).
func (t Tracing) Server(e *echo.Echo) http.Handler {
	if !t.On() {
		return e
	}
	e.Use(routeSpan)
	return otelhttp.NewHandler(e, "payd", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
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
// fixed set, never the raw path with its IDs. It also overwrites the
// url.path otelhttp recorded before routing with one whose secret
// parameters are redacted (spanPath).
func routeSpan(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if route := c.Path(); route != "" {
			span := trace.SpanFromContext(c.Request().Context())
			span.SetName(c.Request().Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route),
				attribute.String("url.path", spanPath(route, c.Request().URL.Path)))
		}
		return next(c)
	}
}

// ProviderOptions make the sandbox's client send through an instrumented
// transport (ProviderTransport). timeout is one call's
// (PAYD_PROVIDER_TIMEOUT).
func (t Tracing) ProviderOptions(timeout time.Duration) []provider.Option {
	opts := []provider.Option{provider.WithTimeout(timeout)}
	if !t.On() {
		return opts
	}
	return append(opts, provider.WithHTTPClient(&http.Client{Transport: t.ProviderTransport(provider.NewTransport())}))
}

// ProviderTransport is next with a client span per call to the provider,
// the sandbox or Stripe, and the propagators' headers (traceparent,
// baggage) so the provider's own traces join payd's. As the HTTP client
// conventions ask, the span is named "METHOD /url/template" and carries
// url.template (urlTemplate): a name from a fixed set, never a path with
// an ID in it. Off, next is returned as it is.
func (t Tracing) ProviderTransport(next http.RoundTripper) http.RoundTripper {
	if !t.On() {
		return next
	}
	return otelhttp.NewTransport(templated{next: next},
		otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + urlTemplate(r.URL.Path)
		}))
}

// templated adds url.template to the client span otelhttp started for the
// request, which it hands down in the request's context.
type templated struct{ next http.RoundTripper }

func (t templated) RoundTrip(r *http.Request) (*http.Response, error) {
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("url.template", urlTemplate(r.URL.Path)))
	return t.next.RoundTrip(r)
}

// pathWords are the provider paths' segments after a resource that are
// words, not IDs: the sandbox's /v1/charges/by-id/{id}, Stripe's
// /v1/payment_intents/search and /v1/payment_intents/{id}/confirm.
var pathWords = map[string]bool{"by-id": true, "search": true, "confirm": true, "capture": true, "cancel": true}

// urlTemplate is a provider path with its IDs and keys replaced by {id}:
// /v1/charges/{id}, /v1/charges/by-id/{id}, /v1/payment_intents/{id}/confirm.
// The version and the resource (the first two segments) are kept.
func urlTemplate(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := 2; i < len(segs); i++ {
		if segs[i] != "" && !pathWords[segs[i]] {
			segs[i] = "{id}"
		}
	}
	return "/" + strings.Join(segs, "/")
}
