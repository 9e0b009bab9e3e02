package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// EventReceiver applies verified provider events.
type EventReceiver interface {
	Receive(ctx context.Context, ev service.ProviderEvent) (string, error)
}

// Webhooks receives the provider's events (SPEC §6).
type Webhooks struct {
	Receiver EventReceiver
	verifier []*standardwebhooks.Webhook
}

// NewWebhooks verifies with every secret in secrets (separated by spaces or
// commas), so a secret can be rotated without dropping events: the new one
// is added, the provider switches, the old one is removed.
func NewWebhooks(r EventReceiver, secrets string) (*Webhooks, error) {
	h := &Webhooks{Receiver: r}
	for _, s := range strings.FieldsFunc(secrets, func(r rune) bool { return r == ' ' || r == ',' }) {
		v, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, err
		}
		h.verifier = append(h.verifier, v)
	}
	return h, nil
}

var errInvalidSignature = problem(http.StatusUnauthorized, "invalid_signature", "Invalid signature",
	"The webhook signature is missing, wrong, or older than 5 minutes.")

type eventJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

type eventDataJSON struct {
	ChargeID       string `json:"charge_id"`
	RefundID       string `json:"refund_id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
}

// receive checks the signature before anything is stored, then hands the
// event to the use case. Unknown event types are stored and answered 200.
func (h *Webhooks) receive(c echo.Context) error {
	raw, err := body(c)
	if err != nil {
		return err
	}
	if !h.verified(raw, c.Request().Header) {
		return errInvalidSignature
	}
	var ev eventJSON
	if err := json.Unmarshal(raw, &ev); err != nil {
		return errMalformedJSON
	}
	if ev.Type == "" {
		return &domain.ValidationError{Field: "type", Reason: "is required"}
	}
	// The webhook-id header is the message id (Standard Webhooks): the same
	// on every retry of one message, and signed with it, so it is what the
	// inbox dedupes on. The payload's own id is the sender's business: it
	// may differ from the header or be absent, and stays in the stored
	// payload as received.
	msgID := c.Request().Header.Get(standardwebhooks.HeaderWebhookID)
	var data eventDataJSON
	if len(ev.Data) > 0 {
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			if knownEvent(ev.Type) {
				return &domain.ValidationError{Field: "data", Reason: "must be an object"}
			}
			// An event payd does not apply may carry data of any shape: it
			// is stored as received and ignored, never refused (SPEC §6),
			// or the provider would retry it forever.
			data = eventDataJSON{}
		}
	}
	if err := data.check(msgID, ev); err != nil {
		return err
	}
	outcome, err := h.Receiver.Receive(c.Request().Context(), service.ProviderEvent{ID: msgID, Type: ev.Type, Payload: raw, Data: service.EventData{
		ChargeID: data.ChargeID, RefundID: data.RefundID, IdempotencyKey: data.IdempotencyKey, OrderID: data.OrderID,
		Amount: data.Amount, Currency: data.Currency, FailureCode: data.FailureCode,
	}})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]string{"id": msgID, "outcome": outcome})
}

// knownEvent reports whether payd applies events of type t.
func knownEvent(t string) bool {
	return t == domain.EventPaymentSucceeded || t == domain.EventPaymentFailed || t == domain.EventRefundSucceeded
}

func (h *Webhooks) verified(raw []byte, headers http.Header) bool {
	for _, v := range h.verifier {
		if v.Verify(raw, headers) == nil {
			return true
		}
	}
	return false
}

// check bounds every field to what payd stores, so one odd event is a clear
// 400 rather than a database error on every redelivery.
func (d eventDataJSON) check(msgID string, ev eventJSON) error {
	fields := []struct {
		name, value string
		max         int
	}{
		{"webhook-id", msgID, 255}, {"type", ev.Type, 64}, {"data.charge_id", d.ChargeID, 64}, {"data.refund_id", d.RefundID, 64},
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
