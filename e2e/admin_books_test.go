package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// TestAdminOrderBooks: an order paid 10.00 and refunded 3.00 through the
// admin API shows, in GET /v1/admin/orders/{id} (checked against
// openapi.yaml like every answer), money charged 10.00, refunded 3.00 (the
// order's refunded_amount), net 7.00; a ledger of the charge and the
// refund, each on the provider's charge and refund, both on the timeline;
// no dispute. `payd admin orders show` prints the same books.
func TestAdminOrderBooks(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("books@example.com")
		order := s.paidOrder(tok, "10.00")
		if r := s.refund(order, uuid.NewString(), "3.00"); r.Status != http.StatusOK {
			t.Fatalf("refund 3.00 = %d %s, want 200", r.Status, r.Body)
		}

		r := s.admin("GET", "/v1/admin/orders/"+order, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/admin/orders/%s = %d %s", order, r.Status, r.Body)
		}
		doc := decode[client.Timeline](t, r)
		want := map[string]string{"charged": "10.00", "refunded": "3.00", "disputed": "0.00", "lost": "0.00", "net": "7.00"}
		for k, v := range want {
			if money(doc.Order.Money)[k] != v {
				t.Errorf("order.money.%s = %q, want %q (money %+v)", k, money(doc.Order.Money)[k], v, doc.Order.Money)
			}
		}
		if doc.Order.RefundedAmount != money(doc.Order.Money)["refunded"] {
			t.Errorf("refunded_amount %q, money.refunded %q: want them equal", doc.Order.RefundedAmount, money(doc.Order.Money)["refunded"])
		}
		if len(doc.Ledger) != 2 || len(doc.Attempts) != 1 || len(doc.Refunds) != 1 {
			t.Fatalf("ledger %+v, attempts %d, refunds %d; want a charge and a refund entry, one attempt, one refund\n%s",
				doc.Ledger, len(doc.Attempts), len(doc.Refunds), r.Body)
		}
		charge, refund := doc.Ledger[0], doc.Ledger[1]
		chargeID := deref(doc.Attempts[0].ProviderChargeId)
		if charge.Kind != "charge" || charge.Amount != "10.00" || charge.Currency != "USD" || charge.ChargeId != chargeID || charge.Reference != "charge:"+chargeID {
			t.Errorf("ledger[0] = %+v, want the charge of 10.00 USD on %s", charge, chargeID)
		}
		if refund.Kind != "refund" || refund.Amount != "3.00" || refund.ChargeId != chargeID || refund.Reference != "refund:"+deref(doc.Refunds[0].ProviderRefundId) {
			t.Errorf("ledger[1] = %+v, want payd's refund of 3.00 on %s, refund %v", refund, chargeID, deref(doc.Refunds[0].ProviderRefundId))
		}
		if doc.Disputes == nil || len(doc.Disputes) != 0 {
			t.Errorf("disputes = %#v, want []", doc.Disputes)
		}
		onTimeline := map[string]bool{}
		for _, e := range doc.Timeline {
			onTimeline[string(e.Kind)+":"+e.Id] = true
		}
		for _, e := range doc.Ledger {
			if !onTimeline["ledger:"+e.Id] {
				t.Errorf("ledger entry %s (%s) is not on the timeline", e.Id, e.Kind)
			}
		}

		out := s.mustCLI("orders", "show", order)
		wantLines(t, "orders show", out, `^amount\s+10.00 USD \(refunded 3.00\)$`,
			`^money\s+charged 10.00  refunded 3.00  disputed 0.00  lost 0.00  net 7.00 USD$`,
			`^`+charge.Id+`\s+charge\s+10.00 USD\s+`+string(charge.Source)+`\s`,
			`^`+refund.Id+`\s+refund\s+3.00 USD\s+`+string(refund.Source)+`\s`,
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
		s := start(t, on(dialect), withEnv(env{"PAYD_METRICS_ADDR": "127.0.0.1:0"}))
		_, tok := s.register("dispute@example.com")
		order := s.order(tok, "10.00")
		if r := s.pay(tok, order, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
			t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
		}
		var doc client.Timeline
		books := func() client.Timeline {
			return decode[client.Timeline](t, s.admin("GET", "/v1/admin/orders/"+order, "", nil))
		}
		eventually(t, 10*time.Second, "the dispute on the order", func() bool { doc = books(); return len(doc.Disputes) == 1 })
		for k, v := range map[string]string{"charged": "10.00", "refunded": "0.00", "disputed": "10.00", "lost": "0.00", "net": "10.00"} {
			if money(doc.Order.Money)[k] != v {
				t.Errorf("disputed: order.money.%s = %q, want %q", k, money(doc.Order.Money)[k], v)
			}
		}
		d := doc.Disputes[0]
		dispute := d.Id
		if !strings.HasPrefix(dispute, "dp_") || d.Status != "open" || d.Amount != "10.00" || d.Reason != "fraudulent" || d.ClosedAt != nil {
			t.Errorf("dispute = %v, want the provider's open dispute of 10.00", d)
		}
		if len(doc.Ledger) != 2 || doc.Ledger[1].Kind != "dispute_opened" || doc.Ledger[1].Amount != "10.00" {
			t.Errorf("ledger = %+v, want the charge and dispute_opened 10.00", doc.Ledger)
		}
		onTimeline := false
		for _, e := range doc.Timeline {
			onTimeline = onTimeline || e.Kind == "dispute" && e.Id == dispute
		}
		if !onTimeline {
			t.Errorf("dispute %s is not on the timeline %+v", dispute, doc.Timeline)
		}
		listed := decode[struct {
			Data []client.Discrepancy `json:"data"`
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
		eventually(t, 10*time.Second, "the dispute lost", func() bool { doc = books(); return doc.Disputes[0].Status == "lost" })
		for k, v := range map[string]string{"charged": "10.00", "disputed": "0.00", "lost": "10.00", "net": "0.00"} {
			if money(doc.Order.Money)[k] != v {
				t.Errorf("lost: order.money.%s = %q, want %q", k, money(doc.Order.Money)[k], v)
			}
		}
		if doc.Disputes[0].ClosedAt == nil {
			t.Errorf("the lost dispute has no closed_at: %v", doc.Disputes[0])
		}
		out := s.mustCLI("orders", "show", order)
		wantLines(t, "orders show", out, `^money\s+charged 10.00  refunded 0.00  disputed 0.00  lost 10.00  net 0.00 USD$`,
			`\s+dispute_opened\s+10.00 USD\s`, `\s+dispute_lost\s+10.00 USD\s`,
			// opened, evidence due, closed
			`^`+dispute+`\s+lost\s+10.00 USD\s+fraudulent\s+ch_\S+(\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d){3}$`,
			`^answer `+dispute+` at http://\S+/v1/disputes/`+dispute+`$`,
			`dispute\s+lost\s+dispute of 10.00 USD: fraudulent\s+`+dispute+`$`)
	})
}

// TestAdminDisputesList: GET /v1/admin/disputes lists every order's
// disputes newest first, with the provider's reference, amount, reason,
// status and order; status=open keeps the ones still to answer, and an
// unknown status is refused with the list of the known ones.
func TestAdminDisputesList(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register(newEmail())
		first, second := s.order(tok, "10.00"), s.order(tok, "12.50")
		for _, o := range []string{first, second} {
			if r := s.pay(tok, o, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
				t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
			}
		}
		type page struct {
			Data []struct {
				client.Dispute
				OrderID string `json:"order_id"`
			} `json:"data"`
			NextCursor *string `json:"next_cursor"`
		}
		var all page
		eventually(t, 10*time.Second, "both disputes listed", func() bool {
			all = decode[page](t, s.admin("GET", "/v1/admin/disputes", "", nil))
			return len(all.Data) == 2
		})
		newest := all.Data[0]
		if newest.OrderID != second || !strings.HasPrefix(newest.Id, "dp_") || newest.Status != "open" || newest.Amount != "12.50" ||
			newest.Currency != "USD" || newest.Reason != "fraudulent" || !strings.HasPrefix(newest.ChargeId, "ch_") || all.Data[1].OrderID != first {
			t.Fatalf("disputes = %+v, want the second order's open dispute of 12.50 first", all.Data)
		}
		// The evidence is due seven days after the sandbox opened the
		// dispute, and its link is the sandbox's own record of it.
		if newest.EvidenceDueBy == nil || !newest.EvidenceDueBy.Equal(newest.OpenedAt.Add(7*24*time.Hour)) {
			t.Errorf("evidence_due_by = %v, want 7 days after opened_at %v", newest.EvidenceDueBy, newest.OpenedAt)
		}
		if newest.ProviderUrl == nil {
			t.Fatal("provider_url = null, want the sandbox's record of the dispute")
		}
		resp, err := http.Get(*newest.ProviderUrl)
		if err != nil {
			t.Fatal(err)
		}
		var atProvider struct {
			ID            string `json:"id"`
			EvidenceDueBy string `json:"evidence_due_by"`
		}
		err = json.NewDecoder(resp.Body).Decode(&atProvider)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || atProvider.ID != newest.Id {
			t.Errorf("GET provider_url %s = %d %+v (%v), want the sandbox's dispute %s", *newest.ProviderUrl, resp.StatusCode, atProvider, err, newest.Id)
		}
		// payd admin disputes list shows the open ones with the same date
		// and link; -status all shows both.
		wantLines(t, "disputes list", s.mustCLI("disputes", "list"),
			`^`+newest.Id+`\s+open\s+12.50 USD\s+fraudulent\s+`+second+`\s+\S+ \S+\s+`+newest.EvidenceDueBy.Format("2006-01-02 15:04:05")+`\s+-\s+`+regexp.QuoteMeta(*newest.ProviderUrl)+`$`)
		if _, err := s.sandbox.CloseDispute(t.Context(), all.Data[1].Id, domain.DisputeWon); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the first dispute won", func() bool {
			open := decode[page](t, s.admin("GET", "/v1/admin/disputes?status=open", "", nil))
			return len(open.Data) == 1 && open.Data[0].OrderID == second
		})
		onePage := decode[page](t, s.admin("GET", "/v1/admin/disputes?limit=1", "", nil))
		if len(onePage.Data) != 1 || onePage.NextCursor == nil {
			t.Fatalf("limit=1 = %+v, want one dispute and a cursor", onePage)
		}
		next := decode[page](t, s.admin("GET", "/v1/admin/disputes?limit=1&cursor="+*onePage.NextCursor, "", nil))
		if len(next.Data) != 1 || next.Data[0].OrderID != first || next.Data[0].Status != "won" || next.NextCursor != nil {
			t.Errorf("the second page = %+v, want the first order's won dispute, and no further page", next)
		}
		wantLines(t, "disputes list -status won", s.mustCLI("disputes", "list", "-status", "won"), `^`+all.Data[1].Id+`\s+won\s+10.00 USD\s+`)
		if got := s.mustCLI("disputes", "list", "-status", "all"); !strings.Contains(got, all.Data[0].Id) || !strings.Contains(got, all.Data[1].Id) {
			t.Errorf("disputes list -status all:\n%s\nwant both disputes", got)
		}
		if r := s.do(request{method: "GET", path: "/v1/admin/disputes?status=pending", token: testAdminToken}); r.Status != http.StatusBadRequest ||
			!strings.Contains(string(r.Body), "open, won, lost") {
			t.Errorf("status=pending = %d %s, want 400 naming open, won, lost", r.Status, r.Body)
		}
	})
}
