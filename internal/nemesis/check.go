package nemesis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
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
)

// Invariants lists every invariant Check proves, in the order it reports
// them.
var Invariants = []string{InvOneCharge, InvPaidOneCharge, InvBooks, InvSameFinal, InvPendingFirst,
	InvNoUnpaid200, InvNo5xx, InvPayExplained, InvLinearizable, InvOneEvent, InvDelivered}

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
	r := Report{Setup: w.Setup, Seed: w.Seed, Checked: slices.Clone(Invariants)}
	if len(ops) > 0 {
		r.Start = ops[0].Start
	}
	for _, inv := range []func() []Violation{c.oneCharge, c.paidOneCharge, c.books, c.keys, c.no5xx, c.pays, c.events} {
		r.Violations = append(r.Violations, inv()...)
	}
	r.Violations = append(r.Violations, Linearizable(ops)...)
	told, counts := c.delivered()
	r.Violations, r.Delivered = append(r.Violations, told...), counts
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

func (c *checker) oneCharge() []Violation {
	var out []Violation
	for _, id := range c.orderIDs() {
		var kept []string
		for _, ch := range c.charges[id] {
			if ch.kept() {
				kept = append(kept, ch.ID)
			}
		}
		if len(kept) > 1 {
			out = append(out, Violation{Invariant: InvOneCharge, Slice: c.byOrder[id],
				Detail: fmt.Sprintf("order %s: the provider holds %d unrefunded successful charges (%s)", id, len(kept), strings.Join(kept, ", "))})
		}
	}
	return out
}

func (c *checker) paidOneCharge() []Violation {
	var out []Violation
	for _, id := range c.orderIDs() {
		o, ok := c.w.Orders[id]
		if !ok {
			continue // payd's view was not read: nothing to compare
		}
		if why := c.paidWhy(o); why != "" {
			out = append(out, Violation{Invariant: InvPaidOneCharge, Slice: c.byOrder[id],
				Detail: fmt.Sprintf("order %s (%s, %s, refunded %s): %s", id, o.Status, o.Amount, o.Refunded, why)})
		}
	}
	return out
}

// paidWhy says how order o and the provider's charges for it disagree,
// or "" when they agree.
func (c *checker) paidWhy(o OrderState) string {
	var kept, full []Charge // successful charges of the order's amount: kept, refunded in full
	for _, ch := range c.charges[o.ID] {
		switch {
		case !ch.Succeeded || !ch.Amount.Equal(o.Amount):
		case ch.kept():
			kept = append(kept, ch)
		default:
			full = append(full, ch)
		}
	}
	var other []string // kept charges of another amount: they pay nothing
	for _, ch := range c.charges[o.ID] {
		if ch.kept() && !ch.Amount.Equal(o.Amount) {
			other = append(other, fmt.Sprintf("%s of %s", ch.ID, ch.Amount))
		}
	}
	switch {
	case len(other) > 0:
		return "the provider keeps charges for another amount: " + strings.Join(other, ", ")
	case o.Status == domain.StatusPaid:
		if len(kept) != 1 {
			return fmt.Sprintf("paid, but the provider keeps %d successful charges of its amount", len(kept))
		}
		if o.ChargeID != "" && kept[0].ID != o.ChargeID {
			return fmt.Sprintf("paid by charge %s, but the provider's kept charge is %s", o.ChargeID, kept[0].ID)
		}
		if !kept[0].Refunded.Equal(o.Refunded) {
			return fmt.Sprintf("payd says refunded %s, the provider %s of charge %s", o.Refunded, kept[0].Refunded, kept[0].ID)
		}
	case o.Status == domain.StatusRefunded:
		if len(kept) != 0 {
			return fmt.Sprintf("refunded, but the provider keeps %d successful charges", len(kept))
		}
		if !o.Refunded.Equal(o.Amount) {
			return "refunded, but payd's refunded amount is not the whole amount"
		}
		if o.ChargeID != "" && !slices.ContainsFunc(full, func(ch Charge) bool { return ch.ID == o.ChargeID }) {
			return fmt.Sprintf("refunded, but its charge %s is not a successful charge of its amount refunded in full at the provider", o.ChargeID)
		}
		if len(full) == 0 {
			return "refunded, but the provider holds no successful charge of its amount refunded in full"
		}
	case o.Status == domain.StatusProcessing:
		return "still processing after the world settled"
	case len(kept) != 0:
		return fmt.Sprintf("not paid, but the provider keeps %d successful charges", len(kept))
	}
	return ""
}

func (c *checker) books() []Violation {
	p, q := c.w.Payd, c.w.Provider
	var why []string
	if !p.Charged.Equal(q.Charged) || !p.Refunded.Equal(q.Refunded) {
		why = append(why, fmt.Sprintf("payd says charged %s refunded %s, the provider charged %s refunded %s", p.Charged, p.Refunded, q.Charged, q.Refunded))
	}
	for _, m := range []struct {
		who string
		m   Money
	}{{"payd", p}, {"the provider", q}} {
		if m.m.Refunded.GreaterThan(m.m.Charged) {
			why = append(why, fmt.Sprintf("%s refunded %s of %s charged", m.who, m.m.Refunded, m.m.Charged))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return []Violation{{Invariant: InvBooks, Detail: strings.Join(why, "; "), Slice: c.booksSlice()}}
}

// booksSlice is the ops of the orders whose own money disagrees (what
// payd's final view keeps against what the provider keeps); when every
// order agrees, the answers that moved money.
func (c *checker) booksSlice() []Op {
	var out []Op
	for _, id := range c.orderIDs() {
		o, ok := c.w.Orders[id]
		if !ok {
			continue
		}
		paydNet := decimal.Zero
		if o.Status.WasPaid() {
			paydNet = o.Amount.Sub(o.Refunded)
		}
		provNet := decimal.Zero
		for _, ch := range c.charges[id] {
			if ch.Succeeded {
				provNet = provNet.Add(ch.Amount.Sub(ch.Refunded))
			}
		}
		if !paydNet.Equal(provNet) {
			out = append(out, c.byOrder[id]...)
		}
	}
	if len(out) == 0 {
		for _, op := range c.ops {
			if (op.Kind == OpPay || op.Kind == OpRefund) && op.Status == http.StatusOK {
				out = append(out, op)
			}
		}
	}
	sortOps(out)
	return out
}

func (c *checker) no5xx() []Violation {
	var out []Violation
	for _, op := range c.ops {
		if op.Status >= 500 && (op.Status != http.StatusServiceUnavailable || op.RetryAfter == "") {
			out = append(out, Violation{Invariant: InvNo5xx, Slice: []Op{op},
				Detail: fmt.Sprintf("%s #%d answered %d %s (Retry-After %q)", op.Kind, op.ID, op.Status, codeOf(op.Body), op.RetryAfter)})
		}
	}
	return out
}

// pays checks every 200 that says an order is paid, and every 2xx pay
// answer, against the provider's records.
func (c *checker) pays() []Violation {
	var out []Violation
	for _, op := range c.ops {
		if why := c.unpaid200(op); why != "" {
			out = append(out, Violation{Invariant: InvNoUnpaid200, Slice: []Op{op}, Detail: why})
		}
		if why := c.payUnexplained(op); why != "" {
			out = append(out, Violation{Invariant: InvPayExplained, Slice: []Op{op}, Detail: why})
		}
	}
	return out
}

// unpaid200 says why a 200 claiming the order is paid is not explained by
// a successful charge the provider created for it before the answer
// arrived, "" when it is (or when op makes no such claim). A charge
// whose creation time is unknown explains nothing: the provider's records
// must say when it charged.
func (c *checker) unpaid200(op Op) string {
	if op.Status != http.StatusOK || op.OrderID == "" || (op.Kind != OpPay && op.Kind != OpRead && op.Kind != OpRefund) {
		return ""
	}
	o, ok := orderOf(op.Body)
	if !ok || !domain.OrderStatus(o.Status).WasPaid() {
		return ""
	}
	for _, ch := range c.charges[op.OrderID] {
		if ch.Succeeded && !ch.Created.IsZero() && !ch.Created.After(op.End) {
			return ""
		}
	}
	return fmt.Sprintf("%s #%d answered 200 with order %s %s, but the provider held no successful charge for it by then (%s)",
		op.Kind, op.ID, op.OrderID, o.Status, c.describeCharges(op.OrderID))
}

// payUnexplained says why a 2xx pay answer does not describe the order
// this request pays, "" when it does.
func (c *checker) payUnexplained(op Op) string {
	if op.Kind != OpPay || op.Status < 200 || op.Status >= 300 {
		return ""
	}
	o, ok := orderOf(op.Body)
	if !ok {
		return fmt.Sprintf("pay #%d answered %d without an order", op.ID, op.Status)
	}
	by := ""
	if o.PayRequestID != nil {
		by = *o.PayRequestID
	}
	switch {
	case o.ID != op.OrderID:
		return fmt.Sprintf("pay #%d of order %s answered %d with order %s", op.ID, op.OrderID, op.Status, o.ID)
	case op.Status == http.StatusAccepted:
		if o.Status != string(domain.StatusProcessing) || by != op.Key {
			return fmt.Sprintf("pay #%d answered 202 with the order %s by %q, not processing by %q", op.ID, o.Status, by, op.Key)
		}
		return ""
	case op.Status != http.StatusOK:
		return fmt.Sprintf("pay #%d answered %d: a pay succeeds with 200 or 202 only", op.ID, op.Status)
	case !domain.OrderStatus(o.Status).WasPaid() || by != op.Key:
		return fmt.Sprintf("pay #%d answered 200 with the order %s by %q, not paid by %q", op.ID, o.Status, by, op.Key)
	}
	amount, err := decimal.NewFromString(o.Amount)
	if err != nil {
		return fmt.Sprintf("pay #%d answered 200 with amount %q", op.ID, o.Amount)
	}
	var match bool
	for _, ch := range c.charges[op.OrderID] {
		match = match || ch.Succeeded && ch.Amount.Equal(amount)
	}
	if !match {
		return fmt.Sprintf("pay #%d answered 200 paid %s, but the provider holds no successful charge of that amount for order %s (%s)",
			op.ID, o.Amount, op.OrderID, c.describeCharges(op.OrderID))
	}
	if st, ok := c.w.Orders[op.OrderID]; ok && st.ChargeID != "" {
		if !slices.ContainsFunc(c.charges[op.OrderID], func(ch Charge) bool { return ch.ID == st.ChargeID && ch.Succeeded }) {
			return fmt.Sprintf("pay #%d answered 200, but the charge payd says paid order %s, %s, is no successful charge of it at the provider (%s)",
				op.ID, op.OrderID, st.ChargeID, c.describeCharges(op.OrderID))
		}
	}
	return ""
}

func (c *checker) describeCharges(order string) string {
	chs := c.charges[order]
	if len(chs) == 0 {
		return "no charges"
	}
	parts := make([]string, 0, len(chs))
	for _, ch := range chs {
		st := "failed"
		if ch.Succeeded {
			st = "succeeded"
		}
		s := fmt.Sprintf("%s %s %s refunded %s", ch.ID, st, ch.Amount, ch.Refunded)
		if !ch.Created.IsZero() {
			s += " created " + ch.Created.UTC().Format("15:04:05.000")
		}
		parts = append(parts, s)
	}
	return "charges: " + strings.Join(parts, "; ")
}

// keys checks each key's answers: the final ones agree (InvSameFinal) and
// nothing pending follows them (InvPendingFirst). Keys are told apart by
// kind as well: payd scopes keys per caller, and the clients never use one
// key for two kinds of request.
func (c *checker) keys() []Violation {
	type kk struct {
		kind OpKind
		key  string
	}
	byKey := map[kk][]Op{}
	var order []kk
	for _, op := range c.ops {
		if !keyed(op) {
			continue
		}
		k := kk{op.Kind, op.Key}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	var out []Violation
	for _, k := range order {
		out = append(out, checkKey(byKey[k])...)
	}
	for _, op := range c.ops {
		if cl := classOf(op); op.Settled && !keyed(op) && !cl.final() {
			out = append(out, Violation{Invariant: InvPendingFirst, Slice: []Op{op},
				Detail: fmt.Sprintf("%s #%d of the final sweep answered %s (%d)", op.Kind, op.ID, cl, op.Status)})
		}
	}
	out = append(out, c.lookups(func(key string) []Op {
		for _, kind := range []OpKind{OpPay, OpCancel, OpRefund} {
			if ops, ok := byKey[kk{kind, key}]; ok {
				return ops
			}
		}
		return nil
	})...)
	return out
}

// checkKey judges the answers under one key (ops by start).
func checkKey(ops []Op) (out []Violation) {
	// One violation per invariant the key breaks, saying every way it does.
	var broken []string
	why := map[string][]string{}
	bad := func(inv, format string, args ...any) {
		if why[inv] == nil {
			broken = append(broken, inv)
		}
		why[inv] = append(why[inv], fmt.Sprintf(format, args...))
	}
	defer func() {
		for _, inv := range broken {
			out = append(out, Violation{Invariant: inv, Slice: ops, Detail: fmt.Sprintf("key %s: %s", ops[0].Key, strings.Join(why[inv], "; "))})
		}
	}()
	// The first binding answer heard under the key: from then on the key
	// has its one answer.
	first := -1
	for i, op := range ops {
		if classOf(op) == ansBinding && (first < 0 || op.End.Before(ops[first].End)) {
			first = i
		}
	}
	for _, op := range ops {
		cl := classOf(op)
		if op.Settled && !cl.final() {
			bad(InvPendingFirst, "%s #%d of the final sweep answered %s (%d)", op.Kind, op.ID, cl, op.Status)
		}
		if op.Status == http.StatusConflict && codeOf(op.Body) == "idempotency_key_in_use" && op.RetryAfter == "" {
			bad(InvPendingFirst, "%s #%d answered 409 idempotency_key_in_use without Retry-After", op.Kind, op.ID)
		}
		if op.Status == http.StatusAccepted && op.RetryAfter == "" {
			bad(InvPendingFirst, "%s #%d answered 202 without Retry-After", op.Kind, op.ID)
		}
	}
	if first < 0 {
		return nil
	}
	f := ops[first]
	for i, op := range ops {
		cl := classOf(op)
		after := op.Start.After(f.End) // sent once the key's answer was known
		sameRequest := op.Method == f.Method && op.Path == f.Path && sameJSON(op.ReqBody, f.ReqBody)
		switch {
		case i == first || cl == ansNone || cl == ansTransient:
		case !sameRequest:
			if after && op.Status != http.StatusUnprocessableEntity {
				bad(InvSameFinal, "%s #%d sent another request under the key after its answer and got %d, not 422", op.Kind, op.ID, op.Status)
			}
		case cl == ansBinding || cl.final() && after:
			if op.Status != f.Status || !bytes.Equal(op.Body, f.Body) {
				bad(InvSameFinal, "%s #%d answered %d %s, but the key's first final answer (#%d) is %d %s",
					op.Kind, op.ID, op.Status, brief(op.Body), f.ID, f.Status, brief(f.Body))
			}
		case cl == ansPending && after:
			bad(InvPendingFirst, "%s #%d, sent after #%d's final answer %d, answered %d (not final)", op.Kind, op.ID, f.ID, f.Status, op.Status)
		}
	}
	return nil
}

// lookups checks GET /v1/requests/{key}: a record that says it succeeded
// stores the key's final answer, byte for byte.
func (c *checker) lookups(ofKey func(string) []Op) []Violation {
	var out []Violation
	for _, op := range c.ops {
		if op.Kind != OpRequest || op.Status != http.StatusOK {
			continue
		}
		var rec struct {
			Status   string `json:"status"`
			Response *struct {
				Status int             `json:"status"`
				Body   json.RawMessage `json:"body"`
			} `json:"response"`
		}
		if json.Unmarshal(op.Body, &rec) != nil || rec.Status != string(domain.RecordSucceeded) || rec.Response == nil {
			continue
		}
		keyOps := ofKey(op.Key)
		var f *Op
		for i, k := range keyOps {
			if classOf(k) == ansBinding && (f == nil || k.End.Before(f.End)) {
				f = &keyOps[i]
			}
		}
		if f == nil {
			continue // the key's answer was never heard: nothing to compare
		}
		if rec.Response.Status != f.Status || !sameJSON(rec.Response.Body, f.Body) {
			out = append(out, Violation{Invariant: InvSameFinal, Slice: append(slices.Clone(keyOps), op),
				Detail: fmt.Sprintf("key %s: GET /v1/requests #%d stores %d %s, but the key answered %d %s (#%d)",
					op.Key, op.ID, rec.Response.Status, brief(rec.Response.Body), f.Status, brief(f.Body), f.ID)})
		}
	}
	return out
}

// sameJSON compares two JSON documents byte for byte once compacted: the
// lookup embeds the stored body in its own JSON.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// events holds each order's outbox events to its final state: what
// committed must have been told once, and nothing else.
func (c *checker) events() []Violation {
	var out []Violation
	for _, id := range c.orderIDs() {
		o, ok := c.w.Orders[id]
		if !ok {
			continue
		}
		if why := toldWhy(o); why != "" {
			out = append(out, Violation{Invariant: InvOneEvent, Detail: "order " + id + ": " + why, Slice: c.byOrder[id]})
		}
	}
	return out
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
