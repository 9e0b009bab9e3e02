package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
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

// TestAdminOrderDispute: a charge the customer disputes (the sandbox's
// pm_dispute, its dispute.created webhook) shows in the admin order detail
// as money disputed with net unchanged, a dispute_opened entry and an open
// dispute under the provider's ID, which the disputed discrepancy filter
// lists; the metrics count it (payd_disputes_open 1, one new disputed
// discrepancy). Once the bank decides for the customer, the money is lost:
// net 0.00, the dispute closed, and `payd admin orders show` prints it.
func TestAdminOrderDispute(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := startStack(t, dialect, env{"PAYD_METRICS_ADDR": "127.0.0.1:0"})
		_, tok := s.register("dispute@example.com")
		order := s.order(tok, "10.00")
		if r := s.pay(tok, order, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
			t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
		}
		var doc booksDoc
		books := func() booksDoc {
			return decode[booksDoc](t, s.admin("GET", "/v1/admin/orders/"+order, "", nil))
		}
		eventually(t, 10*time.Second, "the dispute on the order", func() bool { doc = books(); return len(doc.Disputes) == 1 })
		for k, v := range map[string]string{"charged": "10.00", "refunded": "0.00", "disputed": "10.00", "lost": "0.00", "net": "10.00"} {
			if doc.Order.Money[k] != v {
				t.Errorf("disputed: order.money.%s = %q, want %q", k, doc.Order.Money[k], v)
			}
		}
		d := doc.Disputes[0]
		dispute, _ := d["id"].(string)
		if !strings.HasPrefix(dispute, "dp_") || d["status"] != "open" || d["amount"] != "10.00" || d["reason"] != "fraudulent" || d["closed_at"] != nil {
			t.Errorf("dispute = %v, want the provider's open dispute of 10.00", d)
		}
		if len(doc.Ledger) != 2 || doc.Ledger[1].Kind != "dispute_opened" || doc.Ledger[1].Amount != "10.00" {
			t.Errorf("ledger = %+v, want the charge and dispute_opened 10.00", doc.Ledger)
		}
		onTimeline := false
		for _, e := range doc.Timeline {
			onTimeline = onTimeline || e.Kind == "dispute" && e.ID == dispute
		}
		if !onTimeline {
			t.Errorf("dispute %s is not on the timeline %+v", dispute, doc.Timeline)
		}
		listed := decode[struct {
			Data []discrepancyDoc `json:"data"`
		}](t, s.admin("GET", "/v1/admin/discrepancies?type=disputed", "", nil))
		if len(listed.Data) != 1 || listed.Data[0].Reference != dispute {
			t.Errorf("GET /v1/admin/discrepancies?type=disputed = %+v, want the dispute %s", listed.Data, dispute)
		}

		fams := scrapeFamilies(t, "http://"+s.logged("metrics listening", "addr")+"/metrics")
		if v, ok := sample(fams, "payd_disputes_open", nil); !ok || v != 1 {
			t.Errorf("payd_disputes_open = %v (present %v), want 1", v, ok)
		}
		if v, ok := sample(fams, "payd_discrepancies_total", map[string]string{"type": "disputed"}); !ok || v != 1 {
			t.Errorf(`payd_discrepancies_total{type="disputed"} = %v (present %v), want 1`, v, ok)
		}

		if _, err := s.sandbox.CloseDispute(t.Context(), dispute, domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the dispute lost", func() bool { doc = books(); return doc.Disputes[0]["status"] == "lost" })
		for k, v := range map[string]string{"charged": "10.00", "disputed": "0.00", "lost": "10.00", "net": "0.00"} {
			if doc.Order.Money[k] != v {
				t.Errorf("lost: order.money.%s = %q, want %q", k, doc.Order.Money[k], v)
			}
		}
		if doc.Disputes[0]["closed_at"] == nil {
			t.Errorf("the lost dispute has no closed_at: %v", doc.Disputes[0])
		}
		out := s.mustCLI("orders", "show", order)
		wantLines(t, "orders show", out, `^money\s+charged 10.00  refunded 0.00  disputed 0.00  lost 10.00  net 0.00 USD$`,
			`\s+dispute_opened\s+10.00 USD\s`, `\s+dispute_lost\s+10.00 USD\s`,
			`^`+dispute+`\s+lost\s+10.00 USD\s+fraudulent\s+ch_\S+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`,
			`dispute\s+lost\s+dispute of 10.00 USD: fraudulent\s+`+dispute+`$`)
	})
}
