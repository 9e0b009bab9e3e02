package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestRefundOfDisputedChargeRefused: an operator's refund of an order
// whose charge is under an open dispute is refused with ErrChargeDisputed
// before anything is reserved: the bank took the money back already, and a
// refund would give it twice. Once the dispute is over, the refund works.
func TestRefundOfDisputedChargeRefused(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.charges(t, o.ID)[0]
		w.dispute(ch.ID, "10.00")

		_, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1"})
		if !errors.Is(err, domain.ErrChargeDisputed) {
			t.Fatalf("Refund of a disputed charge = %v, want ErrChargeDisputed", err)
		}
		if got := w.get(t, cust, o.ID); got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() {
			t.Errorf("order = %s refunded %s, want paid with nothing reserved", got.Status, got.RefundedAmount)
		}
		if got := w.charges(t, o.ID)[0].Refunded; !got.IsZero() {
			t.Errorf("provider refunded %s, want nothing", got)
		}

		w.dispute(ch.ID, "0")
		r, got, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2"})
		if err != nil || r.Status != domain.RefundSucceeded || got.Status != domain.StatusRefunded {
			t.Fatalf("Refund after the dispute = %+v, order %s, %v; want succeeded, refunded", r, got.Status, err)
		}
	})
}

// TestResolveRefundOfDisputedChargeRefused: refunding a charge payd never
// asked for is refused while the provider reports it disputed, and the
// discrepancy stays open; once the dispute is over, the charge is given
// back in full — what the provider says is left, not the discrepancy's
// amount.
func TestResolveRefundOfDisputedChargeRefused(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		_, o, d := w.foreignCharge(t, "9.00")
		w.refundBehindPaydsBack(t, d.ChargeID, "2.00")
		w.dispute(d.ChargeID, "7.00")

		if _, err := w.resolver.Resolve(ctx, d.ID, service.ResolveRefund, "ops"); !errors.Is(err, domain.ErrChargeDisputed) {
			t.Fatalf("Resolve(refund) of a disputed charge = %v, want ErrChargeDisputed", err)
		}
		if got := w.discrepanciesOf(t, o.ID)[0]; got.Status != domain.DiscrepancyOpen {
			t.Errorf("discrepancy = %s after the refusal, want open", got.Status)
		}
		if got := w.charges(t, o.ID)[0].Refunded; !got.Equal(money("2.00")) {
			t.Errorf("provider refunded %s, want only the 2.00 refunded outside payd", got)
		}

		w.dispute(d.ChargeID, "0")
		got, err := w.resolver.Resolve(ctx, d.ID, service.ResolveRefund, "ops")
		if err != nil || got.Status != domain.DiscrepancyResolved {
			t.Fatalf("Resolve(refund) after the dispute = %+v, %v; want resolved", got, err)
		}
		if got := w.charges(t, o.ID)[0].Refunded; !got.Equal(money("9.00")) {
			t.Errorf("provider refunded %s, want all 9.00 (7.00 by payd: what was left)", got)
		}
	})
}
