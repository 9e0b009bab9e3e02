package stripeprovider_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider/stripeprovider"
)

// eventsAbout returns the fake's events whose object is the dispute id, in order.
func eventsAbout(t *testing.T, f *stripefake.Fake, id string) []stripefake.Event {
	t.Helper()
	var out []stripefake.Event
	for _, ev := range f.Events() {
		var body struct {
			Data struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if json.Unmarshal(ev.Body, &body) == nil && body.Data.Object.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

type wantDispute struct {
	typ    domain.ProviderEventType
	status domain.DisputeStatus
}

func parseAll(t *testing.T, e *env, w *stripeprovider.Webhooks, evs []stripefake.Event) []domain.ProviderEvent {
	t.Helper()
	var out []domain.ProviderEvent
	for _, ev := range evs {
		id, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now()))
		if err != nil || id != ev.ID {
			t.Fatalf("Parse(%s) = %q, %+v, %v", ev.Type, id, pe, err)
		}
		out = append(out, pe)
	}
	return out
}

// Each of Stripe's dispute events, as the fake sends them through a
// dispute's life, reads as payd's event of the same name, with the
// dispute, payd's charge, order and attempt, the amount and the reason,
// and the dispute's status in payd's terms.
func TestWebhookDisputeEvents(t *testing.T) {
	e := newEnv(t)
	w, err := e.c.Webhooks(e.fake.Secret)
	if err != nil {
		t.Fatal(err)
	}
	type step func(id string) error
	tests := []struct {
		name   string
		opts   stripefake.DisputeOptions
		steps  []step
		amount string
		want   []wantDispute
	}{
		{name: "chargeback won", opts: stripefake.DisputeOptions{Reason: "product_not_received"}, amount: "19.90",
			steps: []step{
				func(id string) error { return e.fake.UpdateDispute(id, "under_review") },
				func(id string) error { return e.fake.CloseDispute(id, "won") },
			},
			want: []wantDispute{{domain.EventDisputeCreated, domain.DisputeOpen}, {domain.EventDisputeFundsWithdrawn, domain.DisputeOpen},
				{domain.EventDisputeUpdated, domain.DisputeOpen}, {domain.EventDisputeClosed, domain.DisputeWon},
				{domain.EventDisputeFundsReinstated, domain.DisputeWon}}},
		{name: "chargeback lost", opts: stripefake.DisputeOptions{Amount: 1234, Reason: "fraudulent"}, amount: "12.34",
			steps: []step{func(id string) error { return e.fake.CloseDispute(id, "lost") }},
			want: []wantDispute{{domain.EventDisputeCreated, domain.DisputeOpen}, {domain.EventDisputeFundsWithdrawn, domain.DisputeOpen},
				{domain.EventDisputeClosed, domain.DisputeLost}}},
		{name: "inquiry closed", opts: stripefake.DisputeOptions{Inquiry: true, Reason: "general"}, amount: "19.90",
			steps: []step{
				func(id string) error { return e.fake.UpdateDispute(id, "warning_under_review") },
				func(id string) error { return e.fake.CloseDispute(id, "warning_closed") },
			},
			// No money moved: no funds events, and closed with nothing lost.
			want: []wantDispute{{domain.EventDisputeCreated, domain.DisputeOpen}, {domain.EventDisputeUpdated, domain.DisputeOpen},
				{domain.EventDisputeClosed, domain.DisputeWon}}},
		{name: "inquiry escalated", opts: stripefake.DisputeOptions{Inquiry: true, Reason: "general"}, amount: "19.90",
			steps: []step{func(id string) error { return e.fake.UpdateDispute(id, "needs_response") }},
			want: []wantDispute{{domain.EventDisputeCreated, domain.DisputeOpen}, {domain.EventDisputeUpdated, domain.DisputeOpen},
				{domain.EventDisputeFundsWithdrawn, domain.DisputeOpen}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempt := "att-dw-" + string(rune('a'+i))
			pi := e.paid(t, attempt)
			dp := e.fake.OpenDispute(pi, tt.opts)
			for _, s := range tt.steps {
				if err := s(dp); err != nil {
					t.Fatal(err)
				}
			}
			got := parseAll(t, e, w, eventsAbout(t, e.fake, dp))
			if len(got) != len(tt.want) {
				t.Fatalf("events = %+v, want %d", got, len(tt.want))
			}
			reason := tt.opts.Reason
			for j, pe := range got {
				if pe.Type != tt.want[j].typ || pe.DisputeStatus != tt.want[j].status || pe.DisputeID != dp || pe.ID != dp ||
					pe.ChargeID != pi || pe.OrderID != "ord-"+attempt || pe.IdempotencyKey != attempt ||
					pe.AmountText != tt.amount || !pe.AmountReadable() || pe.Currency != "EUR" || pe.Reason != reason || pe.FailureCode != reason {
					t.Errorf("event %d = %+v, want %+v", j, pe, tt.want[j])
				}
			}
		})
	}
}

// Hand-built dispute events in the shape Stripe renders at the API
// version stripe-go pins: statuses payd reads as closed, a PaymentIntent
// Stripe no longer shows (the dispute is still payd's to record, with no
// order or attempt guessed), a Charge made without a PaymentIntent, and a
// currency payd does not take (no amount payd could count).
func TestWebhookDisputeShapes(t *testing.T) {
	e := newEnv(t)
	w, _ := e.c.Webhooks(e.fake.Secret)
	version := stripeAPIVersion(t, e)
	pi := e.paid(t, "att-shapes")
	dispute := func(over map[string]any) map[string]any {
		d := map[string]any{"id": "dp_hand", "object": "dispute", "amount": 1990, "currency": "eur", "charge": "ch_hand",
			"payment_intent": pi, "reason": "duplicate", "status": "needs_response", "created": time.Now().Unix(),
			"balance_transactions": []any{}, "is_charge_refundable": false, "livemode": false, "metadata": map[string]any{},
			"evidence_details": map[string]any{"due_by": time.Now().Add(7 * 24 * time.Hour).Unix(), "has_evidence": false,
				"past_due": false, "submission_count": 0}}
		for k, v := range over {
			d[k] = v
		}
		return d
	}
	tests := []struct {
		name                   string
		typ                    string
		obj                    map[string]any
		wantType               domain.ProviderEventType
		wantStatus             domain.DisputeStatus
		charge, order, attempt string
		amount, currency       string
	}{
		{"prevented", "charge.dispute.closed", dispute(map[string]any{"status": "prevented"}),
			domain.EventDisputeClosed, domain.DisputeWon, pi, "ord-att-shapes", "att-shapes", "19.90", "EUR"},
		{"warning_closed", "charge.dispute.closed", dispute(map[string]any{"status": "warning_closed"}),
			domain.EventDisputeClosed, domain.DisputeWon, pi, "ord-att-shapes", "att-shapes", "19.90", "EUR"},
		{"lost", "charge.dispute.closed", dispute(map[string]any{"status": "lost"}),
			domain.EventDisputeClosed, domain.DisputeLost, pi, "ord-att-shapes", "att-shapes", "19.90", "EUR"},
		{"warning_needs_response", "charge.dispute.created", dispute(map[string]any{"status": "warning_needs_response"}),
			domain.EventDisputeCreated, domain.DisputeOpen, pi, "ord-att-shapes", "att-shapes", "19.90", "EUR"},
		{"payment intent gone", "charge.dispute.funds_withdrawn", dispute(map[string]any{"payment_intent": "pi_gone"}),
			domain.EventDisputeFundsWithdrawn, domain.DisputeOpen, "pi_gone", "", "", "19.90", "EUR"},
		{"charge without a payment intent", "charge.dispute.updated", dispute(map[string]any{"payment_intent": nil, "status": "under_review"}),
			domain.EventDisputeUpdated, domain.DisputeOpen, "ch_hand", "", "", "19.90", "EUR"},
		{"currency payd does not take", "charge.dispute.funds_reinstated", dispute(map[string]any{"currency": "huf", "status": "won"}),
			domain.EventDisputeFundsReinstated, domain.DisputeWon, pi, "ord-att-shapes", "att-shapes", "", "huf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"id": "evt_" + tt.name, "object": "event", "api_version": version, "created": time.Now().Unix(),
				"type": tt.typ, "livemode": false, "data": map[string]any{"object": tt.obj}})
			_, pe, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now()))
			if err != nil || pe.Type != tt.wantType || pe.DisputeStatus != tt.wantStatus || pe.DisputeID != "dp_hand" ||
				pe.ChargeID != tt.charge || pe.OrderID != tt.order || pe.IdempotencyKey != tt.attempt ||
				pe.AmountText != tt.amount || pe.Currency != tt.currency || pe.Reason != "duplicate" {
				t.Fatalf("Parse = %+v, %v", pe, err)
			}
		})
	}
}

// A dispute event of another API version is fetched fresh, its
// PaymentIntent expanded in the same request.
func TestWebhookDisputeOtherVersionFetchedFresh(t *testing.T) {
	e := newEnv(t)
	w, _ := e.c.Webhooks(e.fake.Secret)
	pi := e.paid(t, "att-dv")
	dp := e.fake.Dispute(pi)
	if err := e.fake.CloseDispute(dp, "lost"); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"id": "evt_old_dp", "object": "event", "api_version": "2019-01-01", "created": time.Now().Unix(),
		"type": "charge.dispute.closed", "data": map[string]any{"object": map[string]any{"id": dp, "status": "shape of old"}}})
	before := len(e.fake.Calls())
	_, pe, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now()))
	if err != nil || pe.Type != domain.EventDisputeClosed || pe.DisputeStatus != domain.DisputeLost || pe.OrderID != "ord-att-dv" || pe.IdempotencyKey != "att-dv" {
		t.Fatalf("Parse(other version) = %+v, %v", pe, err)
	}
	if calls := e.fake.Calls()[before:]; !slices.Equal(calls, []string{"GET /v1/disputes/" + dp}) {
		t.Fatalf("calls = %v, want the dispute fetched once, its PaymentIntent expanded", calls)
	}
}

// A refund made in the Dashboard is a refund.succeeded with no refund key
// (so payd tells it from its own), with payd's charge and order; payd's
// own refund carries its key.
func TestWebhookOutsideRefund(t *testing.T) {
	e := newEnv(t)
	w, _ := e.c.Webhooks(e.fake.Secret)
	pi := e.paid(t, "att-out")
	if _, err := e.c.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: "rk-own", ChargeID: pi,
		Amount: money("1.00"), Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	own := lastEvent(t, e.fake, "refund.created")
	re, err := e.fake.RefundOutside(pi, 250)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []stripefake.Event{lastEvent(t, e.fake, "refund.created"), lastEvent(t, e.fake, "charge.refunded")} {
		_, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now()))
		if err != nil || pe.Type != domain.EventRefundSucceeded || pe.RefundID != re || pe.IdempotencyKey != "" || pe.ChargeID != pi ||
			pe.OrderID != "ord-att-out" || pe.AmountText != "2.50" || pe.Currency != "EUR" || pe.Status != domain.ChargeSucceeded {
			t.Errorf("Parse(outside %s) = %+v, %v", ev.Type, pe, err)
		}
	}
	if _, pe, err := w.Parse(context.Background(), own.Body, e.fake.Sign(own.Body, time.Now())); err != nil ||
		pe.Type != domain.EventRefundSucceeded || pe.IdempotencyKey != "rk-own" || pe.AmountText != "1.00" {
		t.Fatalf("Parse(payd's refund.created) = %+v, %v", pe, err)
	}
}
