package handler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// booksTimeline is an order of 10.00 USD, charged, refunded 3.00 by an
// operator and disputed for 7.00 (still open), as service.Admin returns it.
func booksTimeline() service.Timeline {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	usd := domain.Currency("USD")
	o := domain.Order{ID: "0193d9a0-2d3c-7f50-9b21-6c7d8e9f0a12", CustomerID: "c1", Status: domain.StatusPaid, Fulfillment: domain.FulfillmentUnfulfilled,
		Amount: decimal.RequireFromString("10"), Currency: usd, RefundedAmount: decimal.RequireFromString("3"), CreatedAt: at, UpdatedAt: at}
	ledger := []domain.LedgerEntry{
		{ID: "l1", OrderID: o.ID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference("ch_1"), ChargeID: "ch_1",
			Amount: decimal.RequireFromString("10"), Currency: usd, Source: domain.SourcePayReply, CreatedAt: at.Add(time.Second)},
		{ID: "l2", OrderID: o.ID, Kind: domain.LedgerRefund, Reference: domain.RefundReference("re_1"), ChargeID: "ch_1",
			Amount: decimal.RequireFromString("3"), Currency: usd, Source: domain.SourceOperator, Actor: "alice", Note: "damaged", CreatedAt: at.Add(2 * time.Second)},
		{ID: "l3", OrderID: o.ID, Kind: domain.LedgerDisputeOpened, Reference: domain.DisputeReference("dp_1", domain.LedgerDisputeOpened), ChargeID: "ch_1",
			Amount: decimal.RequireFromString("7"), Currency: usd, Source: domain.SourceWebhook, CreatedAt: at.Add(4 * time.Second)},
	}
	due := at.Add(7 * 24 * time.Hour)
	return service.Timeline{Order: o, Ledger: ledger, Money: domain.Summarize(usd, ledger),
		Disputes: []domain.Dispute{{ID: "d1", ProviderDisputeID: "dp_1", OrderID: o.ID, ChargeID: "ch_1", Status: domain.DisputeOpen,
			Amount: decimal.RequireFromString("7"), Currency: usd, Reason: "fraudulent", OpenedAt: at.Add(3 * time.Second),
			EvidenceDueBy: &due, UpdatedAt: at}}}
}

// dashboard links a dispute as a provider's dashboard would.
type dashboard struct{}

func (dashboard) DisputeURL(id string) string { return "https://dashboard.example/disputes/" + id }

// TestTimelineRendersBooks: the admin order detail carries the money
// summary on the order, the ledger and the disputes, each entry also on
// the merged timeline, and the answer is valid against openapi.yaml's
// Timeline schema; with no books, the lists are [] and the sums zero.
func TestTimelineRendersBooks(t *testing.T) {
	doc := loadKin(t)
	schema := doc.Components.Schemas["Timeline"]
	if schema == nil {
		t.Fatal("openapi.yaml has no Timeline schema")
	}
	render := func(tl service.Timeline) (map[string]any, []byte) {
		b, err := json.Marshal(toTimelineJSON(tl, dashboard{}))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			t.Errorf("the timeline does not match openapi.yaml's Timeline: %v\n%s", err, b)
		}
		return v, b
	}

	v, b := render(booksTimeline())
	order := v["order"].(map[string]any)
	want := map[string]any{"authorized": "0.00", "charged": "10.00", "refunded": "3.00", "disputed": "7.00", "lost": "0.00", "net": "7.00"}
	if got, _ := order["money"].(map[string]any); !sameJSON(got, want) {
		t.Errorf("order.money = %v, want %v", got, want)
	}
	if order["refunded_amount"] != "3.00" || order["amount"] != "10.00" {
		t.Errorf("order = %v, want its own fields unchanged", order)
	}
	ledger, _ := v["ledger"].([]any)
	if len(ledger) != 3 {
		t.Fatalf("ledger = %v, want 3 entries\n%s", ledger, b)
	}
	refund := ledger[1].(map[string]any)
	wantRefund := map[string]any{"id": "l2", "kind": "refund", "reference": "refund:re_1", "charge_id": "ch_1", "amount": "3.00",
		"currency": "USD", "source": "operator", "actor": "alice", "note": "damaged", "created_at": "2026-11-30T12:00:02.000000Z"}
	if !sameJSON(refund, wantRefund) {
		t.Errorf("ledger[1] = %v, want %v", refund, wantRefund)
	}
	if ledger[0].(map[string]any)["actor"] != nil {
		t.Errorf("ledger[0].actor = %v, want null (no operator)", ledger[0].(map[string]any)["actor"])
	}
	disputes, _ := v["disputes"].([]any)
	wantDispute := map[string]any{"id": "dp_1", "charge_id": "ch_1", "status": "open", "amount": "7.00", "currency": "USD",
		"reason": "fraudulent", "opened_at": "2026-11-30T12:00:03.000000Z", "closed_at": nil,
		"evidence_due_by": "2026-12-07T12:00:00.000000Z", "provider_url": "https://dashboard.example/disputes/dp_1"}
	if len(disputes) != 1 || !sameJSON(disputes[0].(map[string]any), wantDispute) {
		t.Errorf("disputes = %v, want [%v]", disputes, wantDispute)
	}
	// Without a provider that links its records, and without a date, both
	// are null (and still valid against the schema).
	bare := booksTimeline()
	bare.Disputes[0].EvidenceDueBy = nil
	b, err := json.Marshal(toTimelineJSON(bare, nil))
	if err != nil {
		t.Fatal(err)
	}
	var nulls struct {
		Disputes []map[string]any `json:"disputes"`
	}
	if err := json.Unmarshal(b, &nulls); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"evidence_due_by", "provider_url"} {
		if v, ok := nulls.Disputes[0][k]; !ok || v != nil {
			t.Errorf("no links, no date: %s = %v (present %v), want null", k, v, ok)
		}
	}
	var kinds []string
	for _, e := range v["timeline"].([]any) {
		m := e.(map[string]any)
		kinds = append(kinds, m["kind"].(string)+":"+m["id"].(string))
	}
	if got, want := join(kinds), "order:"+booksTimeline().Order.ID+" ledger:l1 ledger:l2 dispute:dp_1 ledger:l3"; got != want {
		t.Errorf("timeline = %s, want %s", got, want)
	}

	empty := booksTimeline()
	empty.Ledger, empty.Disputes, empty.Money = nil, nil, domain.Summarize("USD", nil)
	v, b = render(empty)
	if string(mustMarshal(t, v["ledger"])) != "[]" || string(mustMarshal(t, v["disputes"])) != "[]" {
		t.Errorf("no books rendered ledger %v, disputes %v; want [] for both\n%s", v["ledger"], v["disputes"], b)
	}
	if m := v["order"].(map[string]any)["money"].(map[string]any); m["net"] != "0.00" || m["charged"] != "0.00" {
		t.Errorf("no books: money = %v, want zeros", m)
	}
}

func sameJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}
