package stripeprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/domain"
)

// A hold is a PaymentIntent created with capture_method manual: Stripe
// authorizes it (requires_capture) and holds the money until a capture
// takes some or all of it (the rest released) or a cancel gives it up, or
// until it lapses and Stripe cancels it (cancellation_reason automatic).
// Capture and Void speak for it with the sandbox's meaning, each under its
// own Idempotency-Key. Stripe answers a repeat of a key with its first
// answer, which stays true: a captured or cancelled PaymentIntent is
// final (later refunds aside, which FindCharge reports).

// Capture takes req.Amount of the hold req.ChargeID (its PaymentIntent,
// the ID the adapter names its charges by) and releases the rest, under
// req.IdempotencyKey. The answer is the charge after: succeeded, with
// AmountCaptured. A hold that cannot be captured is a
// *domain.ProviderRequestError whose code says why (domain.CaptureTooLarge,
// ChargeAlreadyCaptured, ChargeAlreadyVoided, HoldLapsed,
// ChargeNotCapturable); no reply, a 5xx or a key still in use is
// domain.ErrProviderUnavailable, and the caller sends the same key again.
// An amount Stripe cannot take exactly is refused before anything is sent.
func (c *Client) Capture(ctx context.Context, req domain.CaptureRequest) (domain.Charge, error) {
	cur, err := domain.ParseCurrency(req.Currency)
	if err != nil {
		return domain.Charge{}, err
	}
	amount, err := toStripeAmount(req.Amount, cur)
	if err != nil {
		return domain.Charge{}, err
	}
	p := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(amount)}
	p.AddExpand("latest_charge")
	p.SetIdempotencyKey(req.IdempotencyKey)
	what := "capture " + req.IdempotencyKey
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pi, err := c.sc.V1PaymentIntents.Capture(ctx, req.ChargeID, p)
	if err != nil {
		return domain.Charge{}, c.holdError(ctx, err, req.ChargeID, what)
	}
	return holdAnswer(pi, what)
}

// Void gives up the hold req.ChargeID (its PaymentIntent) by cancelling
// it, under req.IdempotencyKey. The answer is the charge after: voided. A
// hold captured already, or voided or lapsed before, is refused as for
// Capture. Unlike the sandbox, Stripe also cancels a PaymentIntent that
// holds nothing yet (awaiting 3-D Secure, or declined): payd voids only
// what it holds as authorized, and such a one answers as it is, failed.
func (c *Client) Void(ctx context.Context, req domain.VoidRequest) (domain.Charge, error) {
	p := &stripe.PaymentIntentCancelParams{}
	p.AddExpand("latest_charge")
	p.SetIdempotencyKey(req.IdempotencyKey)
	what := "void " + req.IdempotencyKey
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pi, err := c.sc.V1PaymentIntents.Cancel(ctx, req.ChargeID, p)
	if err != nil {
		return domain.Charge{}, c.holdError(ctx, err, req.ChargeID, what)
	}
	return holdAnswer(pi, what)
}

// holdAnswer reads the PaymentIntent a capture or a void answered.
func holdAnswer(pi *stripe.PaymentIntent, what string) (domain.Charge, error) {
	ch, err := toCharge(pi)
	if err != nil {
		// A 200 payd cannot read may still mean the hold moved.
		return domain.Charge{}, fmt.Errorf("%s: %w", what, err)
	}
	return ch, nil
}

// holdError reads Stripe's refusal of a capture or a void of PaymentIntent
// id in the sandbox's codes: amount_too_large (more than
// amount_capturable) is domain.CaptureTooLarge, charge_expired_for_capture
// domain.HoldLapsed; payment_intent_unexpected_state says only that the
// PaymentIntent holds nothing now, so it is read (with its latest charge)
// to say why: captured already, voided or lapsed, or never a hold. Any
// other error is wrap's.
func (c *Client) holdError(ctx context.Context, err error, id, what string) error {
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusBadRequest {
		return wrap(err, what)
	}
	refuse := func(code string) error {
		return fmt.Errorf("%s: %w", what, &domain.ProviderRequestError{StatusCode: se.HTTPStatusCode, Code: code, Message: se.Msg})
	}
	switch se.Code {
	case stripe.ErrorCodeAmountTooLarge:
		return refuse(domain.CaptureTooLarge)
	case stripe.ErrorCodeChargeExpiredForCapture:
		return refuse(domain.HoldLapsed)
	case stripe.ErrorCodePaymentIntentUnexpectedState:
		p := &stripe.PaymentIntentRetrieveParams{}
		p.AddExpand("latest_charge")
		pi, rerr := c.sc.V1PaymentIntents.Retrieve(ctx, id, p)
		if rerr != nil {
			return wrap(rerr, what+": read why stripe refused it")
		}
		ch, cerr := toCharge(pi)
		if cerr != nil {
			return fmt.Errorf("%s: read why stripe refused it: %w", what, cerr)
		}
		return refuse(holdRefusal(ch))
	}
	return wrap(err, what)
}

// holdRefusal is the code of a refused capture or void of ch, as the
// sandbox names it.
func holdRefusal(ch domain.Charge) string {
	switch {
	case ch.CaptureMethod != domain.CaptureManual:
		return domain.ChargeNotCapturable
	case ch.Status == domain.ChargeSucceeded:
		return domain.ChargeAlreadyCaptured
	case ch.Status == domain.ChargeVoided && ch.FailureCode == domain.HoldLapsed:
		return domain.HoldLapsed
	case ch.Status == domain.ChargeVoided:
		return domain.ChargeAlreadyVoided
	}
	return domain.ChargeNotCapturable
}
