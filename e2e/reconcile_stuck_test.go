package e2e

import (
	"github.com/payd/payd/client"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/sandbox"
)

// TestResolveStuck: applying a stuck payment asks the provider first and
// follows its answer. A charge the provider never made releases the order
// so the customer can pay again; a charge still pending cannot be settled,
// so the resolution is refused (503 payment_outcome_unknown with
// Retry-After, the discrepancy stays open) rather than hiding a payment that is still stuck.
func TestResolveStuck(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		slow := func(c *sandbox.Config) { c.AsyncDelay = time.Hour }
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox, slow))
		from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		_, tok := s.register("stu@example.com")
		pending, never := s.order(tok, "3.00"), s.order(tok, "4.00")
		pendingKey, neverKey := uuid.NewString(), uuid.NewString()
		if r := s.pay(tok, pending, pendingKey, "pm_async"); r.Status != http.StatusAccepted {
			t.Fatalf("pay pm_async = %d %s, want 202", r.Status, r.Body)
		}
		if r := s.pay(tok, never, neverKey, "pm_error"); r.Status != http.StatusAccepted {
			t.Fatalf("pay pm_error = %d %s, want 202", r.Status, r.Body)
		}
		hourAgo := time.Now().UTC().Add(-time.Hour).Format("2006-01-02 15:04:05.000000")
		for _, id := range []string{pending, never} {
			s.exec("UPDATE orders SET updated_at = ? WHERE id = ? AND status = 'processing'", hourAgo, id)
			// The charge request's time in flight is over too (ADR 9).
			s.exec("UPDATE payment_attempts SET in_flight_until = ? WHERE order_id = ?", hourAgo, id)
		}
		to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]string{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)})
		run := decode[client.Run](t, r)
		if r.Status != http.StatusCreated {
			t.Fatalf("run = %d %s, want 201", r.Status, r.Body)
		}
		found := s.checkFound(run.Discrepancies, map[string]string{
			"stuck_processing " + pending + "/" + pendingKey: "apply", "stuck_processing " + never + "/" + neverKey: "apply",
		})
		apply := map[string]string{"action": "apply", "note": "asked the provider"}

		d := found["stuck_processing "+pending+"/"+pendingKey]
		key := uuid.NewString()
		r = s.admin("POST", resolvePath(run.Id, d.Id), key, apply)
		if r.Status != http.StatusServiceUnavailable || r.code(t) != "payment_outcome_unknown" || r.Header.Get("Retry-After") == "" {
			t.Errorf("apply a still pending payment = %d %s (Retry-After %q), want 503 payment_outcome_unknown with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if n := s.count("discrepancies WHERE id = ? AND status = 'open'", d.Id); n != 1 {
			t.Errorf("the pending payment's discrepancy is no longer open")
		}
		if o := s.timeline(pending).Order; o.Status != "processing" {
			t.Errorf("the pending payment's order = %s, want processing", o.Status)
		}
		if n := s.auditRows("resolve_discrepancy", key, http.StatusServiceUnavailable); n != 1 {
			t.Errorf("audit rows for the refused resolution = %d, want 1", n)
		}

		d = found["stuck_processing "+never+"/"+neverKey]
		r = s.admin("POST", resolvePath(run.Id, d.Id), uuid.NewString(), apply)
		if got := decode[client.Discrepancy](t, r); r.Status != http.StatusOK || got.Status != "resolved" {
			t.Errorf("apply a payment the provider never saw = %d %s, want 200 resolved", r.Status, r.Body)
		}
		if o := s.timeline(never).Order; o.Status != "pending" || o.PayRequestId != nil {
			t.Errorf("the released order = %+v, want pending with no pay request", o)
		}
		if r := s.pay(tok, never, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("pay the released order = %d %s, want 200", r.Status, r.Body)
		}
		if n := s.charges(never); n != 1 {
			t.Errorf("charges of the released order = %d, want 1", n)
		}
	})
}
