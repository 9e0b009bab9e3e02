package handler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// EventReceiver applies verified provider events: each is stored once
// under msgID, with its body as received.
type EventReceiver interface {
	Receive(ctx context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (service.WebhookOutcome, error)
}

// EventParser reads a verified webhook body into payd's terms (the
// provider adapter's ParseEvent). A field it cannot take is a
// *domain.ValidationError; any other error means the body is not an event.
type EventParser func(body []byte) (domain.ProviderEvent, error)

// Webhooks receives the provider's events
// (docs/guarantees.md#webhooks-are-hints).
type Webhooks struct {
	Receiver EventReceiver
	Parse    EventParser
	// Rejected, optional, is told of each delivery refused before it was
	// stored, by reason: invalid_signature or malformed (ADR 0022).
	Rejected func(reason telemetry.WebhookRejection)
	verifier []*standardwebhooks.Webhook
}

// NewWebhooks reads events with parse and verifies them with every secret
// in secrets (separated by spaces or commas), so a secret can be rotated
// without dropping events: the new one is added, the provider switches,
// the old one is removed.
func NewWebhooks(r EventReceiver, parse EventParser, secrets string) (*Webhooks, error) {
	h := &Webhooks{Receiver: r, Parse: parse}
	for _, s := range strings.FieldsFunc(secrets, func(r rune) bool { return r == ' ' || r == ',' }) {
		v, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, err
		}
		h.verifier = append(h.verifier, v)
	}
	return h, nil
}

// maxMessageID bounds the webhook-id header to what the inbox stores.
const maxMessageID = 255

var errInvalidSignature = problem("invalid_signature",
	"The webhook signature is missing, wrong, or older than 5 minutes.")

// receive checks the signature before anything is stored, then hands the
// event to the use case. Unknown event types are stored and answered 200.
// Without a receiver (PAYD_PROVIDER=stripe) the route answers 404: one
// webhook endpoint per provider mode, so the sandbox's signature scheme is
// no second way in for events in Stripe mode.
func (h *Webhooks) receive(c echo.Context) error {
	if h == nil {
		return echo.ErrNotFound // in Stripe mode
	}
	raw, err := body(c)
	if err != nil {
		return err
	}
	if !h.verified(raw, c.Request().Header) {
		h.rejected(telemetry.RejectedInvalidSignature)
		return errInvalidSignature
	}
	ev, err := h.Parse(raw)
	if err != nil {
		h.rejected(telemetry.RejectedMalformed)
		if ve := (*domain.ValidationError)(nil); errors.As(err, &ve) {
			return ve
		}
		return errMalformedJSON
	}
	// The webhook-id header is the message id (Standard Webhooks): the same
	// on every retry of one message, and signed with it, so it is what the
	// inbox dedupes on. The payload's own id is the sender's business: it
	// may differ from the header or be absent, and stays in the stored
	// payload as received.
	msgID := c.Request().Header.Get(standardwebhooks.HeaderWebhookID)
	if len(msgID) > maxMessageID {
		return &domain.ValidationError{Field: "webhook-id", Reason: fmt.Sprintf("must be at most %d characters", maxMessageID)}
	}
	outcome, err := h.Receiver.Receive(c.Request().Context(), msgID, ev, raw)
	if err != nil {
		return unasked(err)
	}
	return writeJSON(c, http.StatusOK, map[string]string{"id": msgID, "outcome": string(outcome)})
}

// unasked marks err, an event's failure to be read or applied, as the
// provider's being unreachable when the provider could not be asked about
// the event (ADR 0031): the reply to payd's question was lost, cut,
// unreadable or a 5xx. Elsewhere such an outcome is open, since a call may
// have moved money; a question moves none, so here it is no more than a
// provider that did not answer. Nothing was applied and the inbox row stays
// unprocessed, so the answer is a 503 with Retry-After (logged as a
// warning, as a database outage is) and the provider's redelivery applies
// the event once it answers.
func unasked(err error) error {
	if errors.Is(err, domain.ErrProviderUnavailable) && !errors.Is(err, domain.ErrProviderUnreachable) {
		return fmt.Errorf("%w: %w", domain.ErrProviderUnreachable, err)
	}
	return err
}

func (h *Webhooks) rejected(reason telemetry.WebhookRejection) {
	if h.Rejected != nil {
		h.Rejected(reason)
	}
}

func (h *Webhooks) verified(raw []byte, headers http.Header) bool {
	for _, v := range h.verifier {
		if v.Verify(raw, headers) == nil {
			return true
		}
	}
	return false
}
