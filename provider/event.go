package provider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

type eventDTO struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

type eventDataDTO struct {
	ChargeID       string `json:"charge_id"`
	RefundID       string `json:"refund_id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
}

// ParseEvent reads a webhook body whose signature has already been verified
// into payd's terms. A body that is not a JSON event object is an error
// that is not a *domain.ValidationError; a field payd cannot take is a
// *domain.ValidationError naming it. An event of an unknown type parses,
// whatever shape its data has, with only its references set, so the
// caller can store and ignore it; a known type with unreadable data is an
// error. Every field is bounded by what payd stores, so one odd event is a
// clear refusal rather than a database error on every redelivery.
func ParseEvent(body []byte) (domain.ProviderEvent, error) {
	var d eventDTO
	if err := json.Unmarshal(body, &d); err != nil {
		return domain.ProviderEvent{}, fmt.Errorf("provider event: %w", err)
	}
	if d.Type == "" {
		return domain.ProviderEvent{}, &domain.ValidationError{Field: "type", Reason: "is required"}
	}
	e := domain.ProviderEvent{ID: d.ID, Type: domain.ProviderEventType(d.Type)}
	// created_at is the provider's note of when it happened; payd acts on
	// none of it, so an unreadable one leaves CreatedAt zero.
	if t, err := time.Parse(time.RFC3339Nano, d.CreatedAt); err == nil {
		e.CreatedAt = t.UTC()
	}
	var data eventDataDTO
	if len(d.Data) > 0 {
		if err := json.Unmarshal(d.Data, &data); err != nil {
			if e.Type.Known() {
				return domain.ProviderEvent{}, &domain.ValidationError{Field: "data", Reason: "must be an object"}
			}
			// An event payd does not apply may carry data of any shape: it
			// is stored as received and ignored, never refused, or the
			// provider would retry it forever.
			data = eventDataDTO{}
		}
	}
	if err := data.check(d.Type); err != nil {
		return domain.ProviderEvent{}, err
	}
	e.ChargeID, e.RefundID, e.IdempotencyKey, e.OrderID = data.ChargeID, data.RefundID, data.IdempotencyKey, data.OrderID
	if !e.Type.Known() {
		return e, nil
	}
	if err := data.into(&e); err != nil {
		return domain.ProviderEvent{}, err
	}
	return e, nil
}

// check bounds every field to what payd stores.
func (d eventDataDTO) check(typ string) error {
	fields := []struct {
		name, value string
		max         int
	}{
		{"type", typ, 64}, {"data.charge_id", d.ChargeID, 64}, {"data.refund_id", d.RefundID, 64},
		{"data.idempotency_key", d.IdempotencyKey, 255}, {"data.order_id", d.OrderID, 64}, {"data.amount", d.Amount, 32},
		{"data.currency", d.Currency, 8}, {"data.failure_code", d.FailureCode, 64},
	}
	for _, f := range fields {
		if len(f.value) > f.max {
			return &domain.ValidationError{Field: f.name, Reason: fmt.Sprintf("must be at most %d characters", f.max)}
		}
	}
	return nil
}

// into copies the money and outcome of a known event type into e, checking
// what that type must carry. The type says the outcome; a status, when the
// data gives one, must be one payd knows.
func (d eventDataDTO) into(e *domain.ProviderEvent) error {
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil {
		return &domain.ValidationError{Field: "data.amount", Reason: fmt.Sprintf("%.32q is not a decimal amount", d.Amount)}
	}
	e.Amount, e.Currency, e.FailureCode = amount, d.Currency, d.FailureCode
	if d.Status != "" {
		if _, err := parseStatus(d.Status); err != nil {
			return &domain.ValidationError{Field: "data.status", Reason: err.Error()}
		}
	}
	switch e.Type {
	case domain.EventRefundSucceeded:
		if d.RefundID == "" {
			return &domain.ValidationError{Field: "data.refund_id", Reason: "is required"}
		}
		e.Status = domain.ChargeSucceeded
	case domain.EventPaymentFailed:
		e.Status = domain.ChargeFailed
	default:
		e.Status = domain.ChargeSucceeded
	}
	return nil
}
