package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

func money(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// TestRefundPartialThenFull: a partial refund leaves the order paid with
// what was given back recorded; refunding the rest makes it refunded; the
// provider's charge shows both.
func TestRefundPartialThenFull(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")

		r, got, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1", Amount: "4.00", Reason: "damaged"})
		if err != nil || r.Status != domain.RefundSucceeded || !r.Amount.Equal(money("4.00")) {
			t.Fatalf("Refund(4.00) = %+v, %v, want succeeded 4.00", r, err)
		}
		if got.Status != domain.StatusPaid || !got.RefundedAmount.Equal(money("4.00")) {
			t.Fatalf("order = %v refunded %s, want paid with 4.00 refunded", got.Status, got.RefundedAmount)
		}

		r, got, err = w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2", Reason: "rest"})
		if err != nil || r.Status != domain.RefundSucceeded || !r.Amount.Equal(money("6.00")) {
			t.Fatalf("Refund(rest) = %+v, %v, want succeeded 6.00", r, err)
		}
		if got.Status != domain.StatusRefunded || !got.RefundedAmount.Equal(money("10.00")) {
			t.Fatalf("order = %v refunded %s, want refunded with 10.00 refunded", got.Status, got.RefundedAmount)
		}
		cs := w.charges(t, o.ID)
		if len(cs) != 1 || !cs[0].Refunded.Equal(money("10.00")) {
			t.Fatalf("provider charges = %+v, want one, refunded 10.00", cs)
		}
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-3", Amount: "0.01"}); !errors.Is(err, domain.ErrOrderNotRefundable) {
			t.Fatalf("Refund of a refunded order = %v, want ErrOrderNotRefundable", err)
		}
	})
}

// TestRefundReplaySameKey: a refund repeated under its request ID is the
// same refund, given back once.
func TestRefundReplaySameKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		req := service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp", Amount: "3.00"}

		first, _, err := w.refunds.Refund(ctx, req)
		if err != nil {
			t.Fatalf("Refund = %v", err)
		}
		again, got, err := w.refunds.Refund(ctx, req)
		if err != nil || again.ID != first.ID {
			t.Fatalf("Refund again = %s, %v, want %s", again.ID, err, first.ID)
		}
		if !got.RefundedAmount.Equal(money("3.00")) || !w.charges(t, o.ID)[0].Refunded.Equal(money("3.00")) {
			t.Fatalf("refunded = %s (provider %s), want 3.00 once", got.RefundedAmount, w.charges(t, o.ID)[0].Refunded)
		}
	})
}

// TestRefundTooLarge: more than remains refundable is refused before the
// provider is asked, and reserves nothing.
func TestRefundTooLarge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")

		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1", Amount: "10.01"}); !errors.Is(err, domain.ErrRefundTooLarge) {
			t.Fatalf("Refund(10.01 of 10.00) = %v, want ErrRefundTooLarge", err)
		}
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2", Amount: "7.00"}); err != nil {
			t.Fatalf("Refund(7.00) = %v", err)
		}
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-3", Amount: "3.01"}); !errors.Is(err, domain.ErrRefundTooLarge) {
			t.Fatalf("Refund(3.01 of the 3.00 left) = %v, want ErrRefundTooLarge", err)
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusPaid || !got.RefundedAmount.Equal(money("7.00")) {
			t.Fatalf("order = %v refunded %s, want paid with 7.00 refunded", got.Status, got.RefundedAmount)
		}
		if r := w.charges(t, o.ID)[0].Refunded; !r.Equal(money("7.00")) {
			t.Fatalf("provider refunded %s, want 7.00", r)
		}
	})
}

// TestRefundRefusedGivesReservationBack: a refund the provider refuses
// (here: the charge was partly refunded elsewhere, so less is left there
// than payd believes) fails with ErrRefundRefused, and its reservation goes
// back to the order, which stays paid and refundable.
func TestRefundRefusedGivesReservationBack(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		w.refundBehindPaydsBack(t, w.charges(t, o.ID)[0].ID, "8.00")

		_, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1", Amount: "5.00"})
		if !errors.Is(err, domain.ErrRefundRefused) {
			t.Fatalf("Refund = %v, want ErrRefundRefused", err)
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() {
			t.Fatalf("order = %v refunded %s, want paid with nothing reserved", got.Status, got.RefundedAmount)
		}
		r, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2", Amount: "2.00"})
		if err != nil || r.Status != domain.RefundSucceeded {
			t.Fatalf("Refund(2.00) after the refusal = %+v, %v, want succeeded", r, err)
		}
	})
}

// TestRefundsConcurrentNeverExceedPaid: refunds racing on two replicas
// never add up to more than was paid, in payd's books or at the provider.
func TestRefundsConcurrentNeverExceedPaid(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		other := w.replica()
		const n = 6 // 6 × 3.00 asked of 10.00: at most 3 fit
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		succeeded := 0
		for i := range n {
			p := w
			if i%2 == 1 {
				p = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, _, err := p.refunds.Refund(context.Background(), service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: newKey(), Amount: "3.00"})
				switch {
				case err == nil && r.Status == domain.RefundSucceeded:
					mu.Lock()
					succeeded++
					mu.Unlock()
				case errors.Is(err, domain.ErrRefundTooLarge):
				default:
					t.Errorf("Refund = %+v, %v, want succeeded or ErrRefundTooLarge", r, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if succeeded != 3 {
			t.Errorf("refunds succeeded = %d, want 3", succeeded)
		}
		got := w.get(t, cust, o.ID)
		if !got.RefundedAmount.Equal(money("9.00")) || got.Status != domain.StatusPaid {
			t.Fatalf("order = %v refunded %s, want paid with 9.00 refunded", got.Status, got.RefundedAmount)
		}
		if r := w.charges(t, o.ID)[0].Refunded; !r.Equal(money("9.00")) {
			t.Fatalf("provider refunded %s, want 9.00", r)
		}
	})
}
