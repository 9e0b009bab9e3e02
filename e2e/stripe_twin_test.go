package e2e

import (
	"net/http"
	"testing"

	"github.com/payd/payd/internal/stripefake"
)

// A second succeeded PaymentIntent carrying payd's metadata for an order
// another charge already paid is a duplicate charge, and refunded as every
// duplicate is (docs/guarantees.md): confirmed with Stripe first, booked,
// refunded under a key derived from the charge, and recorded as
// duplicate_charge, resolved; the order stays paid by its own charge, and
// delivering the event again refunds nothing more (issue 36, 3).
func TestStripeTwinOfAPaidOrderIsRefunded(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		_, tok := s.register(newEmail())
		id, pi := s.paidStripeOrder(tok, "19.90")
		twin, ev := s.fake.Twin(pi)
		s.deliver(ev, ev)
		s.deliver(ev)
		tl := s.timeline(id)
		if tl.Order.Status != "paid" || tl.Order.RefundedAmount != "0.00" || *tl.Attempts[0].ProviderChargeId != pi {
			t.Fatalf("order %s refunded %s, attempt %+v after a twin's success; want paid by %s, nothing refunded",
				tl.Order.Status, tl.Order.RefundedAmount, tl.Attempts[0], pi)
		}
		if len(tl.Discrepancies) != 1 || tl.Discrepancies[0].Type != "duplicate_charge" || tl.Discrepancies[0].Reference != twin ||
			tl.Discrepancies[0].Status != "resolved" {
			t.Fatalf("discrepancies = %+v, want one duplicate_charge for %s, resolved by its refund", tl.Discrepancies, twin)
		}
		var refunds int
		for _, r := range s.fake.Refunds() {
			if r[1] == "succeeded" {
				refunds++
			}
		}
		if refunds != 1 || len(tl.Refunds) != 1 || tl.Refunds[0].Kind != "auto" || tl.Refunds[0].ProviderChargeId != twin {
			t.Fatalf("Stripe refunds %v, payd's %+v; want one automatic refund of %s", s.fake.Refunds(), tl.Refunds, twin)
		}
		doc := s.books(id)
		wantMoney(t, "twin refunded", doc, "39.80", "19.90", "0.00", "0.00", "19.90")
		if r := s.pay(tok, s.order(tok, "1.00"), "k-"+twin, stripefake.PMVisa); r.Status != http.StatusOK {
			t.Fatalf("a later pay = %d %s, want 200", r.Status, r.Body)
		}
	})
}
