package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// opsRun is what one full flow through payd left behind: the secrets and
// tracing IDs it used, for the log and metrics checks.
type opsRun struct {
	token      string   // the customer's bearer token
	signatures []string // webhook-signature values sent
	requestIDs []string // X-Request-ID of every answer
	orderIDs   []string
}

// opsFlow drives payd through everything an operator watches: register,
// order, pay and replay, pay asynchronously (the sandbox's webhook settles
// it), a webhook with a bad signature, one of an unknown type, one whose
// amount disagrees (a discrepancy), a refused token, an admin refund and a
// timeline.
func opsFlow(t *testing.T, s *stack) *opsRun {
	t.Helper()
	run := &opsRun{}
	do := func(r request, want int) reply {
		t.Helper()
		got := s.do(r)
		run.requestIDs = append(run.requestIDs, got.Header.Get("X-Request-ID"))
		if got.Status != want {
			t.Fatalf("%s %s = %d %s, want %d", r.method, r.path, got.Status, got.Body, want)
		}
		return got
	}
	_, run.token = s.register("ops-" + uuid.NewString() + "@example.com")
	o1, o2 := s.order(run.token, "12.30"), s.order(run.token, "5.00")
	run.orderIDs = []string{o1, o2}
	key := uuid.NewString()
	pay := request{method: "POST", path: "/v1/orders/" + o1 + "/pay", token: run.token, key: key, body: map[string]string{"payment_method": "pm_ok"}}
	do(pay, http.StatusOK)
	if r := do(pay, http.StatusOK); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeated pay: Idempotent-Replayed = %q, want true", r.Header.Get("Idempotent-Replayed"))
	}
	do(request{method: "POST", path: "/v1/orders/" + o2 + "/pay", token: run.token, key: uuid.NewString(),
		body: map[string]string{"payment_method": "pm_async"}}, http.StatusAccepted)
	var m map[string]any
	if !within(30*time.Second, func() bool {
		m = do(request{method: "GET", path: "/v1/orders/" + o2, token: run.token}, http.StatusOK).json(t)
		return m["status"] == "paid"
	}) {
		t.Fatalf("order %s is %v after 30s, want paid by the sandbox's webhook", o2, m["status"])
	}
	attemptID := m["attempts"].([]any)[0].(map[string]any)["id"].(string)

	// A webhook signed over other bytes, one of a type payd does not know,
	// and a success the provider does not confirm (another charge, another
	// amount: ADR 0031).
	bad := run.webhook(t, s, "evt_"+uuid.NewString(), map[string]any{"type": "payment.succeeded"}, []byte(`{"forged":true}`))
	if bad.Status != http.StatusUnauthorized {
		t.Fatalf("webhook with a wrong signature = %d, want 401", bad.Status)
	}
	if r := run.webhook(t, s, "evt_"+uuid.NewString(), map[string]any{"type": "account.updated"}, nil); r.Status != http.StatusOK {
		t.Fatalf("webhook of an unknown type = %d %s, want 200", r.Status, r.Body)
	}
	mismatch := map[string]any{"type": "payment.succeeded", "data": map[string]string{
		"charge_id": "ch_ops_" + uuid.NewString()[:8], "idempotency_key": attemptID, "order_id": o2, "amount": "999.00", "currency": "USD"}}
	if r := run.webhook(t, s, "evt_"+uuid.NewString(), mismatch, nil); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte("discrepancy")) {
		t.Fatalf("webhook with another amount = %d %s, want 200 discrepancy", r.Status, r.Body)
	}

	do(request{method: "GET", path: "/v1/orders", token: "ptk_not-a-real-token"}, http.StatusUnauthorized)
	do(request{method: "POST", path: "/v1/admin/orders/" + o1 + "/refund", token: testAdminToken, key: uuid.NewString(),
		body: map[string]string{"amount": "2.00", "reason": "ops flow"}}, http.StatusOK)
	do(request{method: "GET", path: "/v1/admin/orders/" + o2, token: testAdminToken}, http.StatusOK)
	do(request{method: "POST", path: "/v1/products", token: testMerchantKey, key: uuid.NewString(),
		body: map[string]any{"sku": "ops-" + uuid.NewString()[:8], "name": "Ops", "unit_price": "1.00", "currency": "USD", "stock": 1}}, http.StatusCreated)
	do(request{method: "POST", path: "/v1/orders/" + o2 + "/pay", token: testMerchantKey, key: uuid.NewString(),
		body: map[string]string{"payment_method": "pm_ok"}}, http.StatusForbidden) // paying is the buyer's
	return run
}

// webhook posts a signed provider event; body, when set, replaces what was
// signed (a forgery).
func (run *opsRun) webhook(t *testing.T, s *stack, id string, ev map[string]any, body []byte) reply {
	t.Helper()
	ev["id"], ev["created_at"] = id, time.Now().UTC().Format(time.RFC3339)
	signed, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	h := signedWebhook(t, id, time.Now(), signed)
	run.signatures = append(run.signatures, h.Get("webhook-signature"))
	if body == nil {
		body = signed
	}
	r := s.postWebhook(body, h)
	run.requestIDs = append(run.requestIDs, r.Header.Get("X-Request-ID"))
	return r
}

// TestLogsCarryNoSecrets runs the full flow and reads everything payd
// logged: no token, secret or signature appears, nor the Authorization
// header; every request line carries its tracing ID, the one the client
// got in X-Request-ID.
func TestLogsCarryNoSecrets(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) { checkLogs(t, start(t, on(dialect))) })
	// With the sandbox started in-process (the default), its log lines
	// share payd's output: they are held to the same rules.
	t.Run("in-process sandbox", func(t *testing.T) {
		checkLogs(t, start(t, on("sqlite"), withEnv(env{"PAYD_PROVIDER_URL": "", "PAYD_SANDBOX_ASYNC_DELAY": "100ms",
			"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db")})))
	})
}

// checkLogs runs the flow on s and reads what payd logged.
func checkLogs(t *testing.T, s *stack) {
	t.Helper()
	run := opsFlow(t, s)
	s.stop() // in-flight requests finish: every line is written
	logs := s.logs.String()

	secrets := map[string]string{
		"customer token": run.token, "admin token": testAdminToken, "webhook secret": testWebhookSecret,
		"webhook secret key": strings.TrimPrefix(testWebhookSecret, "whsec_"), "secret key": testSecretKey,
		"refused token": "ptk_not-a-real-token", "merchant key": testMerchantKey,
	}
	for i, sig := range run.signatures {
		secrets["webhook-signature "+strconv.Itoa(i)] = sig
		secrets["webhook-signature MAC "+strconv.Itoa(i)] = strings.TrimPrefix(sig, "v1,")
	}
	for name, v := range secrets {
		if v == "" || strings.Contains(logs, v) {
			t.Errorf("the logs contain the %s (or it is empty)", name)
		}
	}
	for _, word := range []string{"authorization", "bearer"} {
		if strings.Contains(strings.ToLower(logs), word) {
			t.Errorf("the logs mention %q", word)
		}
	}

	logged := map[string]bool{}
	requests := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		id, _ := m["request_id"].(string)
		msg, _ := m["msg"].(string)
		if _, ok := m["route"]; ok && id == "" && !strings.HasPrefix(msg, "sandbox") {
			t.Errorf("log line of a request has no request_id: %s", line)
		}
		if msg == "request" {
			requests++
		}
		logged[id] = true
	}
	if requests < len(run.requestIDs) {
		t.Errorf("%d request lines logged, want at least %d", requests, len(run.requestIDs))
	}
	for _, id := range run.requestIDs {
		if id == "" || !logged[id] {
			t.Errorf("X-Request-ID %q answered to the client is on no log line", id)
		}
	}
}

// metricValue reads one series of GET /metrics text (0 if absent).
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// TestMetricsAfterFlow: after the full flow, /metrics counts what happened
// through each service hook the wiring passes in.
func TestMetricsAfterFlow(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		run := opsFlow(t, s)
		r := s.do(request{method: "GET", path: "/metrics"})
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics = %d %q, want 200 text/plain", r.Status, r.Header.Get("Content-Type"))
		}
		text := string(r.Body)
		for _, c := range []struct {
			series string
			min    float64
		}{
			{`payd_payments_total{result="paid"}`, 2}, // pm_ok in the request, pm_async by webhook
			{`payd_idempotency_outcomes_total{outcome="executed"}`, 4},
			{`payd_idempotency_outcomes_total{outcome="replayed"}`, 1},
			{`payd_webhook_events_total{outcome="applied",type="payment.succeeded"}`, 1},
			{`payd_webhook_events_total{outcome="ignored",type="other"}`, 1},
			{`payd_webhook_events_total{outcome="discrepancy",type="payment.succeeded"}`, 1},
			{`payd_discrepancies_total{type="unconfirmed_payment"}`, 1},
			{`payd_http_request_duration_seconds_count{method="POST",route="/v1/orders/:id/pay",status="2xx"}`, 3},
			{`payd_http_request_duration_seconds_count{method="POST",route="/v1/webhooks/provider",status="4xx"}`, 1},
			{`payd_http_request_duration_seconds_count{method="POST",route="/v1/admin/orders/:id/refund",status="2xx"}`, 1},
		} {
			if got := metricValue(t, text, c.series); got < c.min {
				t.Errorf("%s = %v, want at least %v", c.series, got, c.min)
			}
		}
		for _, leak := range append(run.orderIDs, run.token, testAdminToken, testMerchantKey) {
			if strings.Contains(text, leak) {
				t.Errorf("GET /metrics names an order ID or a token")
			}
		}
	})
}
