package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// attemptHeld is the status of an attempt whose charge the provider
// reported for another amount or currency (ADR 0010).
const attemptHeld = domain.AttemptStatus("held")

// discrepancies reads the discrepancies about an order, oldest first.
func (s *stack) discrepancies(orderID string) []domain.Discrepancy {
	s.t.Helper()
	ds, err := repository.NewDiscrepancyStore(s.db).ListByOrder(context.Background(), orderID)
	if err != nil {
		s.t.Fatal(err)
	}
	return ds
}

// truthOf is the provider's own record of the charge under an
// attempt's key, asked of the sandbox directly (not through the hostile proxy).
func (s *stack) truthOf(attemptID string) domain.Charge {
	s.t.Helper()
	ch, err := s.directProvider().GetCharge(context.Background(), domain.Attempt{ID: attemptID})
	if err != nil {
		s.t.Fatalf("sandbox GetCharge(%s): %v", attemptID, err)
	}
	return ch
}

// anyRun makes a reconciliation run of the last hour and returns its ID:
// the resolve route names a run, and a discrepancy found outside any run
// may be resolved under any.
func (s *stack) anyRun() string {
	s.t.Helper()
	now := time.Now().UTC()
	r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]string{
		"from": now.Add(-time.Hour).Format(time.RFC3339), "to": now.Format(time.RFC3339)})
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		s.t.Fatalf("reconciliation run = %d %s", r.Status, r.Body)
	}
	return r.json(s.t)["id"].(string)
}

// heldForOperator checks the state ADR 0010 prescribes after the provider
// reported a charge of another amount or currency: the order not paid and
// still claimed by the request, the attempt held with the provider's charge,
// one open amount_mismatch discrepancy, nothing refunded, one real charge.
func (s *stack) heldForOperator(orderID, key string) domain.Attempt {
	s.t.Helper()
	if o := s.orderRow(orderID); o.Status != domain.StatusProcessing || o.PayRequestID != key || o.PaidAt != nil {
		s.t.Errorf("order = %s (request %q), want processing under %q, never paid", o.Status, o.PayRequestID, key)
	}
	a := s.onlyAttempt(orderID)
	if a.Status != attemptHeld || a.ProviderChargeID == "" || a.FailureCode != "amount_mismatch" {
		s.t.Errorf("attempt = %s charge %q code %q, want held with the charge and code amount_mismatch", a.Status, a.ProviderChargeID, a.FailureCode)
	}
	var found int
	for _, d := range s.discrepancies(orderID) {
		if d.Type != domain.AmountMismatch {
			s.t.Errorf("unexpected %s discrepancy (%s): %s", d.Type, d.Status, d.Note)
			continue
		}
		found++
		if d.Status != domain.DiscrepancyOpen || d.ChargeID != a.ProviderChargeID || d.AttemptID != a.ID {
			s.t.Errorf("amount_mismatch = %s charge %q attempt %q, want open for %s / %s", d.Status, d.ChargeID, d.AttemptID, a.ProviderChargeID, a.ID)
		}
	}
	if found != 1 {
		s.t.Errorf("amount_mismatch discrepancies = %d, want 1", found)
	}
	if n := s.count("refunds WHERE order_id = ?", orderID); n != 0 {
		s.t.Errorf("refunds = %d, want 0: the money waits for an operator", n)
	}
	if n := s.charges(orderID); n != 1 {
		s.t.Errorf("sandbox charges = %d, want 1", n)
	}
	return a
}

// wantMismatchProblem checks a pay reply is the mismatch problem.
func wantMismatchProblem(t *testing.T, what string, r reply) {
	t.Helper()
	if r.Status != http.StatusBadGateway || r.code(t) != "payment_amount_mismatch" {
		t.Errorf("%s = %d %s, want 502 payment_amount_mismatch", what, r.Status, r.Body)
	}
}

// TestPayReplyAmountMismatch: the provider's reply to the charge reports
// another amount or currency than the order's. payd never applies it: the
// order is not paid, the pay call answers 502 payment_amount_mismatch (and
// a replay says the same), and an operator finds one amount_mismatch.
func TestPayReplyAmountMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("reply-mismatch@example.com")
		for _, c := range []struct {
			name string
			rule hostileRule
		}{
			{"amount", hostileRule{Amount: "0.01"}},
			{"currency", hostileRule{Currency: "EUR"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				id, key := s.order(token, "500.00"), uuid.NewString()
				h.set(id, c.rule)
				wantMismatchProblem(t, "pay", s.pay(token, id, key, "pm_ok"))
				a := s.heldForOperator(id, key)
				wantMismatchProblem(t, "replay", s.pay(token, id, key, "pm_ok"))
				// An event with the order's money contradicts the hold: payd
				// asks the provider, which still reports the other money, so
				// it is not confirmed (ADR 0031): each message is kept as an
				// unconfirmed_payment, and the hold stands.
				s.deliverThrice("payment.succeeded", payment{AttemptID: a.ID, ChargeID: a.ProviderChargeID, OrderID: id, Amount: "500.00", Currency: "USD"})
				if n := s.count("discrepancies WHERE order_id = ? AND type = 'unconfirmed_payment'", id); n != 2 {
					t.Errorf("unconfirmed_payment = %d, want one per message (2)", n)
				}
				if a := s.onlyAttempt(id); a.Status != attemptHeld {
					t.Errorf("attempt after the events = %s, want still held", a.Status)
				}
				if n := s.count("discrepancies WHERE order_id = ? AND type = 'amount_mismatch' AND status = 'open'", id); n != 1 {
					t.Errorf("open amount_mismatch after the events = %d, want 1", n)
				}
				if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusConflict {
					t.Errorf("pay under another key = %d %s, want 409", r.Status, r.Body)
				}
				if n := s.charges(id); n != 1 {
					t.Errorf("sandbox charges = %d, want 1", n)
				}
			})
		}
	})
}

// TestRecovererAmountMismatch: the charge reply is lost, and the provider
// describes the charge with another amount when the recoverer asks. The
// recoverer holds it for an operator instead of paying the order.
func TestRecovererAmountMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("recover-mismatch@example.com")
		id, key := s.order(token, "500.00"), uuid.NewString()
		h.set(id, hostileRule{Drop: true, Amount: "0.01"})
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusAccepted {
			t.Fatalf("pay with the reply dropped = %d %s, want 202", r.Status, r.Body)
		}
		eventually(t, 20*time.Second, "the recoverer never settled the attempt", func() bool {
			return s.onlyAttempt(id).Status.Final() || s.onlyAttempt(id).Status == attemptHeld
		})
		s.heldForOperator(id, key)
		wantMismatchProblem(t, "retry after the recoverer", s.pay(token, id, key, "pm_ok"))
	})
}

// TestRetryAmountMismatch: the charge reply is lost; the same key, retried
// after the lease, asks the provider and hears another amount. It answers
// the mismatch and never pays the order.
func TestRetryAmountMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("retry-mismatch@example.com")
		id, key := s.order(token, "500.00"), uuid.NewString()
		h.set(id, hostileRule{Drop: true, Currency: "EUR"})
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusAccepted {
			t.Fatalf("pay with the reply dropped = %d %s, want 202", r.Status, r.Body)
		}
		var last reply
		eventually(t, 20*time.Second, "the retry never learnt the outcome", func() bool {
			last = s.pay(token, id, key, "pm_ok")
			return last.Status != http.StatusAccepted && last.Status != http.StatusConflict
		})
		wantMismatchProblem(t, "retry", last)
		s.heldForOperator(id, key)
	})
}

// TestAmountMismatchResolved: an operator settles a held charge. refund
// gives the charge back and frees the order to be paid again; apply (the
// operator saw the provider really took the order's amount) pays it.
func TestAmountMismatchResolved(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("resolve-mismatch@example.com")
		hold := func() (string, string, domain.Discrepancy) {
			id, key := s.order(token, "20.00"), uuid.NewString()
			h.set(id, hostileRule{Amount: "20.01"})
			wantMismatchProblem(t, "pay", s.pay(token, id, key, "pm_ok"))
			h.clear(id)
			s.heldForOperator(id, key)
			ds := s.discrepancies(id)
			if len(ds) != 1 {
				t.Fatalf("discrepancies = %d, want 1", len(ds))
			}
			return id, key, ds[0]
		}
		resolve := func(d domain.Discrepancy, action string) reply {
			return s.admin("POST", resolvePath(s.anyRun(), d.ID), uuid.NewString(),
				map[string]string{"action": action, "note": "checked the provider's dashboard"})
		}

		id, _, d := hold()
		if r := resolve(d, "refund"); r.Status != http.StatusOK {
			t.Fatalf("resolve refund = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPending || o.PayRequestID != "" {
			t.Errorf("order after refund = %s (%q), want pending, free to pay again", o.Status, o.PayRequestID)
		}
		if a := s.onlyAttempt(id); a.Status != domain.AttemptFailed || a.FailureCode != "amount_mismatch" {
			t.Errorf("attempt after refund = %s %q, want failed amount_mismatch", a.Status, a.FailureCode)
		}
		if got := s.providerCharge(d.ChargeID).RefundedAmount; got.IsZero() {
			t.Error("the held charge was not refunded at the provider")
		}
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("pay again = %d %s, want 200", r.Status, r.Body)
		}
		if n := s.charges(id); n != 2 || !s.providerCharge(d.ChargeID).RefundedAmount.Equal(s.providerCharge(d.ChargeID).Amount) {
			t.Errorf("sandbox charges = %d, the held one refunded %s: want 2, the held one in full", n, s.providerCharge(d.ChargeID).RefundedAmount)
		}

		id, key, d := hold()
		if r := resolve(d, "apply"); r.Status != http.StatusOK {
			t.Fatalf("resolve apply = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.PayRequestID != key {
			t.Errorf("order after apply = %s (%q), want paid under %q", o.Status, o.PayRequestID, key)
		}
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("replay after apply = %d %s, want 200", r.Status, r.Body)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
			t.Errorf("refunds after apply = %d, want 0", n)
		}
	})
}
