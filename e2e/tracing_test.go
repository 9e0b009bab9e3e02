package e2e

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/otlptest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/telemetry"
)

// traceparents records the traceparent header of every request the
// sandbox receives.
type traceparents struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (h *traceparents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Get("traceparent"))
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *traceparents) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// TestTracingPay: with tracing on, a pay request is one trace: payd's
// server span for the route, a client span for the charge beneath it, the
// traceparent of that span at the provider, and the trace id in the
// request's log lines.
func TestTracingPay(t *testing.T) {
	otelEnv(t, nil)
	rec := tracetest.NewSpanRecorder()
	p := start(t, tracedBy(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	seen := p.seen
	if status, _ := get(t, p.base+"/healthz"); status != http.StatusOK {
		t.Fatalf("GET /healthz = %d", status)
	}
	_, tok := p.register(newEmail())
	order := p.order(tok, "4.00")
	if r := p.pay(tok, order, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("Pay = %d %s, want 200", r.Status, r.Body)
	}

	var server, client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindServer && s.Name() == "POST /v1/orders/:id/pay":
			server = s
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "POST /v1/charges":
			client = s
		case strings.Contains(s.Name(), "/healthz"):
			t.Errorf("span %q: probes are not traced", s.Name())
		}
	}
	if server == nil || client == nil {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.SpanKind().String()+" "+s.Name())
		}
		t.Fatalf("spans = %v, want a server span POST /v1/orders/:id/pay and a client span POST /v1/charges", names)
	}
	traceID := server.SpanContext().TraceID()
	if client.SpanContext().TraceID() != traceID || client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("charge span in trace %s under span %s, want in the pay request's trace %s under its server span %s",
			client.SpanContext().TraceID(), client.Parent().SpanID(), traceID, server.SpanContext().SpanID())
	}
	want := "00-" + traceID.String() + "-" + client.SpanContext().SpanID().String() + "-01"
	found := false
	for _, tp := range seen.all() {
		found = found || tp == want
	}
	if !found {
		t.Errorf("traceparent headers at the provider = %q, want one %q", seen.all(), want)
	}
	logged := false
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "payment outcome" {
			logged = m["trace_id"] == traceID.String()
		}
	}
	if !logged {
		t.Errorf("no \"payment outcome\" log line with trace_id %s; logs:\n%s", traceID, p.logs.String())
	}
}

// TestTracingOff: without OTEL_EXPORTER_OTLP_ENDPOINT nothing is traced:
// no traceparent reaches the provider and no log line has a trace_id.
func TestTracingOff(t *testing.T) {
	otelEnv(t, nil)
	p := start(t, tracedBy(nil))
	seen := p.seen
	_, tok := p.register(newEmail())
	if r := p.pay(tok, p.order(tok, "4.00"), uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("Pay = %d %s, want 200", r.Status, r.Body)
	}
	for _, tp := range seen.all() {
		if tp != "" {
			t.Errorf("traceparent %q sent to the provider with tracing off", tp)
		}
	}
	if strings.Contains(p.logs.String(), `"trace_id"`) {
		t.Errorf("trace_id logged with tracing off")
	}
}

// otelEnv sets the OTEL_* variables for payd started in this process (it
// reads them from the process environment, as the OpenTelemetry SDK does),
// every other one empty.
func otelEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, k := range telemetry.TracingVariables {
		t.Setenv(k, vars[k])
	}
}

// tracedPay registers, creates an order of an unusual amount and pays it
// on s; the merchant creates another, which its client secret pays. It
// returns the values no span may carry: the amount, the email, the
// customer's token, the client secret and the requests' idempotency keys.
func tracedPay(t *testing.T, s *stack) []string {
	t.Helper()
	email := newEmail()
	_, tok := s.register(email)
	order := s.order(tok, "73.19")
	key := uuid.NewString()
	if r := s.pay(tok, order, key, "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("Pay = %d %s, want 200", r.Status, r.Body)
	}
	created := s.merchant(cmp.Or(s.merchantKey, testMerchantKey), "POST", "/v1/orders", uuid.NewString(),
		map[string]any{"items": []map[string]any{{"sku": s.priced("73.19"), "quantity": 1}}})
	secret, _ := created.json(t)["client_secret"].(string)
	if created.Status != http.StatusCreated || secret == "" {
		t.Fatalf("the merchant's order = %d %s, want 201 with a client secret", created.Status, created.Body)
	}
	secretKey := uuid.NewString()
	if r := s.pay(secret, created.json(t)["id"].(string), secretKey, "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("Pay with the client secret = %d %s, want 200", r.Status, r.Body)
	}
	return []string{"73.19", "7319", email, tok, key, secret, secretKey}
}

// TestTracingBySpec: payd configured by the specification's variables
// alone — OTEL_SERVICE_NAME and gRPC to OTEL_EXPORTER_OTLP_ENDPOINT, or
// HTTP/protobuf to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone — exports a
// pay's trace with its resource (service.name, service.version) and
// database spans under the pay's HTTP server span, each with its
// operation and none with a value the request bound.
func TestTracingBySpec(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			eachDialect(t, func(t *testing.T, dialect string) {
				var rcv *otlptest.Receiver
				vars := map[string]string{"OTEL_SERVICE_NAME": "payd-eu"}
				if proto == "grpc" {
					rcv = otlptest.NewGRPC(t)
					vars["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
					vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.Endpoint
				} else {
					rcv = otlptest.NewHTTP(t)
					vars["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = rcv.Endpoint + "/v1/traces"
				}
				otelEnv(t, vars)
				s := start(t, on(dialect))
				secrets := tracedPay(t, s)
				s.stop() // flushes the batch
				checkPayTrace(t, rcv.Spans(), dialect, secrets)
			})
		})
	}
}

// TestTracingBySpecProcess: the same of the built binary, `payd serve` as
// an OS process whose environment holds the variables, as a container's
// does: gRPC to OTEL_EXPORTER_OTLP_ENDPOINT, flushed on SIGTERM.
func TestTracingBySpecProcess(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := otlptest.NewGRPC(t)
		prov := startProcProvider(t, "")
		e := env{}
		for _, k := range telemetry.TracingVariables {
			e[k] = "" // none of the test's own
		}
		e["OTEL_SERVICE_NAME"], e["OTEL_EXPORTER_OTLP_PROTOCOL"], e["OTEL_EXPORTER_OTLP_ENDPOINT"] = "payd-eu", "grpc", rcv.Endpoint
		p := startPaydProc(t, "payd", paydEnv(dbtest.NewURL(t, migrations.Dialect(dialect)), prov.url, e))
		email := newEmail()
		_, tok := p.register(email)
		order := p.order(tok, "73.19")
		key := uuid.NewString()
		if r := p.pay(tok, order, key, "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("Pay = %d %s, want 200", r.Status, r.Body)
		}
		p.stop()
		checkPayTrace(t, rcv.Spans(), dialect, []string{"73.19", "7319", email, tok, key})
	})
}

// checkPayTrace finds the pay's server span among spans, with payd-eu's
// resource, and database spans beneath it.
func checkPayTrace(t *testing.T, spans []otlptest.Span, dialect string, secrets []string) {
	t.Helper()
	var pay otlptest.Span
	for _, sp := range spans {
		if sp.Kind == tracepb.Span_SPAN_KIND_SERVER && sp.Name == "POST /v1/orders/:id/pay" {
			pay = sp
		}
	}
	if pay.SpanID == "" {
		t.Fatalf("no server span POST /v1/orders/:id/pay among %d spans: %v", len(spans), spanNames(spans))
	}
	if pay.Resource["service.name"] != "payd-eu" || pay.Resource["service.version"] == "" {
		t.Errorf("resource = %v, want service.name payd-eu and a service.version", pay.Resource)
	}
	system := map[string]string{"sqlite": "sqlite", "mysql": "mysql"}[dialect]
	if dialect == "mysql" { // the conventions name MariaDB apart
		var version string
		if err := dbtest.Open(t, migrations.MySQL).Gorm().Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(version), "mariadb") {
			system = "mariadb"
		}
	}
	var ops []string
	for _, sp := range spans {
		if sp.Attrs["db.system.name"] == "" {
			continue
		}
		if sp.Kind != tracepb.Span_SPAN_KIND_CLIENT || sp.Attrs["db.system.name"] != system || sp.Attrs["db.namespace"] == "" {
			t.Errorf("database span %q: kind %v, attributes %v; want a client span of %s with db.namespace", sp.Name, sp.Kind, sp.Attrs, system)
		}
		if sp.Attrs["db.operation.name"] == "" {
			t.Errorf("database span %q has no db.operation.name: %v", sp.Name, sp.Attrs)
		}
		checkNoSecrets(t, sp, secrets)
		if sp.TraceID == pay.TraceID && otlptest.Ancestor(spans, sp, pay.SpanID) {
			ops = append(ops, sp.Attrs["db.operation.name"])
		}
	}
	if !slices.ContainsFunc(ops, func(op string) bool { return op == "UPDATE" || op == "BATCH" }) {
		t.Errorf("database operations under the pay's server span = %v, want its claim and settlement among them", ops)
	}
}

// checkNoSecrets fails if any attribute of sp holds one of the values.
func checkNoSecrets(t *testing.T, sp otlptest.Span, secrets []string) {
	t.Helper()
	for k, v := range sp.Attrs {
		for _, secret := range secrets {
			if strings.Contains(v, secret) {
				t.Errorf("span %q attribute %s = %q holds the bound value %q", sp.Name, k, v, secret)
			}
		}
	}
}

func spanNames(spans []otlptest.Span) []string {
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Kind.String()+" "+sp.Name)
	}
	return names
}

// TestTracingExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, `payd
// serve` exports its spans over OTLP/HTTP (the specification's default
// protocol) to its /v1/traces, at the latest when it stops, under
// service.name payd when nothing names the service.
func TestTracingExportsOTLP(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})
	s := start(t, on("sqlite"))
	_, tok := s.register(newEmail())
	s.paidOrder(tok, "2.50")
	s.stop() // flushes the batch

	var names, services []string
	for _, sp := range rcv.Spans() {
		names = append(names, sp.Name)
		services = append(services, sp.Resource["service.name"])
	}
	if !slices.Contains(names, "POST /v1/orders/:id/pay") || !slices.Contains(names, "POST /v1/charges") {
		t.Errorf("exported spans = %q, want the pay route's and the charge's", names)
	}
	if len(services) == 0 || slices.ContainsFunc(services, func(s string) bool { return s != "payd" }) {
		t.Errorf("exported service.name = %q, want payd", services)
	}
	if paths := rcv.Paths(); len(paths) == 0 || slices.ContainsFunc(paths, func(p string) bool { return p != "/v1/traces" }) {
		t.Errorf("exports sent to %q, want /v1/traces", paths)
	}
}

// TestTracingRedis: with Redis in front of the database, a single server
// or a cluster, a pay's Redis commands are client spans under its server
// span, named after the command, with no key or value among their
// attributes.
func TestTracingRedis(t *testing.T) {
	redisKinds(t, func(t *testing.T, url string) {
		rcv := otlptest.NewGRPC(t)
		otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})
		s := start(t, on("sqlite"), withEnv(env{"PAYD_REDIS_URL": url}))
		secrets := tracedPay(t, s)
		s.stop()
		spans := rcv.Spans()
		var pay otlptest.Span
		for _, sp := range spans {
			if sp.Kind == tracepb.Span_SPAN_KIND_SERVER && sp.Name == "POST /v1/orders/:id/pay" {
				pay = sp
			}
		}
		if pay.SpanID == "" {
			t.Fatalf("no pay server span among %v", spanNames(spans))
		}
		var cmds []string
		for _, sp := range spans {
			if sp.Attrs["db.system.name"] != "redis" {
				continue
			}
			for _, old := range []string{"db.system", "db.connection_string"} {
				if _, ok := sp.Attrs[old]; ok {
					t.Errorf("redis span %q carries the deprecated %s: %v", sp.Name, old, sp.Attrs)
				}
			}
			if sp.Attrs["server.address"] == "" || sp.Attrs["server.port"] == "" {
				t.Errorf("redis span %q without server.address and server.port: %v", sp.Name, sp.Attrs)
			}
			if _, ok := sp.Attrs["db.statement"]; ok {
				t.Errorf("redis span %q records its statement: %v", sp.Name, sp.Attrs)
			}
			if _, ok := sp.Attrs["code.function"]; ok {
				t.Errorf("redis span %q records its caller: %v", sp.Name, sp.Attrs)
			}
			checkNoSecrets(t, sp, secrets)
			if otlptest.Ancestor(spans, sp, pay.SpanID) {
				cmds = append(cmds, sp.Name)
			}
		}
		if len(cmds) == 0 {
			t.Errorf("no redis span under the pay's server span; spans %v", spanNames(spans))
		}
	})
}

// TestTracingCarriesNoMerchantKey: the spans of the catalogue's writes,
// accepted and refused, carry nothing of the merchant key or of any other
// bearer token: no attribute, no event, no status.
func TestTracingCarriesNoMerchantKey(t *testing.T) {
	otelEnv(t, nil)
	rec := tracetest.NewSpanRecorder()
	p := start(t, tracedBy(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	p.newProduct("traced", "1.00", 2)
	if r := p.merchant(testMerchantKey, "POST", "/v1/products/traced/stock", uuid.NewString(), map[string]any{"adjust": -3}); r.Status != http.StatusConflict {
		t.Fatalf("adjust -3 of 2 = %d %s, want 409", r.Status, r.Body)
	}
	if r := p.merchant(testAdminToken, "POST", "/v1/products/traced/stock", uuid.NewString(), map[string]any{"adjust": 1}); r.Status != http.StatusForbidden {
		t.Fatalf("adjust with the admin token = %d %s, want 403", r.Status, r.Body)
	}
	found := false
	for _, s := range rec.Ended() {
		found = found || strings.HasPrefix(s.Name(), "POST /v1/products")
		text := s.Name() + s.Status().Description
		for _, a := range s.Attributes() {
			text += string(a.Key) + a.Value.String()
		}
		for _, e := range s.Events() {
			text += e.Name
			for _, a := range e.Attributes {
				text += string(a.Key) + a.Value.String()
			}
		}
		for _, secret := range []string{testMerchantKey, testAdminToken, "Bearer"} {
			if strings.Contains(text, secret) {
				t.Errorf("span %q carries a bearer token", s.Name())
			}
		}
	}
	if !found {
		t.Error("no span of the catalogue's writes was recorded")
	}
}
