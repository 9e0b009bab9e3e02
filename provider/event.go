package provider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// eventDTO is a provider event on the wire; data is read by its type.
type eventDTO struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// eventDataDTO is what an event's data says about a charge, refund or
// dispute, as written: the amount stays text until the event's type is
// known.
type eventDataDTO struct {
	ChargeID       string `json:"charge_id"`
	RefundID       string `json:"refund_id"`
	DisputeID      string `json:"dispute_id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	// Status is read (it is part of the event's published shape); only a
	// dispute.closed consults it (won or lost): otherwise the type says the
	// outcome.
	Status      string `json:"status"`
	FailureCode string `json:"failure_code"`
	// Reason is a dispute's (fraudulent, ...).
	Reason string `json:"reason"`
}

// ParseEvent reads a webhook body whose signature has already been verified
// into payd's terms. A body that is not a JSON event object is an error
// that is not a *domain.ValidationError; a field payd cannot take is a
// *domain.ValidationError naming it: a missing type, data of a known type
// that is not an object, or a field longer than payd stores, so one odd
// event is a clear refusal rather than a database error on every
// redelivery. An event of an unknown type parses, whatever shape its data
// has, with only its references set, so the caller can store and ignore
// it.
//
// Within those bounds a signed event of a known type is the provider's
// word and is never refused for what its data says: an amount that is
// missing or not a decimal leaves AmountReadable false (AmountText keeps
// what was written) for the caller to record, not apply; a status payd
// does not know is ignored, since the type says the outcome; a
// refund.succeeded without refund_id has an empty RefundID. A
// dispute.created is open whatever its status says; a dispute.closed
// whose status is neither won nor lost has an empty DisputeStatus.
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
			if sandboxApplies(e.Type) {
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
	e.ChargeID, e.RefundID, e.DisputeID = data.ChargeID, data.RefundID, data.DisputeID
	e.IdempotencyKey, e.OrderID = data.IdempotencyKey, data.OrderID
	if sandboxApplies(e.Type) {
		data.into(&e)
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
		{"data.dispute_id", d.DisputeID, 255}, {"data.idempotency_key", d.IdempotencyKey, 255},
		{"data.order_id", d.OrderID, 64}, {"data.amount", d.Amount, 32}, {"data.currency", d.Currency, 8},
		{"data.failure_code", d.FailureCode, 64}, {"data.reason", d.Reason, 64},
	}
	for _, f := range fields {
		if len(f.value) > f.max {
			return &domain.ValidationError{Field: f.name, Reason: fmt.Sprintf("must be at most %d characters", f.max)}
		}
	}
	return nil
}

// into copies the money and outcome of a known event type into e. The
// amount is kept as written; Amount is set only when it reads as a
// decimal. The type says the outcome: the data's status is consulted only
// for how a dispute closed.
func (d eventDataDTO) into(e *domain.ProviderEvent) {
	e.AmountText, e.Currency, e.FailureCode = d.Amount, d.Currency, d.FailureCode
	if amount, err := decimal.NewFromString(d.Amount); err == nil {
		e.Amount = amount
	}
	e.Status = domain.ChargeSucceeded
	if e.Type == domain.EventPaymentFailed {
		e.Status = domain.ChargeFailed
	}
	switch e.Type {
	case domain.EventDisputeCreated:
		e.DisputeStatus, e.Reason = domain.DisputeOpen, d.Reason
	case domain.EventDisputeClosed:
		e.Reason = d.Reason
		if st := domain.DisputeStatus(d.Status); st == domain.DisputeWon || st == domain.DisputeLost {
			e.DisputeStatus = st
		}
	}
}

// sandboxApplies reports whether the sandbox's wire defines the data of
// events of type t: payments, refunds and disputes opened and closed. Its
// wire has no refund failures (its refunds never wait) and no other
// dispute steps: a refund.failed or dispute.funds_withdrawn in its format
// is stored and ignored like any type payd does not apply.
func sandboxApplies(t domain.ProviderEventType) bool {
	switch t {
	case domain.EventPaymentSucceeded, domain.EventPaymentFailed, domain.EventRefundSucceeded,
		domain.EventDisputeCreated, domain.EventDisputeClosed:
		return true
	}
	return false
}
