package nemesis

import (
	"fmt"
	"slices"
	"time"

	"github.com/payd/payd/domain"
)

// The merchant invariant: every event told reached the shop, or payd
// shows why not.

// Delivered counts what InvDelivered saw, for the summary line: the
// events of a subscribed type payd holds, how many reached the merchant
// (verified), how many payd shows pending or failed instead, and the
// requests that arrived, of them how many were an event again, and how
// many were of an event newer than payd's view of its order (Late: it
// arrived after the order was read, and the read does not hold it).
type Delivered struct {
	Events, Arrived, Pending, Failed int
	Arrivals, Again, Late            int
}

// delivered proves InvDelivered over the merchant's arrivals and the
// deliveries payd shows; it also counts for the summary.
func (c *checker) delivered() ([]Violation, *Delivered) {
	m := c.w.Merchant
	if m == nil {
		return nil, nil
	}
	n := &Delivered{Arrivals: len(m.Arrivals)}
	type held struct {
		order string
		e     Told
	}
	events := map[string]held{}
	for _, id := range c.orderIDs() {
		for _, e := range c.w.Orders[id].Told {
			events[e.ID] = held{id, e}
		}
	}
	var out []Violation
	bad := func(order, format string, args ...any) {
		out = append(out, Violation{Invariant: InvDelivered, Slice: c.byOrder[order], Detail: fmt.Sprintf(format, args...)})
	}
	// Every arrival names an event payd holds, under its own webhook-id,
	// signed; one event's arrivals carry one body.
	byID := map[string][]Arrival{}
	for _, a := range m.Arrivals {
		h, ok := events[a.WebhookID]
		if o, known := c.w.Orders[a.OrderID]; !ok && known && !o.ReadAt.IsZero() && !a.At.Before(o.ReadAt) {
			// Sent only once committed: an event that arrived before its
			// order was read is in the read; one that came after may be
			// newer than it.
			n.Late++
			continue
		}
		switch {
		case !ok:
			bad(a.OrderID, "an arrival at %s via %s carries webhook-id %q (event %q of order %q), which no event payd holds has: invented",
				a.At.UTC().Format("15:04:05.000"), a.Via, a.WebhookID, a.EventID, a.OrderID)
			continue
		case a.EventID != a.WebhookID:
			bad(h.order, "an arrival under webhook-id %s names event %q in its body", a.WebhookID, a.EventID)
		case !a.Verified:
			bad(h.order, "an arrival of event %s (%s) via %s at %s did not verify with the endpoint's secret",
				a.WebhookID, h.e.Type, a.Via, a.At.UTC().Format("15:04:05.000"))
		}
		if prev := byID[a.WebhookID]; len(prev) > 0 {
			n.Again++
			if prev[0].BodyHash != a.BodyHash {
				bad(h.order, "event %s arrived with two bodies (%s via %s, %s via %s)", a.WebhookID,
					short(prev[0].BodyHash), prev[0].Via, short(a.BodyHash), a.Via)
			}
		}
		byID[a.WebhookID] = append(byID[a.WebhookID], a)
	}
	// first is when event id first arrived verified; zero if it never did.
	first := func(id string) time.Time {
		var t time.Time
		for _, a := range byID[id] {
			if a.Verified && (t.IsZero() || a.At.Before(t)) {
				t = a.At
			}
		}
		return t
	}
	for _, id := range c.orderIDs() {
		var prev *Told // the order's last event of a subscribed type that arrived
		var missing *Told
		for _, e := range c.w.Orders[id].Told {
			if !slices.Contains(m.Subscribed, e.Type) {
				continue
			}
			n.Events++
			at := first(e.ID)
			shown := m.Shown[e.ID]
			switch {
			case !at.IsZero():
				n.Arrived++
			case shown == domain.DeliveryPending:
				n.Pending++
			case shown == domain.DeliveryFailed:
				n.Failed++
			default:
				bad(id, "order %s: event %s (%s, seq %d) never reached the merchant, and payd's deliveries list shows it neither pending nor failed (%q)",
					id, e.ID, e.Type, e.Seq, shown)
			}
			if at.IsZero() {
				if shown != domain.DeliveryFailed && missing == nil {
					missing = &e
				}
				continue
			}
			if missing != nil {
				bad(id, "order %s: event %s (seq %d) reached the merchant, but event %s (seq %d) before it never did and is not failed",
					id, e.ID, e.Seq, missing.ID, missing.Seq)
			}
			if prev != nil && at.Before(first(prev.ID)) {
				bad(id, "order %s: event %s (seq %d) first arrived at %s, before event %s (seq %d) at %s", id, e.ID, e.Seq,
					at.UTC().Format("15:04:05.000"), prev.ID, prev.Seq, first(prev.ID).UTC().Format("15:04:05.000"))
			}
			prev = &e
		}
	}
	return out, n
}

// short is a hash's first characters, enough to tell two apart.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
