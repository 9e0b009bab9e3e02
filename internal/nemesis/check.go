package nemesis

import (
	"slices"
)

// The invariants Check proves, by the names Report.Checked lists.
const (
	// InvOneCharge: each order has at most one successful charge at the
	// provider that is not refunded in full.
	InvOneCharge = "at_most_one_unrefunded_charge"
	// InvPaidOneCharge: an order is paid (or refunded since) exactly when
	// it holds one successful charge for its amount; a paid order's
	// refunded amount is that charge's, a refunded order's charge is
	// refunded in full, any other order keeps no charge.
	InvPaidOneCharge = "paid_iff_one_charge"
	// InvBooks: payd's money summary equals the provider's books.
	InvBooks = "books_equal_provider"
	// InvSameFinal: every final answer under a key is byte-identical to
	// the key's first final answer.
	InvSameFinal = "final_answers_identical"
	// InvPendingFirst: before a key's final answer, only 202 or 409 with
	// Retry-After; none after it; and the final sweep hears final answers.
	InvPendingFirst = "pending_only_before_final"
	// InvNoUnpaid200: no 200 says an order is paid before a successful
	// charge for it exists at the provider.
	InvNoUnpaid200 = "no_200_for_unpaid_order"
	// InvNo5xx: no 5xx answer but 503 with Retry-After.
	InvNo5xx = "no_5xx_but_503_retry_after"
	// InvPayExplained: every 2xx pay answer describes this request's
	// payment of this order, and a 200 a successful charge the provider
	// holds for it.
	InvPayExplained = "pay_2xx_explained_by_provider"
	// InvLinearizable: each order's observed statuses are linearizable
	// against domain.OrderMachine.
	InvLinearizable = "linearizable"
	// InvOneEvent: every committed change of an order has exactly one
	// outbox event (docs/adr/0053-telling-the-shop.md), and each event is
	// visible to operators: a paid order was told order.paid once, a
	// cancelled or expired one its close once, each refund its ledger
	// books order.refunded once, no attempt was told declined twice;
	// each event's snapshot fits its type, and the order's events are
	// numbered by distinct, increasing versions.
	InvOneEvent = "one_event_per_change"
	// InvDelivered: once the world settled, every outbox event of a type
	// the merchant subscribes to reached it at least once with a valid
	// signature, or payd's admin deliveries list shows it pending or
	// failed; every arrival under one webhook-id carries the same body;
	// no arrival names an event payd does not hold; and an order's events
	// first arrived in the order of their seq.
	InvDelivered = "events_delivered"
	// InvConfirmedMoney: every event's amounts were confirmed at the
	// provider when it was written (ADR 0055): its refunded_amount is at
	// most its own ledger's refunded, and, on a provider whose refunds
	// never reverse, at most what the provider shows refunded of the
	// order's paying charge at the end; its ledger's refunded and charged
	// are at most what the provider shows of the order's charges. Judged
	// for each event payd holds and each body the merchant heard.
	InvConfirmedMoney = "events_tell_confirmed_money"
	// InvStock: no product's counted stock is below 0, in the database or
	// on the storefront, and the two agree; every unit the merchant put
	// in is left or sold: received = left + sold, where sold is what the
	// orders still holding units took (every order that is not cancelled
	// or expired), so each cancelled or expired order's units came back
	// exactly once; and each creation answered 201 took, once, the units
	// it asked for.
	InvStock = "stock_left_plus_sold_is_received"
	// InvShipped: no line shipped more than it holds, nor less than 0;
	// the units an order's lines shipped are, SKU by SKU, the units its
	// shipments hold; its fulfillment_status is what those counts say;
	// only an order that was paid holds shipments, at most one per key
	// the merchant sent for it; and each shipment answered 201 is one
	// the order holds.
	InvShipped = "shipped_at_most_ordered"
)

// Invariants lists every invariant Check proves, in the order it reports
// them.
var Invariants = []string{InvOneCharge, InvPaidOneCharge, InvBooks, InvSameFinal, InvPendingFirst,
	InvNoUnpaid200, InvNo5xx, InvPayExplained, InvLinearizable, InvOneEvent, InvDelivered, InvConfirmedMoney, InvStock, InvShipped}

// Violation is one broken invariant: what broke, and the smallest part of
// the history that shows it.
type Violation struct {
	Invariant, Detail string
	Slice             []Op
}

// Check proves every invariant over w and reports what it checked and
// what broke.
func Check(w World) Report {
	ops := slices.Clone(w.Ops)
	sortOps(ops)
	c := checker{w: w, ops: ops, byOrder: map[string][]Op{}, charges: map[string][]Charge{}}
	for _, op := range ops {
		if op.OrderID != "" {
			c.byOrder[op.OrderID] = append(c.byOrder[op.OrderID], op)
		}
	}
	for _, ch := range w.Charges {
		c.charges[ch.OrderID] = append(c.charges[ch.OrderID], ch)
	}
	r := Report{Setup: w.Setup, Seed: w.Seed, MySQLDSN: w.MySQLDSN, Checked: slices.Clone(Invariants)}
	if len(ops) > 0 {
		r.Start = ops[0].Start
	}
	for _, inv := range []func() []Violation{c.oneCharge, c.paidOneCharge, c.books, c.keys, c.no5xx, c.pays, c.events, c.confirmedMoney, c.stock, c.shipped} {
		r.Violations = append(r.Violations, inv()...)
	}
	r.Violations = append(r.Violations, Linearizable(ops)...)
	told, counts := c.delivered()
	r.Violations, r.Delivered = append(r.Violations, told...), counts
	r.Stock = c.stockCounts()
	order := func(v Violation) int { return slices.Index(Invariants, v.Invariant) }
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return order(a) - order(b) })
	return r
}

type checker struct {
	w       World
	ops     []Op
	byOrder map[string][]Op
	charges map[string][]Charge // by order
}

// orderIDs lists every order the world knows of, sorted, so reports are
// stable.
func (c *checker) orderIDs() []string {
	seen := map[string]bool{}
	for id := range c.w.Orders {
		seen[id] = true
	}
	for id := range c.charges {
		if id != "" {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// eachOrder judges every order whose final view payd gave (an order it
// was not read for has nothing to compare): detail says how order o
// breaks inv, "" when it does not; the slice is the order's requests.
func (c *checker) eachOrder(inv string, detail func(o OrderState) string) []Violation {
	var out []Violation
	for _, id := range c.orderIDs() {
		o, ok := c.w.Orders[id]
		if !ok {
			continue
		}
		if d := detail(o); d != "" {
			out = append(out, Violation{Invariant: inv, Detail: d, Slice: c.byOrder[id]})
		}
	}
	return out
}
