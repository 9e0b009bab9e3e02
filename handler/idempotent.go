package handler

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/service"
)

// requestKeyOf is the key the idempotency middleware accepted for this request.
func requestKeyOf(c echo.Context) string { return idempotency.KeyOf(c) }

// keyedOf is the key the middleware accepted with the request's
// fingerprint, for use cases that keep both on the row they create.
func keyedOf(c echo.Context) service.Keyed {
	return service.Keyed{Key: idempotency.KeyOf(c), Fingerprint: idempotency.FingerprintOf(c)}
}

// PayRecords is Checkout's settled answers (service.SettledAnswers) kept
// in the idempotency records of pay requests: when a payment's answer
// becomes known outside its request (a webhook, the recoverer, a refusal),
// it completes the request's record with what the pay call itself answers
// for that outcome (RenderPay), so a replay tells the truth instead of a
// stale 202.
type PayRecords struct {
	Engine *idempotency.Engine
}

// PaymentSettled completes the record of the pay request a.RequestID. A
// record already past its TTL is completed too, but a retry no longer sees
// it (gone, ADR 0011): that retry gets the same outcome from the order,
// not a replay, by design. The pay request came with the order's client
// secret or with its customer's token (ADR 0059): the record is in one of
// their two scopes, and completing the other matches no record.
func (p PayRecords) PaymentSettled(ctx context.Context, o domain.Order, a domain.Attempt, outcome error, final bool) error {
	answer := RenderPay(o, outcome)
	if o.CustomerID != "" {
		if err := p.Engine.Complete(ctx, domain.CustomerScope(o.CustomerID), a.RequestID, o.ID, answer, final); err != nil {
			return err
		}
	}
	return p.Engine.Complete(ctx, domain.OrderScope(o.ID), a.RequestID, o.ID, answer, final)
}
