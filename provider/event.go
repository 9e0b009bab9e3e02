package provider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// EventType names a provider webhook event.
type EventType string

// The webhook events the provider sends.
const (
	EventPaymentSucceeded EventType = "payment.succeeded"
	EventPaymentFailed    EventType = "payment.failed"
	EventRefundSucceeded  EventType = "refund.succeeded"
)

// Known reports whether payd understands events of type t. Unknown types are
// still valid events: they are stored and ignored, not refused.
func (t EventType) Known() bool {
	return t == EventPaymentSucceeded || t == EventPaymentFailed || t == EventRefundSucceeded
}

// Event is a provider webhook in payd's terms. ID is the payload's own id,
// if it has one. It is not the dedupe key: in Standard Webhooks that is the
// webhook-id header (the message id), which every redelivery of one message
// carries and which the receiver stores once; the payload's id may differ
// from it or be absent.
//
// For payment events ChargeID, IdempotencyKey (the charge's: payd's attempt
// ID), OrderID, Amount, Currency, Status and FailureCode are set. For
// refund.succeeded RefundID, ChargeID, IdempotencyKey (the refund's),
// OrderID, Amount and Currency are set.
type Event struct {
	ID             string
	Type           EventType
	CreatedAt      time.Time
	ChargeID       string
	RefundID       string
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	Status         ChargeStatus
	FailureCode    string
}

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

// ParseEvent reads a webhook body whose signature has already been
// verified. An event of an unknown type parses (with only ID, Type and
// CreatedAt set) so the caller can store and ignore it; a known type with
// missing or malformed data is an error.
func ParseEvent(body []byte) (Event, error) {
	var d eventDTO
	if err := json.Unmarshal(body, &d); err != nil {
		return Event{}, fmt.Errorf("provider event: %w", err)
	}
	if d.Type == "" {
		return Event{}, fmt.Errorf("provider event: type is required")
	}
	e := Event{ID: d.ID, Type: EventType(d.Type)}
	if d.CreatedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
		if err != nil {
			return Event{}, fmt.Errorf("provider event %s: created_at: %w", d.ID, err)
		}
		e.CreatedAt = t.UTC()
	}
	if !e.Type.Known() {
		return e, nil
	}
	var data eventDataDTO
	if err := json.Unmarshal(d.Data, &data); err != nil {
		return Event{}, fmt.Errorf("provider event %s: data: %w", d.ID, err)
	}
	if err := data.into(&e); err != nil {
		return Event{}, fmt.Errorf("provider event %s: %w", d.ID, err)
	}
	return e, nil
}

// into copies the data of a known event type into e, checking what that
// type must carry.
func (d eventDataDTO) into(e *Event) error {
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil {
		return fmt.Errorf("amount %q: %w", d.Amount, err)
	}
	if d.ChargeID == "" || d.OrderID == "" || d.Currency == "" {
		return fmt.Errorf("charge_id, order_id and currency are required")
	}
	e.ChargeID, e.RefundID, e.IdempotencyKey = d.ChargeID, d.RefundID, d.IdempotencyKey
	e.OrderID, e.Amount, e.Currency = d.OrderID, amount, d.Currency
	e.FailureCode = d.FailureCode
	if e.Type == EventRefundSucceeded {
		if d.RefundID == "" {
			return fmt.Errorf("refund_id is required")
		}
		e.Status = ChargeSucceeded
		return nil
	}
	if e.Status, err = parseStatus(d.Status); err != nil {
		return err
	}
	return nil
}
