package e2e

import (
	"net/http"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
)

// A Stripe refund that succeeds and then fails (refund.updated to failed,
// then refund.failed, as Stripe sends them) is taken back (issue 36, 3):
// a reversing ledger entry, the order's refunded amount given back
// through the guarded path, the shop told (order.refund_reversed), and a
// refund_reversed discrepancy for the operator. Every event delivered
// twice more, in reverse, changes nothing; the 9.00 still refundable can
// be refunded.
func TestStripeRefundSucceededThenFailed(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		_, tok := s.register(newEmail())
		id, pi := s.paidStripeOrder(tok, "9.00")
		if r := s.refund(id, uuid.NewString(), "4.00"); r.Status != http.StatusOK {
			t.Fatalf("refund 4.00 = %d %s, want 200", r.Status, r.Body)
		}
		s.deliver(s.eventsOf(pi)...)
		doc := s.books(id)
		wantMoney(t, "refunded", doc, "9.00", "4.00", "0.00", "0.00", "5.00")
		if doc.Order.RefundedAmount != "4.00" {
			t.Fatalf("refunded_amount = %s, want 4.00", doc.Order.RefundedAmount)
		}

		rs := s.fake.Refunds()
		re := rs[len(rs)-1][0]
		s.fake.FinishRefund(re, false)
		all := s.eventsOf("")
		rev := slices.Clone(all)
		slices.Reverse(rev)
		s.deliver(all...)
		s.deliver(rev...)
		s.deliver(rev...)

		doc = s.books(id)
		wantMoney(t, "reversed", doc, "9.00", "0.00", "0.00", "0.00", "9.00")
		wantLedger(t, "reversed", doc, map[string]int{"charge": 1, "refund": 1, "refund_reversed": 1})
		tl := s.timeline(id)
		if tl.Order.Status != "paid" || tl.Order.RefundedAmount != "0.00" || tl.Order.RefundPendingAmount != "0.00" {
			t.Errorf("order after the reversal = %s refunded %s pending %s, want paid, 0.00, 0.00",
				tl.Order.Status, tl.Order.RefundedAmount, tl.Order.RefundPendingAmount)
		}
		if len(tl.Refunds) != 1 || tl.Refunds[0].Status != "failed" {
			t.Errorf("refunds = %+v, want the one refund failed", tl.Refunds)
		}
		wantReversedAndTold(t, tl, doc, "4.00")

		// What is still refundable is refundable.
		if r := s.refund(id, uuid.NewString(), ""); r.Status != http.StatusOK {
			t.Fatalf("refund of the rest = %d %s, want 200", r.Status, r.Body)
		}
		s.deliver(s.eventsOf(pi)...)
		tl = s.timeline(id)
		if tl.Order.Status != "refunded" || tl.Order.RefundedAmount != "9.00" {
			t.Errorf("order after refunding the rest = %s refunded %s, want refunded 9.00", tl.Order.Status, tl.Order.RefundedAmount)
		}
	})
}

// A refund made at Stripe's Dashboard that succeeds and then fails is
// taken back too: payd had booked and counted it as an outside refund,
// so the order is given its money back, the shop told, and an operator
// told (issue 36: any provider fact that reverses an earlier one).
func TestStripeOutsideRefundSucceededThenFailed(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		_, tok := s.register(newEmail())
		id, pi := s.paidStripeOrder(tok, "19.90")
		re, err := s.fake.RefundOutside(pi, 1990)
		if err != nil {
			t.Fatal(err)
		}
		s.deliver(s.eventsOf(pi)...)
		if tl := s.timeline(id); tl.Order.Status != "refunded" || tl.Order.RefundedAmount != "19.90" {
			t.Fatalf("order after the outside refund = %s refunded %s, want refunded 19.90", tl.Order.Status, tl.Order.RefundedAmount)
		}
		s.fake.FinishRefund(re, false)
		all := s.eventsOf("")
		rev := slices.Clone(all)
		slices.Reverse(rev)
		s.deliver(all...)
		s.deliver(rev...)
		doc := s.books(id)
		wantMoney(t, "reversed", doc, "19.90", "0.00", "0.00", "0.00", "19.90")
		wantLedger(t, "reversed", doc, map[string]int{"charge": 1, "outside_refund": 1, "refund_reversed": 1})
		tl := s.timeline(id)
		if tl.Order.Status != "paid" || tl.Order.RefundedAmount != "0.00" {
			t.Errorf("order after the reversal = %s refunded %s, want paid 0.00", tl.Order.Status, tl.Order.RefundedAmount)
		}
		wantReversedAndTold(t, tl, doc, "19.90")
	})
}

// wantReversedAndTold fails t unless the order holds one refund_reversed
// discrepancy and the shop was told, of refunds, exactly order.refunded
// with refunded (the refund) and then order.refund_reversed with 0.00.
func wantReversedAndTold(t *testing.T, tl, doc client.Timeline, refunded string) {
	t.Helper()
	var reversed int
	for _, d := range tl.Discrepancies {
		if d.Type == "refund_reversed" {
			reversed++
		}
	}
	if reversed != 1 {
		t.Errorf("discrepancies = %+v, want one refund_reversed", tl.Discrepancies)
	}
	var told []string
	for _, e := range doc.Events {
		if e.Type == "order.refunded" || e.Type == "order.refund_reversed" {
			told = append(told, string(e.Type)+" "+e.RefundedAmount)
		}
	}
	if want := []string{"order.refunded " + refunded, "order.refund_reversed 0.00"}; !slices.Equal(told, want) {
		t.Errorf("the shop was told %v, want %v", told, want)
	}
}
