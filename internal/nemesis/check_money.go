package nemesis

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// The money invariants: one kept charge per order, paid exactly when the
// provider holds its charge, the books equal, and every 200 and 2xx pay
// answer explained by the provider's records.

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
	return c.eachOrder(InvPaidOneCharge, func(o OrderState) string {
		if why := c.paidWhy(o); why != "" {
			return fmt.Sprintf("order %s (%s, %s, refunded %s): %s", o.ID, o.Status, o.Amount, o.Refunded, why)
		}
		return ""
	})
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
		why = append(why, c.booksApart()...)
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

// booksApart names each order whose ledger, as payd's view of it adds it
// up, disagrees with the provider's successful charges for it (at most
// ten), and each order the provider charged that payd was never read for.
func (c *checker) booksApart() []string {
	var out []string
	for _, id := range c.orderIDs() {
		prov := c.providerMoney(id)
		o, ok := c.w.Orders[id]
		switch {
		case !ok && prov.Charged.IsPositive():
			out = append(out, fmt.Sprintf("order %s: the provider charged %s refunded %s, and payd's view of it was never read", id, prov.Charged, prov.Refunded))
		case ok && (!o.Books.Charged.Equal(prov.Charged) || !o.Books.Refunded.Equal(prov.Refunded)):
			out = append(out, fmt.Sprintf("order %s (%s, %s): its ledger says charged %s refunded %s, the provider charged %s refunded %s",
				id, o.Status, o.Amount, o.Books.Charged, o.Books.Refunded, prov.Charged, prov.Refunded))
		}
		if len(out) == 10 {
			return append(out, "and maybe more")
		}
	}
	return out
}

// providerMoney is what the provider's successful charges for order id
// took and gave back.
func (c *checker) providerMoney(id string) Money {
	var m Money
	for _, ch := range c.charges[id] {
		if ch.Succeeded {
			m.Charged = m.Charged.Add(ch.Amount)
			m.Refunded = m.Refunded.Add(ch.Refunded)
		}
	}
	return m
}

// booksSlice is the ops of the orders whose own books disagree (what
// payd's ledger holds of the order against what the provider's charges
// for it hold); when every order agrees, the answers that moved money.
func (c *checker) booksSlice() []Op {
	var out []Op
	for _, id := range c.orderIDs() {
		o, ok := c.w.Orders[id]
		if !ok {
			continue
		}
		prov := c.providerMoney(id)
		if !o.Books.Charged.Equal(prov.Charged) || !o.Books.Refunded.Equal(prov.Refunded) {
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
