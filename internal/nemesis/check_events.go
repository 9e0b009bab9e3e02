package nemesis

import (
	"fmt"
	"slices"
	"strings"

	"github.com/payd/payd/domain"
)

// The outbox invariant: every committed change of an order told once.

// events holds each order's outbox events to its final state: what
// committed must have been told once, and nothing else.
func (c *checker) events() []Violation {
	return c.eachOrder(InvOneEvent, func(o OrderState) string {
		if why := toldWhy(o); why != "" {
			return "order " + o.ID + ": " + why
		}
		return ""
	})
}

// toldWhy says how order o's events break InvOneEvent, or "".
func toldWhy(o OrderState) string {
	count := map[domain.NotifyType]int{}
	var why []string
	last := domain.NotifyType("") // the last event that moved the order's status
	for i, e := range o.Told {
		count[e.Type]++
		if i > 0 && e.Seq <= o.Told[i-1].Seq {
			why = append(why, fmt.Sprintf("event %s has seq %d after seq %d", e.ID, e.Seq, o.Told[i-1].Seq))
		}
		if !e.Type.Valid() {
			why = append(why, fmt.Sprintf("event %s has unknown type %q", e.ID, e.Type))
			continue
		}
		if e.Type == domain.NotifyOrderShipped && e.Status != domain.StatusPaid {
			why = append(why, fmt.Sprintf("%s event %s shows the order %s: only a paid order ships", e.Type, e.ID, e.Status))
		}
		if want, moves := toldStatus[e.Type]; moves {
			last = e.Type
			if !slices.Contains(want, e.Status) {
				why = append(why, fmt.Sprintf("%s event %s shows the order %s", e.Type, e.ID, e.Status))
			}
		}
	}
	want := func(t domain.NotifyType, n int) {
		if count[t] != n {
			why = append(why, fmt.Sprintf("%d %s events, want %d", count[t], t, n))
		}
	}
	want(domain.NotifyOrderPaid, b2i(o.Status.WasPaid()))
	want(domain.NotifyOrderCancelled, b2i(o.Status == domain.StatusCancelled))
	want(domain.NotifyOrderExpired, b2i(o.Status == domain.StatusExpired))
	want(domain.NotifyOrderRefunded, o.RefundsBooked)
	want(domain.NotifyOrderShipped, len(o.Shipments))
	if n := count[domain.NotifyOrderPaymentFailed]; n > o.Attempts {
		why = append(why, fmt.Sprintf("%d order.payment_failed events for %d attempts", n, o.Attempts))
	}
	// The last status it was told is the status it has (a paid order's
	// refunds do not move it back).
	switch final := o.Status; {
	case final.WasPaid():
		if last != domain.NotifyOrderPaid {
			why = append(why, fmt.Sprintf("the order is %s, its last status event %q", final, last))
		}
	case final == domain.StatusPending || final == domain.StatusProcessing:
		if last != "" && last != domain.NotifyOrderPaymentFailed {
			why = append(why, fmt.Sprintf("the order is %s, its last status event %q", final, last))
		}
	}
	return strings.Join(why, "; ")
}

// toldStatus is the order status each event that moves it shows.
var toldStatus = map[domain.NotifyType][]domain.OrderStatus{
	domain.NotifyOrderPaid:          {domain.StatusPaid, domain.StatusRefunded},
	domain.NotifyOrderPaymentFailed: {domain.StatusPending},
	domain.NotifyOrderCancelled:     {domain.StatusCancelled},
	domain.NotifyOrderExpired:       {domain.StatusExpired},
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
