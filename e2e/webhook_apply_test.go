package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// TestWebhookAppliedOnce: one payment.succeeded delivered five times at
// once, then again, is stored once and pays the order once.
func TestWebhookAppliedOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("once@example.com")
		id, key, p := s.asyncOrder(token, "30.00")
		evID := "evt_" + uuid.NewString()

		applied := 0
		for _, r := range parallel(5, func(int) reply { return s.sendEvent(evID, "payment.succeeded", p) }) {
			if r.Status != http.StatusOK {
				t.Fatalf("delivery = %d %s, want 200", r.Status, r.Body)
			}
			if r.json(t)["outcome"] == "applied" {
				applied++
			}
		}
		if applied == 0 {
			t.Error("no delivery of five reported the event applied")
		}
		if r := s.sendEvent(evID, "payment.succeeded", p); r.Status != http.StatusOK || r.json(t)["outcome"] != "duplicate" {
			t.Errorf("sixth delivery = %d %s, want 200 duplicate", r.Status, r.Body)
		}
		if n := s.count("webhook_events WHERE id = ?", evID); n != 1 {
			t.Errorf("inbox rows for the event = %d, want 1", n)
		}
		// created v1, claimed v2, paid v3: one more would mean a second transition.
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.Version != 3 {
			t.Errorf("order = %s v%d, want paid v3", o.Status, o.Version)
		}
		if a := s.onlyAttempt(id); a.Status != domain.AttemptSucceeded || a.ProviderChargeID != p.ChargeID {
			t.Errorf("attempt = %s charge %q, want succeeded with %s", a.Status, a.ProviderChargeID, p.ChargeID)
		}
		if st, code, _ := s.record(token, key); st != "succeeded" || code != http.StatusOK {
			t.Errorf("record = %s %d, want succeeded 200", st, code)
		}
		// A concurrent copy must not mistake the charge it lost the race
		// for as a second one: the customer's payment stays unrefunded.
		s.noOrphans(p.ChargeID)
	})
}

// TestWebhookFailedAfterSucceeded: a payment.failed that arrives after the
// success of the same attempt finds every guard false and changes nothing.
func TestWebhookFailedAfterSucceeded(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("late-fail@example.com")
		id, key, p := s.asyncOrder(token, "15.50")

		if r := s.sendEvent("evt_"+uuid.NewString(), "payment.succeeded", p); r.Status != http.StatusOK {
			t.Fatalf("payment.succeeded = %d %s, want 200", r.Status, r.Body)
		}
		before := s.orderRow(id)
		if r := s.sendEvent("evt_"+uuid.NewString(), "payment.failed", p); r.Status != http.StatusOK {
			t.Fatalf("payment.failed = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.Version != before.Version || o.PayRequestID != key {
			t.Errorf("order after late failure = %s v%d (%q), want paid v%d (%q)", o.Status, o.Version, o.PayRequestID, before.Version, key)
		}
		if a := s.onlyAttempt(id); a.Status != domain.AttemptSucceeded {
			t.Errorf("attempt after late failure = %s, want succeeded", a.Status)
		}
		if r := s.pay(token, id, key, "pm_async"); r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
			t.Errorf("replayed pay = %d %s, want 200 paid", r.Status, r.Body)
		}
		s.noOrphans(p.ChargeID)
	})
}

// TestWebhookMoneyMismatch: a success whose amount, currency or charge
// is not what the provider reports for the attempt is never applied: the
// provider does not confirm it (ADR 0031). The attempt stays unsettled,
// the order processing, and one unconfirmed_payment names the message; a
// redelivery records nothing new. The true event then pays the order.
func TestWebhookMoneyMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("mismatch@example.com")
		for _, c := range []struct{ name, amount, currency, charge string }{
			{"amount", "10.01", "USD", ""},
			{"smaller amount", "1.00", "USD", ""},
			{"currency", "10.00", "EUR", ""},
			{"charge", "10.00", "USD", "ch_other"},
		} {
			id, key, p := s.asyncOrder(token, "10.00")
			wrong := p
			wrong.Amount, wrong.Currency = c.amount, c.currency
			if c.charge != "" {
				wrong.ChargeID = c.charge
			}
			evID := "evt_" + uuid.NewString()
			for range 2 {
				r := s.sendEvent(evID, "payment.succeeded", wrong)
				if r.Status != http.StatusOK {
					t.Fatalf("%s mismatch: webhook = %d %s, want 200", c.name, r.Status, r.Body)
				}
			}
			if o := s.orderRow(id); o.Status != domain.StatusProcessing || o.Version != 2 {
				t.Errorf("%s mismatch: order = %s v%d, want processing v2", c.name, o.Status, o.Version)
			}
			if a := s.onlyAttempt(id); a.Status != domain.AttemptUnknown {
				t.Errorf("%s mismatch: attempt = %s, want unknown", c.name, a.Status)
			}
			if st, code, _ := s.record(token, key); st == "succeeded" || code == http.StatusOK {
				t.Errorf("%s mismatch: record = %s %d, want not succeeded", c.name, st, code)
			}
			if ds := s.unconfirmedOf(id, evID); len(ds) != 1 || ds[0].AttemptID != p.AttemptID {
				t.Errorf("%s mismatch: unconfirmed_payment = %+v, want 1 for the attempt", c.name, ds)
			}
			if n := s.count("discrepancies WHERE order_id = ?", id); n != 1 {
				t.Errorf("%s mismatch: discrepancies = %d, want only the unconfirmed_payment", c.name, n)
			}
			if r := s.sendEvent("evt_"+uuid.NewString(), "payment.succeeded", p); r.Status != http.StatusOK || r.json(t)["outcome"] != "applied" {
				t.Fatalf("%s mismatch: the right event = %d %s, want 200 applied", c.name, r.Status, r.Body)
			}
			if o := s.orderRow(id); o.Status != domain.StatusPaid {
				t.Errorf("%s mismatch: order after the right event = %s, want paid", c.name, o.Status)
			}
			if r := s.pay(token, id, key, "pm_async"); r.Status != http.StatusOK {
				t.Errorf("%s mismatch: pay replayed = %d %s, want 200", c.name, r.Status, r.Body)
			}
		}
	})
}

// TestWebhookProviderReportsOtherMoney: when the provider itself reports
// the attempt's charge for other money, and the event says the same, the
// provider's record is applied through the money check: the attempt is
// held and amount_mismatch recorded, once. Once the provider reports the
// attempt's money, a later success pays the order and resolves it.
func TestWebhookProviderReportsOtherMoney(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("other-money@example.com")
		id, key, p := s.asyncOrder(token, "10.00")
		h.set(id, hostileRule{Amount: "10.01"})
		wrong := p
		wrong.Amount = "10.01"
		evID := "evt_" + uuid.NewString()
		for range 2 {
			if r := s.sendEvent(evID, "payment.succeeded", wrong); r.Status != http.StatusOK {
				t.Fatalf("webhook = %d %s, want 200", r.Status, r.Body)
			}
		}
		if a := s.onlyAttempt(id); a.Status != domain.AttemptHeld {
			t.Errorf("attempt = %s, want held", a.Status)
		}
		if st, code, _ := s.record(token, key); st != "failed" || code != http.StatusBadGateway {
			t.Errorf("record = %s %d, want failed 502", st, code)
		}
		if n := s.count("discrepancies WHERE type = 'amount_mismatch' AND order_id = ? AND attempt_id = ?", id, p.AttemptID); n != 1 {
			t.Errorf("amount_mismatch discrepancies = %d, want 1", n)
		}
		h.clear(id)
		if r := s.sendEvent("evt_"+uuid.NewString(), "payment.succeeded", p); r.Status != http.StatusOK {
			t.Fatalf("the right event = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid {
			t.Errorf("order after the right event = %s, want paid", o.Status)
		}
		if n := s.count("discrepancies WHERE type = 'amount_mismatch' AND order_id = ? AND status = 'resolved'", id); n != 1 {
			t.Errorf("resolved amount_mismatch after the right event = %d, want 1", n)
		}
		if r := s.pay(token, id, key, "pm_async"); r.Status != http.StatusOK {
			t.Errorf("pay replayed = %d %s, want 200", r.Status, r.Body)
		}
	})
}
