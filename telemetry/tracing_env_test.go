package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"

	"github.com/payd/payd/internal/otlptest"
	"github.com/payd/payd/internal/version"
)

// otelVars are the variables these tests set; each test starts with all
// of them empty, whatever the machine's environment holds.
var otelVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_PROPAGATORS", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}

// otelEnv sets the OTEL_* variables to vars, every other one of otelVars
// to empty, for the test.
func otelEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, k := range otelVars {
		t.Setenv(k, vars[k])
	}
}

// traceOne starts tracing as the environment says, makes one span, stops
// (flushing it) and reports whether tracing was on.
func traceOne(t *testing.T, cfg TracingConfig) bool {
	t.Helper()
	tr, err := StartTracing(context.Background(), cfg)
	if err != nil {
		t.Fatalf("StartTracing = %v", err)
	}
	if tr.On() {
		_, span := tr.tp.Tracer("test").Start(context.Background(), "one")
		span.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	return tr.On()
}

// TestTracingResource: service.name is OTEL_SERVICE_NAME's, else
// OTEL_RESOURCE_ATTRIBUTES', else payd's default "payd"; the environment's
// attributes win over payd's own; service.version and payd.env are there.
func TestTracingResource(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		want map[string]string
	}{
		{"default", nil, map[string]string{"service.name": "payd", "service.version": "v1.2.3", "payd.env": "production",
			"deployment.environment.name": "production", "telemetry.sdk.language": "go"}},
		{"OTEL_SERVICE_NAME", map[string]string{"OTEL_SERVICE_NAME": "payd-eu"}, map[string]string{"service.name": "payd-eu", "service.version": "v1.2.3"}},
		{"OTEL_RESOURCE_ATTRIBUTES", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=payd-us,team=payments,deployment.environment.name=staging"},
			map[string]string{"service.name": "payd-us", "team": "payments", "deployment.environment.name": "staging", "payd.env": "production"}},
		{"OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES", map[string]string{"OTEL_SERVICE_NAME": "payd-eu", "OTEL_RESOURCE_ATTRIBUTES": "service.name=payd-us,service.version=v9"},
			map[string]string{"service.name": "payd-eu", "service.version": "v9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint}
			for k, v := range c.vars {
				vars[k] = v
			}
			otelEnv(t, vars)
			if !traceOne(t, TracingConfig{Env: "production", Version: "v1.2.3"}) {
				t.Fatal("tracing off, want on")
			}
			spans := rcv.Spans()
			if len(spans) != 1 {
				t.Fatalf("received %d spans, want 1", len(spans))
			}
			for k, v := range c.want {
				if got := spans[0].Resource[k]; got != v {
					t.Errorf("resource %s = %q, want %q (resource %v)", k, got, v, spans[0].Resource)
				}
			}
		})
	}
}

// TestTracingBuildVersion: without a version of its own, service.version
// is the binary's build version, as payd_build_info has it, never empty.
func TestTracingBuildVersion(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})
	traceOne(t, TracingConfig{Env: "development"})
	want := version.Read().Version
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Resource["service.version"] != want || want == "" {
		t.Fatalf("spans %v, want one with service.version %q", spans, want)
	}
}

// TestTracingOnOff: which variables turn tracing on, and where spans go.
func TestTracingOnOff(t *testing.T) {
	for _, c := range []struct {
		name string
		vars func(endpoint string) map[string]string
		on   bool
		path string // where the spans arrive
	}{
		{"nothing set", func(string) map[string]string { return nil }, false, ""},
		{"generic endpoint, /v1/traces added", func(e string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e} }, true, "/v1/traces"},
		{"traces endpoint alone, used as it is", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": e + "/v1/traces"}
		}, true, "/v1/traces"},
		{"traces endpoint over the generic one", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": e + "/v1/traces"}
		}, true, "/v1/traces"},
		{"OTEL_SDK_DISABLED", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_SDK_DISABLED": "TRUE"}
		}, false, ""},
		{"OTEL_SDK_DISABLED=false", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_SDK_DISABLED": "false"}
		}, true, "/v1/traces"},
		{"OTEL_TRACES_EXPORTER=none", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_TRACES_EXPORTER": "none"}
		}, false, ""},
		{"OTEL_TRACES_EXPORTER=otlp", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_TRACES_EXPORTER": "otlp"}
		}, true, "/v1/traces"},
		{"always_off sampler: on, nothing sampled", func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_TRACES_SAMPLER": "always_off"}
		}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			otelEnv(t, c.vars(rcv.Endpoint))
			if on := traceOne(t, TracingConfig{Env: "development"}); on != c.on {
				t.Fatalf("tracing on = %v, want %v", on, c.on)
			}
			paths := rcv.Paths()
			if c.path == "" {
				if n := len(rcv.Spans()); n != 0 {
					t.Errorf("received %d spans, want none", n)
				}
				return
			}
			if len(rcv.Spans()) != 1 || !slices.Contains(paths, c.path) {
				t.Errorf("received %d spans at %v, want 1 at %s", len(rcv.Spans()), paths, c.path)
			}
		})
	}
}

// TestTracingExporterOTLPDefault: OTEL_TRACES_EXPORTER=otlp with no
// endpoint asks for the exporter explicitly: on, to the specification's
// default endpoint.
func TestTracingExporterOTLPDefault(t *testing.T) {
	otelEnv(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})
	tr, err := StartTracing(context.Background(), TracingConfig{Env: "development"})
	if err != nil || !tr.On() {
		t.Fatalf("StartTracing = on %v, %v; want on", tr.On(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = tr.Shutdown(ctx) // nothing listens there; nothing to flush either
}

// TestTracingProtocol: the traces protocol variable, else the generic
// one, else http/protobuf, picks the exporter.
func TestTracingProtocol(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		grpc bool
	}{
		{"default http/protobuf", nil, false},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, false},
		{"traces protocol over the generic one", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, true},
		{"traces protocol http over generic grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			grpcRcv, httpRcv := otlptest.NewGRPC(t), otlptest.NewHTTP(t)
			want, other := httpRcv, grpcRcv
			if c.grpc {
				want, other = grpcRcv, httpRcv
			}
			vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": want.Endpoint}
			for k, v := range c.vars {
				vars[k] = v
			}
			otelEnv(t, vars)
			traceOne(t, TracingConfig{Env: "development"})
			if len(want.Spans()) != 1 || len(other.Spans()) != 0 {
				t.Errorf("spans: %d at the receiver of the chosen protocol, %d at the other; want 1 and 0", len(want.Spans()), len(other.Spans()))
			}
		})
	}
}

// TestTracingHeaders: OTEL_EXPORTER_OTLP_HEADERS and its traces form,
// read by the exporter, go with every export over either protocol.
func TestTracingHeaders(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			if proto == "grpc" {
				rcv = otlptest.NewGRPC(t)
			}
			otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": proto,
				"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=eu%201", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20k1"})
			traceOne(t, TracingConfig{Env: "development"})
			hs := rcv.Headers()
			if len(hs) != 1 || hs[0]["authorization"] != "Bearer k1" {
				t.Errorf("export headers = %v, want authorization: Bearer k1", hs)
			}
		})
	}
}

// TestTracingPropagators: by default a request's traceparent and baggage
// are taken in by the server span and passed on to the provider;
// OTEL_PROPAGATORS chooses others.
func TestTracingPropagators(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		name        string
		propagators string
		baggage     bool
	}{
		{"default tracecontext,baggage", "", true},
		{"tracecontext only", "tracecontext", false},
		{"b3 and baggage", "baggage, tracecontext ,b3", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_PROPAGATORS": c.propagators})
			tr, err := StartTracing(context.Background(), TracingConfig{Env: "development"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tr.Shutdown(context.Background()) }()
			e := echo.New()
			var seen string
			e.GET("/x", func(ec echo.Context) error {
				seen = baggage.FromContext(ec.Request().Context()).Member("tenant").Value()
				out := propagation.HeaderCarrier{}
				tr.prop.Inject(ec.Request().Context(), out)
				return ec.JSON(http.StatusOK, map[string]string{"traceparent": out.Get("traceparent"), "baggage": out.Get("baggage")})
			})
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.Header.Set("traceparent", parent)
			req.Header.Set("baggage", "tenant=eu-1")
			rec := httptest.NewRecorder()
			tr.Server(e).ServeHTTP(rec, req)
			if got := seen == "eu-1"; got != c.baggage {
				t.Errorf("baggage seen by the handler = %q, want it taken in: %v", seen, c.baggage)
			}
			body := rec.Body.String()
			if !strings.Contains(body, "4bf92f3577b34da6a3ce929d0e0e4736") {
				t.Errorf("handler's outgoing headers %s: want the caller's trace continued", body)
			}
			if got := strings.Contains(body, "tenant=eu-1"); got != c.baggage {
				t.Errorf("handler's outgoing headers %s: baggage passed on = %v, want %v", body, got, c.baggage)
			}
		})
	}
}

// TestTracingRefusesBadValues: a value payd cannot follow stops it, with
// the variable named, rather than tracing otherwise than asked.
func TestTracingRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector/v1/traces"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://"},
		{"OTEL_PROPAGATORS", "tracecontext,w3c"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
		{"OTEL_SDK_DISABLED", "yes"},
		{"OTEL_TRACES_EXPORTER", "zipkin"},
		{"OTEL_TRACES_EXPORTER", "otlp,console"},
		{"OTEL_RESOURCE_ATTRIBUTES", "team"},
		{"OTEL_RESOURCE_ATTRIBUTES", "team=%zz"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", c.name: c.value}
			if c.name == "OTEL_TRACES_SAMPLER_ARG" {
				vars["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
			}
			if err := CheckTracingEnv(func(k string) string { return vars[k] }); err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("CheckTracingEnv = %v, want an error naming %s", err, c.name)
			}
			otelEnv(t, vars)
			if tr, err := StartTracing(context.Background(), TracingConfig{Env: "development"}); err == nil || !strings.Contains(err.Error(), c.name) || tr.On() {
				t.Errorf("StartTracing = on %v, %v; want off and an error naming %s", tr.On(), err, c.name)
			}
		})
	}
	for _, ok := range []map[string]string{
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
		{"OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_SAMPLER_ARG": "ignored"},
		{"OTEL_PROPAGATORS": "none"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector.example:4318/custom/path"},
		{"OTEL_RESOURCE_ATTRIBUTES": "team=pay%20ments,region=eu"},
	} {
		if err := CheckTracingEnv(func(k string) string { return ok[k] }); err != nil {
			t.Errorf("CheckTracingEnv(%v) = %v, want it accepted", ok, err)
		}
	}
}

// TestTracingErrorsLogged: an export that fails (no collector listens) is
// reported as a JSON line through payd's logger, not as the standard log
// package's plain text.
func TestTracingErrorsLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": closed})
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	tr, err := StartTracing(context.Background(), TracingConfig{Log: log})
	if err != nil {
		t.Fatalf("StartTracing = %v", err)
	}
	_, span := tr.tp.Tracer("test").Start(context.Background(), "one")
	span.End()
	_ = tr.Shutdown(context.Background()) // flushes: the export fails
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("a failed export logged nothing through payd's logger")
	}
	failures := 0
	for _, l := range lines {
		var rec map[string]any
		err := json.Unmarshal([]byte(l), &rec)
		if err == nil && strings.HasPrefix(fmt.Sprint(rec["msg"]), "tracing on") {
			continue // the start's line (TestTracingLogsWhereSpansGo)
		}
		if err != nil || rec["msg"] != "opentelemetry" || rec["err"] == "" {
			t.Errorf("logged %q, want a JSON line with msg opentelemetry and err (%v)", l, err)
		}
		failures++
	}
	if failures == 0 {
		t.Errorf("a failed export logged %q, want a line for it", lines)
	}
}

// syncBuffer is a bytes.Buffer safe for the SDK's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTracingLogsWhereSpansGo: tracing on, payd logs once at start where
// its spans go (protocol, the endpoint's scheme, host and path as the
// exporter calls it, the sampler), never a user, password, query or
// fragment of the endpoint, nor the exporter's headers; off, nothing.
func TestTracingLogsWhereSpansGo(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"generic endpoint over HTTP", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://ops:hunter2@collector.internal:4318/",
			"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer sekrit-token",
			"OTEL_TRACES_SAMPLER":         "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		}, []string{`"protocol":"http/protobuf"`, `"endpoint":"https://collector.internal:4318/v1/traces"`, `"sampler":"traceidratio"`}},
		{"traces endpoint over gRPC", map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector.internal:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		}, []string{`"protocol":"grpc"`, `"endpoint":"http://collector.internal:4317"`, `"sampler":"parentbased_always_on"`}},
		{"tokens in the user and the query", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://hunter2@collector.internal:4318/otlp?api-key=sekrit-token#frag",
		}, []string{`"endpoint":"https://collector.internal:4318/otlp/v1/traces"`}},
		{"default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			[]string{`"endpoint":"http://localhost:4318/v1/traces"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			otelEnv(t, c.env)
			var buf bytes.Buffer
			tr, err := StartTracing(context.Background(), TracingConfig{Env: "development", Log: slog.New(slog.NewJSONHandler(&buf, nil))})
			if err != nil || !tr.On() {
				t.Fatalf("StartTracing = on %v, %v; want on", tr.On(), err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = tr.Shutdown(ctx)
			out := buf.String()
			if strings.Count(out, "tracing on") != 1 {
				t.Errorf("log %q: want one line saying tracing is on", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("log %q: want %s", out, w)
				}
			}
			for _, secret := range []string{"hunter2", "sekrit-token"} {
				if strings.Contains(out, secret) {
					t.Errorf("log %q carries a secret (%s)", out, secret)
				}
			}
		})
	}
	otelEnv(t, nil)
	var buf bytes.Buffer
	if tr, err := StartTracing(context.Background(), TracingConfig{Env: "development", Log: slog.New(slog.NewJSONHandler(&buf, nil))}); err != nil || tr.On() {
		t.Fatalf("StartTracing with no variable = on %v, %v; want off", tr.On(), err)
	}
	if buf.Len() != 0 {
		t.Errorf("tracing off logged %q, want nothing", buf.String())
	}
}
