package e2e

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
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
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "provider POST /v1/charges":
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
		t.Fatalf("spans = %v, want a server span POST /v1/orders/:id/pay and a client span provider POST /v1/charges", names)
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

// collector is a stand-in OTLP/HTTP collector: it keeps the names of the
// spans payd exports to /v1/traces, and their service.name.
type collector struct {
	mu       sync.Mutex
	spans    []string
	services []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(raw, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, s.GetName())
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestTracingExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, `payd
// serve` exports its spans over OTLP/HTTP, at the latest when it stops.
func TestTracingExportsOTLP(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	s := start(t, on("sqlite"), withEnv(env{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}))
	_, tok := s.register(newEmail())
	s.paidOrder(tok, "2.50")
	s.stop() // flushes the batch

	col.mu.Lock()
	defer col.mu.Unlock()
	if !slices.Contains(col.spans, "POST /v1/orders/:id/pay") || !slices.Contains(col.spans, "provider POST /v1/charges") {
		t.Errorf("exported spans = %q, want the pay route's and the charge's", col.spans)
	}
	if len(col.services) == 0 || col.services[0] != "payd" {
		t.Errorf("exported service.name = %q, want payd", col.services)
	}
}
