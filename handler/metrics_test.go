package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/telemetry"
)

func serve(t *testing.T, h http.Handler, method, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// scrape returns GET /metrics of h.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := serve(t, h, http.MethodGet, "/metrics", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", rec.Code)
	}
	return rec.Body.String()
}

// TestMetricsCountRequestsByRoutePattern: latency series are keyed by the
// route pattern, method and status class, and a caller cannot invent new
// series with odd paths or methods.
func TestMetricsCountRequestsByRoutePattern(t *testing.T) {
	m := telemetry.NewMetrics()
	e := New(Deps{Log: slog.New(slog.DiscardHandler), Metrics: m})
	serve(t, e, http.MethodGet, "/healthz", nil)
	serve(t, e, http.MethodGet, "/healthz", nil)
	serve(t, e, http.MethodGet, "/no/such/route/abc123", nil)
	serve(t, e, "BREW", "/healthz", nil)
	serve(t, e, http.MethodGet, "/v1/orders/0197abc", nil) // no token: 401 on a known pattern

	out := scrape(t, e)
	for _, want := range []string{
		`payd_http_request_duration_seconds_count{method="GET",route="/healthz",status="2xx"} 2`,
		`payd_http_request_duration_seconds_count{method="GET",route="/v1/orders/:id",status="4xx"} 1`,
		`payd_http_request_duration_seconds_count{method="other",route="/healthz",status="4xx"} 1`,
		`route="unmatched",status="4xx"} 1`,
		"go_goroutines", "process_",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("GET /metrics lacks %s\n%s", want, grep(out, "payd_http_request_duration_seconds_count"))
		}
	}
	for _, leak := range []string{"abc123", "0197abc", "BREW"} {
		if strings.Contains(out, leak) {
			t.Errorf("GET /metrics contains caller-chosen text %q", leak)
		}
	}
}

// TestMetricsHooks: what the services report through their hooks shows up
// under payd_ names, and an event type payd does not know is "other".
func TestMetricsHooks(t *testing.T) {
	m := telemetry.NewMetrics()
	e := New(Deps{Log: slog.New(slog.DiscardHandler), Metrics: m})
	m.KeyDecided("replayed")
	m.KeyDecided("replayed")
	m.WebhookApplied(string(domain.EventPaymentSucceeded), "applied")
	m.WebhookApplied("account.hacked<script>", "ignored")
	m.PaymentResult(context.Background(), domain.Attempt{}, "declined")
	m.DiscrepancyRecorded(context.Background(), domain.Discrepancy{Type: domain.DuplicateCharge})
	m.JobDone("expire_orders", 7)
	m.DBRetried("deadlock")

	out := scrape(t, e)
	for _, want := range []string{
		`payd_idempotency_outcomes_total{outcome="replayed"} 2`,
		`payd_webhook_events_total{outcome="applied",type="payment.succeeded"} 1`,
		`payd_webhook_events_total{outcome="ignored",type="other"} 1`,
		`payd_payments_total{result="declined"} 1`,
		`payd_discrepancies_total{type="duplicate_charge"} 1`,
		`payd_job_rows_total{job="expire_orders"} 7`,
		`payd_db_retries_total{reason="deadlock"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("GET /metrics lacks %s\n%s", want, grep(out, "payd_"))
		}
	}
	if strings.Contains(out, "hacked") {
		t.Errorf("GET /metrics carries an unknown event type as a label")
	}
	// Two servers, two registries: nothing is shared or registered twice.
	if other := scrape(t, New(Deps{Log: slog.New(slog.DiscardHandler)})); !strings.Contains(other, `payd_payments_total{result="declined"} 0`) {
		t.Errorf("a second server's /metrics shows the first one's payments")
	}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// logLines decodes JSON log output, one object a line.
func logLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestIDOnEveryLine: the access log line carries the tracing ID the
// response names; a caller's own plain ID is kept, an unfit one replaced.
func TestRequestIDOnEveryLine(t *testing.T) {
	for _, tc := range []struct{ sent, want string }{
		{"", ""}, // generated
		{"trace-42.a:b_c", "trace-42.a:b_c"},
		{strings.Repeat("x", 129), ""},
		{"has space\"}", ""},
	} {
		var logs bytes.Buffer
		e := New(Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		h := http.Header{}
		if tc.sent != "" {
			h.Set("X-Request-ID", tc.sent)
		}
		rec := serve(t, e, http.MethodGet, "/healthz", h)
		got := rec.Header().Get("X-Request-ID")
		if got == "" || (tc.want != "" && got != tc.want) || (tc.want == "" && got == tc.sent) {
			t.Errorf("X-Request-ID sent %q: answered %q, want %q (or a fresh ID if empty)", tc.sent, got, tc.want)
		}
		lines := logLines(t, logs.Bytes())
		if len(lines) != 1 || lines[0]["request_id"] != got {
			t.Errorf("X-Request-ID sent %q: log lines %v, want one with request_id %q", tc.sent, lines, got)
		}
	}
}
