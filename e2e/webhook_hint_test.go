package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// unconfirmedOf returns the order's unconfirmed_payment discrepancies
// recorded under the message id msgID.
func (s *stack) unconfirmedOf(orderID, msgID string) []domain.Discrepancy {
	s.t.Helper()
	var out []domain.Discrepancy
	for _, d := range s.discrepancies(orderID) {
		if d.Type == domain.UnconfirmedPayment && d.Reference == msgID {
			out = append(out, d)
		}
	}
	return out
}

// TestWebhookSuccessNotChargedIsNotApplied: a pay the provider never
// charged (pm_error: 202, recorded failed, nothing charged), then a
// correctly signed payment.succeeded for that attempt with a made-up
// charge. payd asks the provider, whose charge under the key failed: the order stays unpaid,
// the attempt unsettled, the event is stored, and one unconfirmed_payment
// names the message and what the provider said; a redelivery records
// nothing new.
func TestWebhookSuccessNotChargedIsNotApplied(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("forged@example.com")
		id, key := s.order(token, "25.00"), uuid.NewString()
		if r := s.pay(token, id, key, "pm_error"); r.Status != http.StatusAccepted {
			t.Fatalf("pay(pm_error) = %d %s, want 202", r.Status, r.Body)
		}
		a := s.onlyAttempt(id)
		if ch, err := s.directProvider().GetCharge(context.Background(), domain.Attempt{ID: a.ID}); err != nil || ch.Status != domain.ChargeFailed {
			t.Fatalf("sandbox GetCharge(%s) = %+v, %v, want its failed charge", a.ID, ch, err)
		}
		forged := payment{AttemptID: a.ID, ChargeID: "ch_made_up_" + a.ID[:8], OrderID: id, Amount: "25.00", Currency: "USD"}
		evID := "evt_" + uuid.NewString()
		for i, want := range []string{"discrepancy", "duplicate"} {
			if r := s.sendEvent(evID, "payment.succeeded", forged); r.Status != http.StatusOK || r.json(t)["outcome"] != want {
				t.Fatalf("delivery %d = %d %s, want 200 %s", i+1, r.Status, r.Body, want)
			}
		}
		if o := s.orderRow(id); o.Status == domain.StatusPaid || o.Status == domain.StatusRefunded {
			t.Errorf("order = %s, want processing or pending (never paid without a charge)", o.Status)
		}
		if a := s.onlyAttempt(id); a.Status == domain.AttemptSucceeded || a.ProviderChargeID == forged.ChargeID {
			t.Errorf("attempt = %s charge %q, want unsettled, without the event's charge", a.Status, a.ProviderChargeID)
		}
		if st, _, _ := s.record(token, key); st == "succeeded" {
			t.Errorf("pay record = %s, want not succeeded", st)
		}
		ds := s.unconfirmedOf(id, evID)
		if len(ds) != 1 || ds[0].Status != domain.DiscrepancyOpen || ds[0].AttemptID != a.ID || ds[0].OrderID != id ||
			!strings.Contains(ds[0].Note, evID) || !strings.Contains(ds[0].Note, "is failed") {
			t.Fatalf("unconfirmed_payment for %s = %+v, want one open for the attempt, naming the message and the provider's answer", evID, ds)
		}
		if n := s.count("discrepancies"); n != 1 {
			t.Errorf("discrepancies = %d, want only the unconfirmed_payment", n)
		}
		if n := s.count("webhook_events WHERE id = ? AND outcome = 'discrepancy'", evID); n != 1 {
			t.Errorf("stored events = %d, want 1", n)
		}
		var payload []byte
		if err := s.db.Gorm().Raw("SELECT payload FROM webhook_events WHERE id = ?", evID).Row().Scan(&payload); err != nil || !strings.Contains(string(payload), forged.ChargeID) {
			t.Errorf("stored payload = %s, %v; want the event as received", payload, err)
		}
		if n := s.count("ledger_entries WHERE order_id = ?", id); n != 0 {
			t.Errorf("ledger entries = %d, want none", n)
		}
	})
}

// TestWebhookUnknownAttemptNoCharge: a signed success for a key payd never
// made an attempt under, and the provider has no charge under either, is
// unconfirmed_payment; one the provider did charge (behind payd's back)
// stays missing_local_payment.
func TestWebhookUnknownAttemptNoCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("stranger@example.com")
		id := s.order(token, "6.00")
		evID := "evt_" + uuid.NewString()
		ghost := payment{AttemptID: uuid.NewString(), ChargeID: "ch_ghost", OrderID: id, Amount: "6.00", Currency: "USD"}
		if r := s.sendEvent(evID, "payment.succeeded", ghost); r.Status != http.StatusOK || r.json(t)["outcome"] != "discrepancy" {
			t.Fatalf("success for no charge = %d %s, want 200 discrepancy", r.Status, r.Body)
		}
		if ds := s.unconfirmedOf(id, evID); len(ds) != 1 {
			t.Errorf("unconfirmed_payment = %+v, want one", ds)
		}
		if n := s.count("discrepancies WHERE type = 'missing_local_payment'"); n != 0 {
			t.Errorf("missing_local_payment = %d, want 0: there is no charge", n)
		}

		key := uuid.NewString()
		ch := s.chargeDirectly(key, id, "6.00")
		real := payment{AttemptID: key, ChargeID: ch.ID, OrderID: id, Amount: "6.00", Currency: "USD"}
		if r := s.sendEvent("evt_"+uuid.NewString(), "payment.succeeded", real); r.Status != http.StatusOK || r.json(t)["outcome"] != "discrepancy" {
			t.Fatalf("success for a charge behind payd's back = %d %s, want 200 discrepancy", r.Status, r.Body)
		}
		if n := s.count("discrepancies WHERE type = 'missing_local_payment' AND reference = ?", ch.ID); n != 1 {
			t.Errorf("missing_local_payment for %s = %d, want 1", ch.ID, n)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPending {
			t.Errorf("order = %s, want pending", o.Status)
		}
	})
}

// TestWebhookProviderUnreachable: while the provider cannot be asked, a
// success is not applied and its delivery is answered 503, so the
// provider sends it again; the redelivery, once the provider answers, is
// applied.
func TestWebhookProviderUnreachable(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("unreachable@example.com")
		id, _, p := s.asyncOrder(token, "8.00")
		evID := "evt_" + uuid.NewString()
		h.setTarget("http://127.0.0.1:1") // nothing listens there
		r := s.sendEvent(evID, "payment.succeeded", p)
		h.setTarget(s.providerURL())
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("success while the provider is unreachable = %d %s, want 503 with Retry-After", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusProcessing {
			t.Errorf("order while the provider is unreachable = %s, want processing", o.Status)
		}
		if n := s.count("discrepancies"); n != 0 {
			t.Errorf("discrepancies = %d, want none", n)
		}
		if r := s.sendEvent(evID, "payment.succeeded", p); r.Status != http.StatusOK || r.json(t)["outcome"] != "applied" {
			t.Fatalf("redelivery = %d %s, want 200 applied", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid {
			t.Errorf("order after the redelivery = %s, want paid", o.Status)
		}
	})
}

// TestWebhookConfirmReplyCut: while the provider's replies to payd's
// question are cut halfway (its API failing while its webhook arrives), a
// success is answered 503 with Retry-After, logged as a warning with its
// cause, never as an internal error, and the inbox keeps the event
// unprocessed; the redelivery, once the provider answers, applies it
// once, and a further one is a duplicate.
func TestWebhookConfirmReplyCut(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("cut@example.com")
		id, _, p := s.asyncOrder(token, "8.00")
		evID := "evt_" + uuid.NewString()
		h.cutGetReplies(true)
		r := s.sendEvent(evID, "payment.succeeded", p)
		h.cutGetReplies(false)
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("success while the provider's replies are cut = %d (Retry-After %q) %s, want 503 with Retry-After",
				r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		if n := s.count("webhook_events WHERE id = ? AND processed_at IS NULL AND outcome IS NULL", evID); n != 1 {
			t.Errorf("unprocessed inbox rows of %s = %d, want 1", evID, n)
		}
		if o := s.orderRow(id); o.Status != domain.StatusProcessing {
			t.Errorf("order while the provider's replies are cut = %s, want processing", o.Status)
		}
		warned := false
		for line := range strings.SplitSeq(s.logs.String(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) {
				t.Errorf("ERROR line for a provider that could not be asked: %s", line)
			}
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "/v1/webhooks/provider") && strings.Contains(line, p.AttemptID) {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no WARN line naming the route and the attempt asked about; logs:\n%s", s.logs.String())
		}
		if r := s.sendEvent(evID, "payment.succeeded", p); r.Status != http.StatusOK || r.json(t)["outcome"] != "applied" {
			t.Fatalf("redelivery = %d %s, want 200 applied", r.Status, r.Body)
		}
		if r := s.sendEvent(evID, "payment.succeeded", p); r.Status != http.StatusOK || r.json(t)["outcome"] != "duplicate" {
			t.Fatalf("second redelivery = %d %s, want 200 duplicate", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid {
			t.Errorf("order after the redelivery = %s, want paid", o.Status)
		}
		if n := s.count("ledger_entries WHERE order_id = ? AND kind = 'charge'", id); n != 1 {
			t.Errorf("charge entries of the order = %d, want 1", n)
		}
		if n := s.count("discrepancies"); n != 0 {
			t.Errorf("discrepancies = %d, want none", n)
		}
	})
}
