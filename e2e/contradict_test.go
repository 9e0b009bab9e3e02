package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// falseFailure pays a new order of amount while the provider reports the
// charge as failed although it charged: payd answers 402 and releases the
// order. It returns the order, the key and what a truthful event about the
// charge says.
func (s *stack) falseFailure(h *hostile, token, amount string) (string, string, payment) {
	s.t.Helper()
	id, key := s.order(token, amount), uuid.NewString()
	h.set(id, hostileRule{Status: "failed"})
	if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusPaymentRequired {
		s.t.Fatalf("pay with a false failure = %d %s, want 402", r.Status, r.Body)
	}
	if o := s.orderRow(id); o.Status != domain.StatusPending {
		s.t.Fatalf("order after a false failure = %s, want pending", o.Status)
	}
	a := s.onlyAttempt(id)
	ch := s.truthOf(a.ID)
	if ch.Status != "succeeded" {
		s.t.Fatalf("the sandbox's charge = %s, want succeeded", ch.Status)
	}
	return id, key, payment{AttemptID: a.ID, ChargeID: ch.ID, OrderID: id, Amount: amount, Currency: "USD"}
}

// deliverThrice sends the event twice under one ID and once under another, each
// answered 200.
func (s *stack) deliverThrice(typ string, p payment) {
	s.t.Helper()
	ev := "evt_" + uuid.NewString()
	for _, id := range []string{ev, ev, "evt_" + uuid.NewString()} {
		if r := s.sendEvent(id, typ, p); r.Status != http.StatusOK {
			s.t.Fatalf("%s = %d %s, want 200", typ, r.Status, r.Body)
		}
	}
}

// untouched checks payd made no refund and recorded no discrepancy about
// the order, and the provider's charge was not refunded.
func (s *stack) untouched(orderID, chargeID string) {
	s.t.Helper()
	for _, d := range s.discrepancies(orderID) {
		s.t.Errorf("discrepancy %s (%s): %s", d.Type, d.Status, d.Note)
	}
	if n := s.count("refunds WHERE order_id = ?", orderID); n != 0 {
		s.t.Errorf("refunds = %d, want 0", n)
	}
	if got := s.providerCharge(chargeID).RefundedAmount; !got.IsZero() {
		s.t.Errorf("charge refunded %s at the provider, want 0", got)
	}
}

// TestFailedThenSucceeded: the provider reported a charge failed, payd
// released the order, then payment.succeeded arrives for the same attempt.
// payd asks the provider: if it says succeeded, that only charge pays the
// order (no refund, no duplicate_charge); if it still says failed, nothing
// changes, and each message is kept as an unconfirmed_payment (ADR 0031).
func TestFailedThenSucceeded(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("false-failure@example.com")

		t.Run("provider says succeeded", func(t *testing.T) {
			id, key, p := s.falseFailure(h, token, "25.00")
			h.clear(id)
			s.deliverThrice("payment.succeeded", p)
			if o := s.orderRow(id); o.Status != domain.StatusPaid || o.PayRequestID != key {
				t.Errorf("order = %s (%q), want paid under %q", o.Status, o.PayRequestID, key)
			}
			if a := s.onlyAttempt(id); a.Status != domain.AttemptSucceeded || a.ProviderChargeID != p.ChargeID {
				t.Errorf("attempt = %s %q, want succeeded with %s", a.Status, a.ProviderChargeID, p.ChargeID)
			}
			s.untouched(id, p.ChargeID)
			if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
				t.Errorf("pay replayed = %d %s, want 200 paid", r.Status, r.Body)
			}
			if n := s.charges(id); n != 1 {
				t.Errorf("sandbox charges = %d, want 1", n)
			}
		})

		t.Run("provider says failed", func(t *testing.T) {
			id, _, p := s.falseFailure(h, token, "26.00")
			s.deliverThrice("payment.succeeded", p)
			if o := s.orderRow(id); o.Status != domain.StatusPending {
				t.Errorf("order = %s, want pending", o.Status)
			}
			if a := s.onlyAttempt(id); a.Status != domain.AttemptFailed {
				t.Errorf("attempt = %s, want failed", a.Status)
			}
			// The provider does not confirm the success: each message
			// (deliverThrice sends two) is kept as unconfirmed_payment.
			ds := s.discrepancies(id)
			for _, d := range ds {
				if d.Type != domain.UnconfirmedPayment || d.Status != domain.DiscrepancyOpen {
					t.Errorf("discrepancy %s (%s): %s, want only open unconfirmed_payment", d.Type, d.Status, d.Note)
				}
			}
			if len(ds) != 2 {
				t.Errorf("discrepancies = %d, want one per message (2)", len(ds))
			}
			if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
				t.Errorf("refunds = %d, want 0", n)
			}
			if got := s.providerCharge(p.ChargeID).RefundedAmount; !got.IsZero() {
				t.Errorf("charge refunded %s at the provider, want 0", got)
			}
		})
	})
}

// TestSucceededThenFailed: payment.failed for an attempt that paid the
// order changes nothing. If the provider confirms the success, nothing is
// recorded; if it now says failed, the paid order is kept and an operator
// finds a missing_provider_charge.
func TestSucceededThenFailed(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("late-failure@example.com")
		for _, c := range []struct {
			name  string
			truth string
		}{{"provider says succeeded", ""}, {"provider says failed", "failed"}} {
			t.Run(c.name, func(t *testing.T) {
				id := s.paidOrder(token, "31.00")
				a := s.onlyAttempt(id)
				before := s.orderRow(id)
				if c.truth != "" {
					h.set(id, hostileRule{Status: c.truth})
				}
				s.deliverThrice("payment.failed", payment{AttemptID: a.ID, ChargeID: a.ProviderChargeID, OrderID: id, Amount: "31.00", Currency: "USD"})
				if o := s.orderRow(id); o.Status != domain.StatusPaid || o.Version != before.Version {
					t.Errorf("order = %s v%d, want paid v%d", o.Status, o.Version, before.Version)
				}
				if got := s.onlyAttempt(id); got.Status != domain.AttemptSucceeded {
					t.Errorf("attempt = %s, want succeeded", got.Status)
				}
				if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
					t.Errorf("refunds = %d, want 0", n)
				}
				ds := s.discrepancies(id)
				switch {
				case c.truth == "" && len(ds) != 0:
					t.Errorf("discrepancies = %v, want none", ds)
				case c.truth != "" && (len(ds) != 1 || ds[0].Type != domain.MissingProviderCharge || ds[0].Status != domain.DiscrepancyOpen):
					t.Errorf("discrepancies = %+v, want one open missing_provider_charge", ds)
				}
			})
		}
	})
}

// TestFailedEventWhileUnknown: payment.failed for an attempt whose outcome
// payd does not know yet, while the provider says it succeeded: the order
// is never released (a second charge could follow); the provider's success
// pays it.
func TestFailedEventWhileUnknown(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("unknown-failure@example.com")
		id, key, p := s.asyncOrder(token, "12.00")
		s.deliverThrice("payment.failed", p)
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.PayRequestID != key {
			t.Errorf("order = %s (%q), want paid under %q", o.Status, o.PayRequestID, key)
		}
		s.untouched(id, p.ChargeID)
		if st, code, _ := s.record(token, key); st != "succeeded" || code != http.StatusOK {
			t.Errorf("record = %s %d, want succeeded 200", st, code)
		}
	})
}

// TestWebhookOrphanCharges: a success the order cannot take — the provider
// first reported the attempt failed, and meanwhile the order was paid by a
// second charge, or cancelled — is refunded at the provider and recorded
// as duplicate_charge or paid_after_close, resolved and visible on the
// order's timeline; redelivering the event refunds nothing more.
func TestWebhookOrphanCharges(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("orphan@example.com")
		for _, c := range []struct {
			name       string
			close      func(id string)
			wantStatus domain.OrderStatus
			wantType   domain.DiscrepancyType
		}{
			{"paid by another charge", func(id string) {
				if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
					t.Fatalf("second pay = %d %s, want 200", r.Status, r.Body)
				}
			}, domain.StatusPaid, domain.DuplicateCharge},
			{"cancelled", func(id string) {
				if r := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: token, key: uuid.NewString()}); r.Status != http.StatusOK {
					t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
				}
			}, domain.StatusCancelled, domain.PaidAfterClose},
		} {
			t.Run(c.name, func(t *testing.T) {
				id, _, p := s.falseFailure(h, token, "42.00")
				h.clear(id)
				c.close(id)
				before := s.orderRow(id)
				s.deliverThrice("payment.succeeded", p)

				if got := s.providerCharge(p.ChargeID).RefundedAmount; !got.Equal(decimal.RequireFromString("42.00")) {
					t.Errorf("refunded at the provider = %s, want 42.00", got)
				}
				if n := s.count("refunds WHERE charge_id = ? AND kind = 'auto' AND status = 'succeeded'", p.ChargeID); n != 1 {
					t.Errorf("automatic refunds = %d, want 1", n)
				}
				// The order's status and refunded amount are untouched; the
				// money that moved (the orphan charge and its refund) is
				// told to the shop once, which takes one version.
				o := s.orderRow(id)
				if o.Status != c.wantStatus || o.Version != before.Version+1 || !o.RefundedAmount.IsZero() {
					t.Errorf("order = %s v%d refunded %s, want %s v%d refunded 0 (status and amount untouched)",
						o.Status, o.Version, o.RefundedAmount, c.wantStatus, before.Version+1)
				}
				var told []string
				for _, e := range s.timeline(id).Events {
					if e.Seq > before.Version {
						told = append(told, string(e.Type)+" by "+string(e.Cause.Kind))
					}
				}
				if len(told) != 1 || told[0] != "order.refunded by webhook" {
					t.Errorf("events since the close = %v, want one order.refunded by webhook", told)
				}
				if a := s.attempts(id)[0]; a.Status != domain.AttemptFailed {
					t.Errorf("first attempt = %s, want still failed", a.Status)
				}
				var seen int
				for _, d := range s.timeline(id).Discrepancies {
					if string(d.Type) == string(c.wantType) && d.ProviderChargeId != nil && *d.ProviderChargeId == p.ChargeID && string(d.Status) == string(domain.DiscrepancyResolved) {
						seen++
					}
				}
				if seen != 1 {
					t.Errorf("resolved %s on the order's timeline = %d, want 1", c.wantType, seen)
				}
			})
		}
		// Every charge the provider kept is an order's payment.
		if n := s.count("orders WHERE status = 'paid'"); n != 1 {
			t.Errorf("paid orders = %d, want 1", n)
		}
	})
}

// TestSucceededWhileAnotherPays: the provider stands by a success for an
// attempt it had reported failed while another request is paying the
// order. That charge is not refunded as a duplicate (the other payment may
// still fail): it is recorded open as missing_local_payment for an operator.
func TestSucceededWhileAnotherPays(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("meanwhile@example.com")
		id, _, p := s.falseFailure(h, token, "18.00")
		h.set(id, hostileRule{HoldReply: 6 * time.Second}) // long enough for the events, on a loaded machine too
		second := make(chan reply, 1)
		go func() { second <- s.pay(token, id, uuid.NewString(), "pm_ok") }()
		eventually(t, 10*time.Second, "the second payment never claimed the order", func() bool {
			return s.orderRow(id).Status == domain.StatusProcessing
		})
		// The hold rule stays: it delays only charge replies, and GET tells the truth.
		s.deliverThrice("payment.succeeded", p)
		ds := s.discrepancies(id)
		if len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment || ds[0].Status != domain.DiscrepancyOpen || ds[0].ChargeID != p.ChargeID {
			t.Errorf("discrepancies = %+v, want one open missing_local_payment for %s", ds, p.ChargeID)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
			t.Errorf("refunds = %d, want 0", n)
		}
		if r := <-second; r.Status != http.StatusOK {
			t.Errorf("second pay = %d %s, want 200", r.Status, r.Body)
		}
		if a := s.attempts(id)[0]; a.Status != domain.AttemptFailed {
			t.Errorf("first attempt = %s, want still failed", a.Status)
		}
	})
}
