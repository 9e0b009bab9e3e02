package nemesis

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// The events' money invariant: an event tells as money only what the
// provider had confirmed when its transaction wrote it (ADR 0055), never a
// refund still in flight.
//
// What an event's transaction saw cannot be read again later, so each
// event is held to two witnesses:
//
//   - its own ledger sums. payd books a refund in the order's ledger in the
//     transaction that confirms it (its own refund's settle, an outside
//     refund's count, a repair from the ledger), and the order's
//     refunded_amount counts only refunds of the order's paying charge,
//     while the ledger's refunded counts those and every other (an
//     automatic refund of a duplicate charge, an outside refund booked
//     before its charge paid the order), less reversals of either. So an
//     event's refunded_amount is never more than its own money.refunded:
//     more is money the ledger had not booked, a reservation told as money.
//     This holds whenever the event was written and whatever the provider
//     did later, so it also catches a reservation told that the provider
//     confirmed afterwards.
//   - the provider's books at the end of the run. The sandbox's refunds, and
//     the Stripe fake's as the nemesis drives it, never reverse once they
//     succeeded, and a successful charge stays so: what the provider shows
//     at the end is at least what it had confirmed at any time before. An
//     event's refunded_amount is then at most what the provider shows
//     refunded of the order's paying charge (of all the order's charges
//     when payd names none), its ledger's refunded at most what the
//     provider shows refunded of all the order's charges, and its ledger's
//     charged at most what the provider shows charged of the order. An
//     order told order.refund_reversed is not held to the refund bounds:
//     the provider took back a refund it had confirmed, so its end is no
//     bound of what it confirmed before.
//
// Disputes are not judged: the provider's books the checker reads hold
// none, and a dispute moves neither the order's refunded_amount nor its
// ledger's charged or refunded.
//
// Each event payd's timeline holds is judged, and each verified arrival at
// the shop by the body it carried (what the shop heard is what matters to
// it); an event is judged once for each distinct money it was seen to
// tell, so an arrival that tells what payd's event tells adds nothing.

// confirmedMoney proves InvConfirmedMoney over every order's events and
// the merchant's arrivals.
func (c *checker) confirmedMoney() []Violation {
	var out []Violation
	judged := map[string]bool{} // an event's ID and the amounts it was judged by
	judge := func(order, event, what string, a Amounts) {
		key := fmt.Sprintf("%s|%s|%s|%s", event, a.Refunded, a.Books.Charged, a.Books.Refunded)
		if judged[key] {
			return
		}
		judged[key] = true
		if why := c.unconfirmed(order, a); why != "" {
			out = append(out, Violation{Invariant: InvConfirmedMoney, Slice: c.byOrder[order],
				Detail: fmt.Sprintf("order %s: %s tells %s", order, what, why)})
		}
	}
	for _, id := range c.orderIDs() {
		for _, e := range c.w.Orders[id].Told {
			judge(id, e.ID, fmt.Sprintf("event %s (%s, seq %d)", e.ID, e.Type, e.Seq), e.Amounts)
		}
	}
	if m := c.w.Merchant; m != nil {
		for _, a := range m.Arrivals {
			// An unverified arrival is no event of payd's to the shop
			// (events_delivered judges it).
			if !a.Verified || a.EventID == "" {
				continue
			}
			what := fmt.Sprintf("event %s as it arrived via %s at %s", a.EventID, a.Via, a.At.UTC().Format("15:04:05.000"))
			if a.Amounts == nil {
				out = append(out, Violation{Invariant: InvConfirmedMoney, Slice: c.byOrder[a.OrderID],
					Detail: fmt.Sprintf("order %s: %s carries no amounts that can be read", a.OrderID, what)})
				continue
			}
			judge(a.OrderID, a.EventID, what, *a.Amounts)
		}
	}
	return out
}

// unconfirmed says how amounts a, told by an event of order id, exceed
// what was confirmed, or "" when they do not.
func (c *checker) unconfirmed(id string, a Amounts) string {
	var why []string
	if a.Refunded.GreaterThan(a.Books.Refunded) {
		why = append(why, fmt.Sprintf("refunded_amount %s, more than its own ledger's refunded %s: money the provider had not confirmed when it was written",
			a.Refunded, a.Books.Refunded))
	}
	charged, refunded := decimal.Zero, decimal.Zero
	for _, ch := range c.charges[id] {
		if ch.Succeeded {
			charged = charged.Add(ch.Amount)
		}
		refunded = refunded.Add(ch.Refunded)
	}
	if a.Books.Charged.GreaterThan(charged) {
		why = append(why, fmt.Sprintf("charged %s, more than the provider shows charged of the order at the end (%s)", a.Books.Charged, c.describeCharges(id)))
	}
	if !c.reversed(id) {
		paying, of := refunded, "of all the order's charges"
		for _, ch := range c.charges[id] {
			if o := c.w.Orders[id]; o.ChargeID != "" && ch.ID == o.ChargeID {
				paying, of = ch.Refunded, "of its paying charge "+ch.ID
			}
		}
		if a.Refunded.GreaterThan(paying) {
			why = append(why, fmt.Sprintf("refunded_amount %s, more than the provider shows refunded %s at the end (%s)", a.Refunded, of, c.describeCharges(id)))
		}
		if a.Books.Refunded.GreaterThan(refunded) {
			why = append(why, fmt.Sprintf("its ledger's refunded %s, more than the provider shows refunded of the order's charges at the end (%s)",
				a.Books.Refunded, c.describeCharges(id)))
		}
	}
	return strings.Join(why, "; ")
}

// reversed reports whether payd told order id that the provider took back
// a refund it had confirmed.
func (c *checker) reversed(id string) bool {
	for _, e := range c.w.Orders[id].Told {
		if e.Type == domain.NotifyOrderRefundReversed {
			return true
		}
	}
	return false
}
