package service_test

import (
	"context"
	"sync"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestWebhookDuplicateAppliedOnce: one event delivered twice at once (to
// two replicas) and again later pays the order once; the later copy is a
// duplicate.
func TestWebhookDuplicateAppliedOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "14.00")
		if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay(pm_async) = %v, %v, want processing", got.Status, err)
		}
		w.resolveAsync(t)
		evs := w.events(t, o.ID)
		if len(evs) != 1 || evs[0].Type != domain.EventPaymentSucceeded {
			t.Fatalf("events = %+v, want one payment.succeeded", evs)
		}

		other := w.replica()
		var wg sync.WaitGroup
		outcomes := make([]string, 2)
		for i, p := range []*world{w, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := p.receive(ctx, evs[0])
				if err != nil {
					t.Errorf("Receive on replica %d = %v", i, err)
				}
				outcomes[i] = out
			}()
		}
		wg.Wait()
		for _, out := range outcomes {
			if out != service.OutcomeApplied && out != service.OutcomeDuplicate {
				t.Errorf("concurrent deliveries = %v, want applied or duplicate", outcomes)
			}
		}
		if out, err := w.receive(ctx, evs[0]); err != nil || out != service.OutcomeDuplicate {
			t.Fatalf("Receive later = %q, %v, want duplicate", out, err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Fatalf("status = %v, want paid", st)
		}
		if n := w.outcomes("paid"); n != 1 {
			t.Fatalf("payments reported paid = %d, want 1", n)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Fatalf("discrepancies = %+v, want none", ds)
		}
	})
}

// TestWebhookOutOfOrder: a decline of an earlier attempt delivered after
// the success of a later one changes nothing: the order stays paid by the
// later attempt, nothing is released or refunded.
func TestWebhookOutOfOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "16.00")
		if _, err := w.pay(cust, o.ID, newKey(), "pm_declined"); err == nil {
			t.Fatal("Pay(pm_declined) = nil, want a decline")
		}
		if got, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay(pm_ok) = %v, %v, want paid", got.Status, err)
		}
		evs := w.events(t, o.ID)
		if len(evs) != 2 || evs[0].Type != domain.EventPaymentFailed || evs[1].Type != domain.EventPaymentSucceeded {
			t.Fatalf("events = %+v, want payment.failed then payment.succeeded", evs)
		}

		for _, ev := range []event{evs[1], evs[0]} {
			if out, err := w.receive(ctx, ev); err != nil || out != service.OutcomeApplied {
				t.Fatalf("Receive(%s) = %q, %v, want applied", ev.Type, out, err)
			}
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() {
			t.Fatalf("order = %v refunded %s, want paid, nothing refunded", got.Status, got.RefundedAmount)
		}
		if as := w.attempts(t, cust, o.ID); as[0].Status != domain.AttemptFailed || as[1].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %v, %v, want failed, succeeded", as[0].Status, as[1].Status)
		}
		if p, d := w.outcomes("paid"), w.outcomes("declined"); p != 1 || d != 1 {
			t.Fatalf("reported paid %d, declined %d, want 1 and 1", p, d)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Fatalf("discrepancies = %+v, want none", ds)
		}
	})
}

// TestWebhookChargePaydNeverMade: a success for a charge payd has no
// attempt for is recorded once as a missing local payment, for an operator.
func TestWebhookChargePaydNeverMade(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "3.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "3.00")
		evs := w.events(t, o.ID)
		if len(evs) != 1 {
			t.Fatalf("events = %+v, want one", evs)
		}
		if out, err := w.receive(ctx, evs[0]); err != nil || out != service.OutcomeDiscrepancy {
			t.Fatalf("Receive = %q, %v, want discrepancy", out, err)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment {
			t.Fatalf("discrepancies = %+v, want one missing_local_payment", ds)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPending {
			t.Fatalf("status = %v, want pending", st)
		}
	})
}

// TestWebhookFailureContradictingProvider: a payment.failed for an attempt
// whose outcome payd does not know yet (the reply was lost) but which the
// provider charged is checked with the provider before anything is
// released: the order ends paid by that charge, never free for a second.
func TestWebhookFailureContradictingProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "18.00")
		if got, err := w.pay(cust, o.ID, newKey(), "pm_timeout"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
		}
		evs := w.events(t, o.ID)
		if len(evs) != 1 {
			t.Fatalf("events = %+v, want one", evs)
		}
		stale := evs[0] // the same charge, reported failed by a wrong or stale event
		stale.ID, stale.Type, stale.Data.FailureCode = "evt_stale_"+newKey(), domain.EventPaymentFailed, "card_declined"

		if _, err := w.receive(ctx, stale); err != nil {
			t.Fatalf("Receive(stale failure) = %v", err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Fatalf("status = %v, want paid: the provider charged this attempt", st)
		}
		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err == nil {
			t.Fatal("Pay with another key = nil, want a conflict")
		}
		if n := len(w.charges(t, o.ID)); n != 1 {
			t.Fatalf("charges = %d, want 1", n)
		}
	})
}
