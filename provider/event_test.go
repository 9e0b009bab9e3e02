package provider_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    domain.ProviderEvent
		wantErr bool
	}{
		{
			name: "payment failed",
			body: `{"id":"evt_1","type":"payment.failed","created_at":"2024-05-01T10:00:00Z","data":{"charge_id":"ch_1","idempotency_key":"att_1","order_id":"o1","amount":"12.30","currency":"USD","status":"failed","failure_code":"card_declined"}}`,
			want: domain.ProviderEvent{ID: "evt_1", Type: domain.EventPaymentFailed, CreatedAt: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
				ChargeID: "ch_1", IdempotencyKey: "att_1", OrderID: "o1", AmountText: "12.30", Amount: decimal.RequireFromString("12.30"), Currency: "USD",
				Status: domain.ChargeFailed, FailureCode: "card_declined"},
		},
		{
			name: "refund",
			body: `{"id":"evt_2","type":"refund.succeeded","created_at":"2024-05-01T10:00:00.25Z","data":{"refund_id":"re_1","charge_id":"ch_1","idempotency_key":"rk","order_id":"o1","amount":"1.00","currency":"USD"}}`,
			want: domain.ProviderEvent{ID: "evt_2", Type: domain.EventRefundSucceeded, CreatedAt: time.Date(2024, 5, 1, 10, 0, 0, 250e6, time.UTC),
				RefundID: "re_1", ChargeID: "ch_1", IdempotencyKey: "rk", OrderID: "o1", AmountText: "1.00", Amount: decimal.RequireFromString("1"), Currency: "USD",
				Status: domain.ChargeSucceeded},
		},
		{
			name: "unknown type is kept",
			body: `{"id":"evt_3","type":"charge.captured","created_at":"2024-05-01T10:00:00Z","data":{"whatever":1}}`,
			want: domain.ProviderEvent{ID: "evt_3", Type: "charge.captured", CreatedAt: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)},
		},
		{
			name: "dispute created",
			body: `{"id":"evt_5","type":"dispute.created","created_at":"2024-05-01T10:00:00Z","data":{"dispute_id":"dp_1","charge_id":"ch_1","idempotency_key":"att_1","order_id":"o1","amount":"12.30","currency":"USD","status":"open","reason":"fraudulent"}}`,
			want: domain.ProviderEvent{ID: "evt_5", Type: domain.EventDisputeCreated, CreatedAt: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
				DisputeID: "dp_1", ChargeID: "ch_1", IdempotencyKey: "att_1", OrderID: "o1", AmountText: "12.30", Amount: decimal.RequireFromString("12.30"),
				Currency: "USD", Status: domain.ChargeSucceeded, DisputeStatus: domain.DisputeOpen, Reason: "fraudulent"},
		},
		{
			// The type says the dispute opened, whatever its status says.
			name: "dispute created, odd status",
			body: `{"type":"dispute.created","data":{"dispute_id":"dp_1","charge_id":"ch_1","amount":"12.30","currency":"USD","status":"new"}}`,
			want: domain.ProviderEvent{Type: domain.EventDisputeCreated, DisputeID: "dp_1", ChargeID: "ch_1", AmountText: "12.30",
				Amount: decimal.RequireFromString("12.30"), Currency: "USD", Status: domain.ChargeSucceeded, DisputeStatus: domain.DisputeOpen},
		},
		{
			name: "dispute won",
			body: `{"id":"evt_6","type":"dispute.closed","data":{"dispute_id":"dp_1","charge_id":"ch_1","idempotency_key":"att_1","order_id":"o1","amount":"12.30","currency":"USD","status":"won","reason":"fraudulent"}}`,
			want: domain.ProviderEvent{ID: "evt_6", Type: domain.EventDisputeClosed, DisputeID: "dp_1", ChargeID: "ch_1", IdempotencyKey: "att_1", OrderID: "o1",
				AmountText: "12.30", Amount: decimal.RequireFromString("12.30"), Currency: "USD", Status: domain.ChargeSucceeded,
				DisputeStatus: domain.DisputeWon, Reason: "fraudulent"},
		},
		{
			name: "dispute lost",
			body: `{"id":"evt_7","type":"dispute.closed","data":{"dispute_id":"dp_1","charge_id":"ch_1","amount":"12.30","currency":"USD","status":"lost","reason":"fraudulent"}}`,
			want: domain.ProviderEvent{ID: "evt_7", Type: domain.EventDisputeClosed, DisputeID: "dp_1", ChargeID: "ch_1",
				AmountText: "12.30", Amount: decimal.RequireFromString("12.30"), Currency: "USD", Status: domain.ChargeSucceeded,
				DisputeStatus: domain.DisputeLost, Reason: "fraudulent"},
		},
		{
			// A close that says neither won nor lost is kept, for payd to record.
			name: "dispute closed, odd status",
			body: `{"id":"evt_8","type":"dispute.closed","data":{"dispute_id":"dp_1","charge_id":"ch_1","amount":"12.30","currency":"USD","status":"open","reason":"fraudulent"}}`,
			want: domain.ProviderEvent{ID: "evt_8", Type: domain.EventDisputeClosed, DisputeID: "dp_1", ChargeID: "ch_1",
				AmountText: "12.30", Amount: decimal.RequireFromString("12.30"), Currency: "USD", Status: domain.ChargeSucceeded, Reason: "fraudulent"},
		},
		{
			// The sandbox's wire has no such dispute event: kept with its references only.
			name: "dispute event the sandbox does not send",
			body: `{"id":"evt_9","type":"dispute.funds_withdrawn","data":{"dispute_id":"dp_1","charge_id":"ch_1","amount":"12.30","currency":"USD","status":"lost"}}`,
			want: domain.ProviderEvent{ID: "evt_9", Type: domain.EventDisputeFundsWithdrawn, DisputeID: "dp_1", ChargeID: "ch_1"},
		},
		{name: "not json", body: `{`, wantErr: true},
		{
			// The payload's own id is optional: the webhook-id header is the message id.
			name: "no id",
			body: `{"type":"payment.failed","data":{"charge_id":"ch_1","order_id":"o1","amount":"1","currency":"USD","status":"failed"}}`,
			want: domain.ProviderEvent{Type: domain.EventPaymentFailed, ChargeID: "ch_1", OrderID: "o1", AmountText: "1", Amount: decimal.RequireFromString("1"),
				Currency: "USD", Status: domain.ChargeFailed},
		},
		{name: "no type", body: `{"id":"evt_4"}`, wantErr: true},
		// A signed event of a known type is the provider's word: what payd
		// cannot read in its data is kept for the record, never refused.
		{
			name: "bad amount",
			body: `{"id":"e","type":"payment.succeeded","data":{"charge_id":"c","order_id":"o","amount":"x","currency":"USD","status":"succeeded"}}`,
			want: domain.ProviderEvent{ID: "e", Type: domain.EventPaymentSucceeded, ChargeID: "c", OrderID: "o", AmountText: "x", Currency: "USD",
				Status: domain.ChargeSucceeded},
		},
		{
			name: "missing amount",
			body: `{"id":"e","type":"payment.succeeded","data":{"charge_id":"c","order_id":"o","currency":"USD"}}`,
			want: domain.ProviderEvent{ID: "e", Type: domain.EventPaymentSucceeded, ChargeID: "c", OrderID: "o", Currency: "USD",
				Status: domain.ChargeSucceeded},
		},
		{
			// The type says the outcome; a status payd does not know is ignored.
			name: "bad status",
			body: `{"id":"e","type":"payment.succeeded","data":{"charge_id":"c","order_id":"o","amount":"1","currency":"USD","status":"maybe"}}`,
			want: domain.ProviderEvent{ID: "e", Type: domain.EventPaymentSucceeded, ChargeID: "c", OrderID: "o", AmountText: "1",
				Amount: decimal.RequireFromString("1"), Currency: "USD", Status: domain.ChargeSucceeded},
		},
		{
			name: "refund without id",
			body: `{"id":"e","type":"refund.succeeded","data":{"charge_id":"c","order_id":"o","amount":"1","currency":"USD"}}`,
			want: domain.ProviderEvent{ID: "e", Type: domain.EventRefundSucceeded, ChargeID: "c", OrderID: "o", AmountText: "1",
				Amount: decimal.RequireFromString("1"), Currency: "USD", Status: domain.ChargeSucceeded},
		},
		{
			// More decimals than the currency has: kept as written, for the record.
			name: "amount as written",
			body: `{"id":"e","type":"refund.succeeded","data":{"refund_id":"r","charge_id":"c","order_id":"o","amount":"12.300","currency":"USD"}}`,
			want: domain.ProviderEvent{ID: "e", Type: domain.EventRefundSucceeded, RefundID: "r", ChargeID: "c", OrderID: "o", AmountText: "12.300",
				Amount: decimal.RequireFromString("12.3"), Currency: "USD", Status: domain.ChargeSucceeded},
		},
	}
	for _, tt := range tests {
		got, err := provider.ParseEvent([]byte(tt.body))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: ParseEvent = %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if !got.Amount.Equal(tt.want.Amount) {
			t.Errorf("%s: Amount = %v, want %v", tt.name, got.Amount, tt.want.Amount)
		}
		if got.AmountReadable() != tt.want.AmountReadable() {
			t.Errorf("%s: AmountReadable() = %v, want %v", tt.name, got.AmountReadable(), tt.want.AmountReadable())
		}
		got.Amount, tt.want.Amount = decimal.Zero, decimal.Zero
		if got != tt.want {
			t.Errorf("%s: ParseEvent = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestParseEventRefusals: what the webhook endpoint answers 400 for is a
// *domain.ValidationError naming the field, except a body that is not an
// event at all; an unknown type is never refused for its data, and keeps
// the references it names for the inbox; a known type is refused only for
// its shape and bounds, never for what its data says (an odd amount or
// status, a refund without its id).
func TestParseEventRefusals(t *testing.T) {
	long := strings.Repeat("c", 65)
	tests := []struct {
		name, body string
		field      string // "" with wantErr: not a ValidationError
		wantErr    bool
	}{
		{name: "array", body: `["evt"]`, wantErr: true},
		{name: "type missing", body: `{"id":"e","data":{}}`, field: "type", wantErr: true},
		{name: "known type, data not an object", body: `{"type":"payment.succeeded","data":"x"}`, field: "data", wantErr: true},
		{name: "charge id too long", body: `{"type":"payment.succeeded","data":{"charge_id":"` + long + `","amount":"1","currency":"USD"}}`, field: "data.charge_id", wantErr: true},
		{name: "unknown type, data an array", body: `{"type":"charge.dispute.opened","data":["x",1]}`},
		{name: "unknown type, odd amount", body: `{"type":"charge.disputed","data":{"amount":"lots"}}`},
		{name: "known type, odd amount", body: `{"type":"payment.succeeded","data":{"charge_id":"c","amount":"lots","currency":"USD"}}`},
		{name: "known type, no data", body: `{"type":"payment.failed"}`},
		{name: "known type, odd status", body: `{"type":"payment.failed","data":{"amount":"1","currency":"USD","status":"maybe"}}`},
		{name: "refund without id", body: `{"type":"refund.succeeded","data":{"charge_id":"c","amount":"1","currency":"USD"}}`},
		{name: "known type, amount too long", body: `{"type":"payment.succeeded","data":{"amount":"` + strings.Repeat("1", 33) + `"}}`, field: "data.amount", wantErr: true},
		{name: "dispute id too long", body: `{"type":"dispute.created","data":{"dispute_id":"` + strings.Repeat("d", 256) + `"}}`, field: "data.dispute_id", wantErr: true},
		{name: "dispute id at the bound", body: `{"type":"dispute.created","data":{"dispute_id":"` + strings.Repeat("d", 255) + `"}}`},
		{name: "reason too long", body: `{"type":"dispute.closed","data":{"dispute_id":"d","reason":"` + strings.Repeat("r", 65) + `"}}`, field: "data.reason", wantErr: true},
		{name: "dispute, data not an object", body: `{"type":"dispute.closed","data":[1]}`, field: "data", wantErr: true},
	}
	for _, tt := range tests {
		_, err := provider.ParseEvent([]byte(tt.body))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: ParseEvent = %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		var ve *domain.ValidationError
		if isVE := errors.As(err, &ve); err != nil && (isVE != (tt.field != "") || isVE && ve.Field != tt.field) {
			t.Errorf("%s: ParseEvent = %#v, want a validation error of field %q", tt.name, err, tt.field)
		}
	}

	got, err := provider.ParseEvent([]byte(`{"type":"charge.disputed","data":{"charge_id":"ch_1","idempotency_key":"att_1","order_id":"o1","amount":"x"}}`))
	if err != nil || got.ChargeID != "ch_1" || got.IdempotencyKey != "att_1" || got.OrderID != "o1" {
		t.Errorf("ParseEvent(unknown type) = %+v, %v, want its references kept", got, err)
	}
	// The type says the outcome; a status is not required.
	got, err = provider.ParseEvent([]byte(`{"type":"payment.succeeded","data":{"charge_id":"c","order_id":"o","amount":"999.00","currency":"USD"}}`))
	if err != nil || got.Status != domain.ChargeSucceeded || !got.Amount.Equal(decimal.RequireFromString("999")) {
		t.Errorf("ParseEvent(no status) = %+v, %v, want succeeded for 999", got, err)
	}
}
