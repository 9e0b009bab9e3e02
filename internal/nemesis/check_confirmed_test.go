package nemesis

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
)

// confirmedWorld is a run in which payd told only confirmed money, in the
// cases where an event's refunded_amount and its ledger's refunded differ
// or the provider's end is no bound:
//
//   - p1 (10.00) was paid by chA and charged again by chB, which payd
//     refunded on its own in full; then payd refunded 3.00 of chA, and a
//     dispute opened.
//   - p2 (4.00) was refunded in full at the provider before payd learned
//     its payment succeeded: the refund was booked alone and told, then
//     counted by the settlement, whose order.paid tells the order refunded.
//   - p3 (10.00) was refunded 3.00, which the provider then reversed.
//   - p4 (10.00): an outside refund of 2.00 came while payd's refund of
//     3.00 was in flight, and was told at once; the 3.00 when the provider
//     confirmed it.
func confirmedWorld() World {
	ev := func(id string, t domain.NotifyType, seq int64, s domain.OrderStatus, a Amounts) Told {
		return Told{ID: id, Type: t, Seq: seq, Status: s, Amounts: a}
	}
	paid, refunded := domain.StatusPaid, domain.StatusRefunded
	w := World{
		Setup: "sqlite", Seed: 7,
		Charges: []Charge{
			{ID: "chA", OrderID: "p1", Amount: decOf("10.00"), Succeeded: true, Refunded: decOf("3.00"), Created: atMS(10)},
			{ID: "chB", OrderID: "p1", Amount: decOf("10.00"), Succeeded: true, Refunded: decOf("10.00"), Created: atMS(11)},
			{ID: "chC", OrderID: "p2", Amount: decOf("4.00"), Succeeded: true, Refunded: decOf("4.00"), Created: atMS(12)},
			{ID: "chD", OrderID: "p3", Amount: decOf("10.00"), Succeeded: true, Created: atMS(13)},
			{ID: "chE", OrderID: "p4", Amount: decOf("10.00"), Succeeded: true, Refunded: decOf("5.00"), Created: atMS(14)},
		},
		Orders: map[string]OrderState{
			"p1": {ID: "p1", Status: paid, Amount: decOf("10.00"), Refunded: decOf("3.00"), ChargeID: "chA", Attempts: 2, RefundsBooked: 2,
				Told: []Told{
					ev("f1", domain.NotifyOrderPaid, 3, paid, told("0.00", "10.00", "0.00")),
					ev("f2", domain.NotifyOrderRefunded, 4, paid, told("0.00", "20.00", "10.00")), // chB given back: not the order's payment
					ev("f3", domain.NotifyOrderRefunded, 6, paid, told("3.00", "20.00", "13.00")),
					ev("f4", domain.NotifyOrderDisputed, 7, paid, told("3.00", "20.00", "13.00")),
				}},
			"p2": {ID: "p2", Status: refunded, Amount: decOf("4.00"), Refunded: decOf("4.00"), ChargeID: "chC", Attempts: 1, RefundsBooked: 1,
				Told: []Told{
					ev("f5", domain.NotifyOrderRefunded, 2, domain.StatusProcessing, told("0.00", "0.00", "4.00")),
					ev("f6", domain.NotifyOrderPaid, 4, refunded, told("4.00", "4.00", "4.00")),
				}},
			"p3": {ID: "p3", Status: paid, Amount: decOf("10.00"), ChargeID: "chD", Attempts: 1, RefundsBooked: 1,
				Told: []Told{
					ev("f7", domain.NotifyOrderPaid, 3, paid, told("0.00", "10.00", "0.00")),
					ev("f8", domain.NotifyOrderRefunded, 5, paid, told("3.00", "10.00", "3.00")),
					ev("f9", domain.NotifyOrderRefundReversed, 6, paid, told("0.00", "10.00", "0.00")),
				}},
			"p4": {ID: "p4", Status: paid, Amount: decOf("10.00"), Refunded: decOf("5.00"), ChargeID: "chE", Attempts: 1, RefundsBooked: 2,
				Told: []Told{
					ev("f10", domain.NotifyOrderPaid, 3, paid, told("0.00", "10.00", "0.00")),
					ev("f11", domain.NotifyOrderRefunded, 5, paid, told("2.00", "10.00", "2.00")), // the outside 2.00; payd's 3.00 only reserved
					ev("f12", domain.NotifyOrderRefunded, 6, paid, told("5.00", "10.00", "5.00")),
				}},
		},
		Payd:     Money{Charged: decOf("44.00"), Refunded: decOf("22.00")},
		Provider: Money{Charged: decOf("44.00"), Refunded: decOf("22.00")},
		Merchant: &Merchant{Subscribed: domain.NotifyTypes, Shown: map[string]domain.DeliveryStatus{}},
	}
	for _, id := range w.orderIDs() {
		for _, e := range w.Orders[id].Told {
			w.Merchant.Arrivals = append(w.Merchant.Arrivals, arrival(e.ID, id, "h"+e.ID, 100+len(w.Merchant.Arrivals), "payd-1"))
		}
	}
	bodiesAsTold(&w)
	return w
}

// orderIDs lists w's orders, sorted.
func (w World) orderIDs() []string {
	return slices.Sorted(maps.Keys(w.Orders))
}

func TestCheckConfirmedMoneyHolds(t *testing.T) {
	if err := Check(confirmedWorld()).Err(); err != nil {
		t.Fatalf("Check = %v, want no violation", err)
	}
}

// TestCheckConfirmedMoneyCatchesAReservation: payd's refund of 3.00 of
// p4 was in flight when the outside refund was told, and the event told
// its reservation as money. The provider confirmed it later, so its end
// bounds nothing: the event's own ledger sums show what was confirmed when
// it was written. The shop heard it so too.
func TestCheckConfirmedMoneyCatchesAReservation(t *testing.T) {
	w := confirmedWorld()
	w.Orders["p4"].Told[1].Amounts = told("5.00", "10.00", "2.00")
	bodiesAsTold(&w)
	r := Check(w)
	if len(r.Violations) != 1 {
		t.Fatalf("Check = %v, want one violation", r.Err())
	}
	v := r.Violations[0]
	if v.Invariant != InvConfirmedMoney || !strings.Contains(v.Detail, "event f11") || !strings.Contains(v.Detail, "refunded_amount 5") {
		t.Fatalf("violation = %s: %s, want %s of event f11's refunded_amount 5.00", v.Invariant, v.Detail, InvConfirmedMoney)
	}

	// A body the shop heard that differs from payd's event is judged on
	// its own.
	w = confirmedWorld()
	for i, a := range w.Merchant.Arrivals {
		if a.EventID == "f11" {
			w.Merchant.Arrivals[i].Amounts = &Amounts{Refunded: decOf("5.00"), Books: Money{Charged: decOf("10.00"), Refunded: decOf("2.00")}}
		}
	}
	r = Check(w)
	if len(r.Violations) != 1 || r.Violations[0].Invariant != InvConfirmedMoney || !strings.Contains(r.Violations[0].Detail, "as it arrived via payd-1") {
		t.Fatalf("Check = %v, want one %s violation of the arrival", r.Err(), InvConfirmedMoney)
	}
}

// TestCheckConfirmedMoneyProviderBound: money the provider never shows
// refunded of the order's payment at the end, told as the order's
// refunded_amount.
func TestCheckConfirmedMoneyProviderBound(t *testing.T) {
	// p4's 3.00 was refused, yet told with its ledger as if booked.
	w := confirmedWorld()
	w.Charges[4].Refunded = decOf("2.00")
	o := w.Orders["p4"]
	o.Told[1].Amounts = told("5.00", "10.00", "5.00")
	o.Told, o.Refunded, o.RefundsBooked = o.Told[:2], decOf("2.00"), 1
	w.Orders["p4"] = o
	w.Merchant.Arrivals = slices.DeleteFunc(w.Merchant.Arrivals, func(a Arrival) bool { return a.EventID == "f12" })
	w.Payd.Refunded, w.Provider.Refunded = decOf("19.00"), decOf("19.00")
	bodiesAsTold(&w)
	r := Check(w)
	if len(r.Violations) != 1 {
		t.Fatalf("Check = %v, want one violation", r.Err())
	}
	d := r.Violations[0].Detail
	for _, want := range []string{"event f11", "of its paying charge chE", "its ledger's refunded 5"} {
		if r.Violations[0].Invariant != InvConfirmedMoney || !strings.Contains(d, want) {
			t.Errorf("violation = %s: %s, want %s saying %q", r.Violations[0].Invariant, d, InvConfirmedMoney, want)
		}
	}

	// p1's duplicate charge, given back in full, does not hide a
	// refunded_amount its paying charge never had back.
	w = confirmedWorld()
	w.Orders["p1"].Told[2].Amounts = told("10.00", "20.00", "13.00")
	bodiesAsTold(&w)
	r = Check(w)
	if len(r.Violations) != 1 || r.Violations[0].Invariant != InvConfirmedMoney || !strings.Contains(r.Violations[0].Detail, "of its paying charge chA") {
		t.Fatalf("Check = %v, want one %s violation against charge chA", r.Err(), InvConfirmedMoney)
	}
}
