package main

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// booksDoc is what the admin order detail says of the order's books.
type booksDoc struct {
	Order struct {
		RefundedAmount string            `json:"refunded_amount"`
		Money          map[string]string `json:"money"`
	} `json:"order"`
	Attempts []attemptDoc `json:"attempts"`
	Refunds  []refundDoc  `json:"refunds"`
	Ledger   []struct {
		ID        string  `json:"id"`
		Kind      string  `json:"kind"`
		Reference string  `json:"reference"`
		ChargeID  string  `json:"charge_id"`
		Amount    string  `json:"amount"`
		Currency  string  `json:"currency"`
		Source    string  `json:"source"`
		Actor     *string `json:"actor"`
	} `json:"ledger"`
	Disputes []map[string]any `json:"disputes"`
	Timeline []struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"timeline"`
}

// TestAdminOrderBooks: an order paid 10.00 and refunded 3.00 through the
// admin API shows, in GET /v1/admin/orders/{id} (checked against
// openapi.yaml like every answer), money charged 10.00, refunded 3.00 (the
// order's refunded_amount), net 7.00; a ledger of the charge and the
// refund, each on the provider's charge and refund, both on the timeline;
// no dispute. `payd admin orders show` prints the same books.
func TestAdminOrderBooks(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := startStack(t, dialect, nil)
		_, tok := s.register("books@example.com")
		order := s.paidOrder(tok, "10.00")
		if r := s.refund(order, uuid.NewString(), "3.00"); r.Status != http.StatusOK {
			t.Fatalf("refund 3.00 = %d %s, want 200", r.Status, r.Body)
		}

		r := s.admin("GET", "/v1/admin/orders/"+order, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/admin/orders/%s = %d %s", order, r.Status, r.Body)
		}
		doc := decode[booksDoc](t, r)
		want := map[string]string{"charged": "10.00", "refunded": "3.00", "disputed": "0.00", "lost": "0.00", "net": "7.00"}
		for k, v := range want {
			if doc.Order.Money[k] != v {
				t.Errorf("order.money.%s = %q, want %q (money %v)", k, doc.Order.Money[k], v, doc.Order.Money)
			}
		}
		if doc.Order.RefundedAmount != doc.Order.Money["refunded"] {
			t.Errorf("refunded_amount %q, money.refunded %q: want them equal", doc.Order.RefundedAmount, doc.Order.Money["refunded"])
		}
		if len(doc.Ledger) != 2 || len(doc.Attempts) != 1 || len(doc.Refunds) != 1 {
			t.Fatalf("ledger %+v, attempts %d, refunds %d; want a charge and a refund entry, one attempt, one refund\n%s",
				doc.Ledger, len(doc.Attempts), len(doc.Refunds), r.Body)
		}
		charge, refund := doc.Ledger[0], doc.Ledger[1]
		chargeID := deref(doc.Attempts[0].ProviderChargeID)
		if charge.Kind != "charge" || charge.Amount != "10.00" || charge.Currency != "USD" || charge.ChargeID != chargeID || charge.Reference != "charge:"+chargeID {
			t.Errorf("ledger[0] = %+v, want the charge of 10.00 USD on %s", charge, chargeID)
		}
		if refund.Kind != "refund" || refund.Amount != "3.00" || refund.ChargeID != chargeID || refund.Reference != "refund:"+deref(doc.Refunds[0].ProviderRefundID) {
			t.Errorf("ledger[1] = %+v, want payd's refund of 3.00 on %s, refund %v", refund, chargeID, deref(doc.Refunds[0].ProviderRefundID))
		}
		if doc.Disputes == nil || len(doc.Disputes) != 0 {
			t.Errorf("disputes = %#v, want []", doc.Disputes)
		}
		onTimeline := map[string]bool{}
		for _, e := range doc.Timeline {
			onTimeline[e.Kind+":"+e.ID] = true
		}
		for _, e := range doc.Ledger {
			if !onTimeline["ledger:"+e.ID] {
				t.Errorf("ledger entry %s (%s) is not on the timeline", e.ID, e.Kind)
			}
		}

		out := s.mustCLI("orders", "show", order)
		wantLines(t, "orders show", out, `^amount\s+10.00 USD \(refunded 3.00\)$`,
			`^money\s+charged 10.00  refunded 3.00  disputed 0.00  lost 0.00  net 7.00 USD$`,
			`^`+charge.ID+`\s+charge\s+10.00 USD\s+`+charge.Source+`\s`,
			`^`+refund.ID+`\s+refund\s+3.00 USD\s+`+refund.Source+`\s`,
			`ledger\s+booked\s+refund 3.00 USD`)
	})
}
