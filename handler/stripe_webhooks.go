package handler

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// StripeEventParser verifies a Stripe webhook body against its
// Stripe-Signature header and reads it (the Stripe adapter's
// Webhooks.Parse): the event ID it returns is the inbox's dedupe key. A bad
// signature is domain.ErrInvalidSignature; a field payd cannot take is a
// *domain.ValidationError.
// The payload it returns is the body as payd stores it (secrets the event
// carries redacted).
type StripeEventParser func(ctx context.Context, body []byte, signature string) (id string, ev domain.ProviderEvent, payload []byte, err error)

// StripeWebhooks receives Stripe's events when PAYD_PROVIDER=stripe: the
// same inbox and the same transitions as the sandbox's, another signature
// scheme (ADR 0019).
type StripeWebhooks struct {
	Receiver EventReceiver
	Parse    StripeEventParser
}

// receive verifies before anything is stored; unknown types are stored and
// answered 200.
func (h *StripeWebhooks) receive(c echo.Context) error {
	if h == nil {
		return echo.ErrNotFound // not in Stripe mode: one webhook endpoint per provider mode
	}
	raw, err := body(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id, ev, payload, err := h.Parse(ctx, raw, c.Request().Header.Get("Stripe-Signature"))
	switch ve := (*domain.ValidationError)(nil); {
	case errors.Is(err, domain.ErrInvalidSignature):
		return errInvalidSignature
	case errors.As(err, &ve):
		return ve
	case err != nil:
		return unasked(err) // Stripe unreachable while fetching the event fresh: a 503, and Stripe retries
	}
	outcome, err := h.Receiver.Receive(ctx, id, ev, payload)
	if err != nil {
		return unasked(err)
	}
	return writeJSON(c, http.StatusOK, map[string]string{"id": id, "outcome": string(outcome)})
}
