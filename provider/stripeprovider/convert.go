package stripeprovider

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// createParams is the one PaymentIntent create payd sends for an attempt.
// It is a pure function of the attempt, so a replay under the same
// Idempotency-Key carries the same parameters, as Stripe requires.
func createParams(r domain.ChargeRequest) (*stripe.PaymentIntentCreateParams, error) {
	cur, err := domain.ParseCurrency(r.Currency)
	if err != nil {
		return nil, err
	}
	amount, err := toStripeAmount(r.Amount, cur)
	if err != nil {
		// A refusal, as Stripe's own 400 would be: nothing was sent, so the
		// attempt fails and the order is released, never left unknown.
		return nil, &domain.ProviderRequestError{StatusCode: http.StatusBadRequest, Code: "amount_not_chargeable", Message: err.Error()}
	}
	p := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(amount),
		Currency:           stripe.String(strings.ToLower(string(cur))),
		PaymentMethod:      stripe.String(r.PaymentMethod),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		Confirm:            stripe.Bool(true),
	}
	if r.CaptureMethod == domain.CaptureManual {
		// A hold: Stripe authorizes and waits for Capture. The latest
		// charge comes expanded, for when the hold lapses. An automatic
		// charge sends neither, as it always has.
		p.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
		p.AddExpand("latest_charge")
	}
	p.AddMetadata(MetaOrder, r.OrderID)
	p.AddMetadata(MetaAttempt, r.IdempotencyKey)
	p.SetIdempotencyKey(r.IdempotencyKey)
	return p, nil
}

// HoldWindow is how long after its creation payd takes a hold to last when
// Stripe does not say (only an expanded latest charge carries
// payment_method_details.card.capture_before): the seven days Stripe
// gives most online card authorizations. It is an estimate, and may be
// late: some holds (Visa's merchant-initiated ones) lapse sooner.
const HoldWindow = 7 * 24 * time.Hour

// toCharge reads a PaymentIntent in payd's terms (ADR 0019):
// succeeded → succeeded; requires_payment_method or canceled → failed with
// the decline code; processing, requires_action and anything else not yet
// final → pending, for the webhook to settle. A manual-capture one (a
// hold) reads as the sandbox's does: requires_capture → authorized until
// CaptureBefore; succeeded → succeeded, AmountCaptured what its capture
// took (amount_received); canceled after it was authorized → voided, with
// FailureCode domain.HoldLapsed when Stripe let it lapse; declined or
// cancelled before that → failed, as any.
func toCharge(pi *stripe.PaymentIntent) (domain.Charge, error) {
	if pi == nil || pi.ID == "" {
		return domain.Charge{}, fmt.Errorf("%w: stripe answered without a PaymentIntent", domain.ErrProviderUnavailable)
	}
	cur, err := domain.ParseCurrency(strings.ToUpper(string(pi.Currency)))
	if err != nil {
		return domain.Charge{}, fmt.Errorf("%w: payment intent %s: %w", domain.ErrProviderUnavailable, pi.ID, err)
	}
	manual := pi.CaptureMethod == stripe.PaymentIntentCaptureMethodManual
	ch := domain.Charge{
		ID: pi.ID, IdempotencyKey: pi.Metadata[MetaAttempt], OrderID: pi.Metadata[MetaOrder],
		Amount: fromStripeAmount(pi.Amount, cur), Currency: string(cur),
		RefundedAmount: fromStripeAmount(0, cur), CreatedAt: time.Unix(pi.Created, 0).UTC(),
		CaptureMethod: domain.CaptureAutomatic, AmountCaptured: fromStripeAmount(0, cur),
	}
	if manual {
		ch.CaptureMethod = domain.CaptureManual
	}
	if pi.PaymentMethod != nil {
		ch.PaymentMethod = pi.PaymentMethod.ID
	}
	if pi.LatestCharge != nil && pi.LatestCharge.AmountRefunded > 0 {
		ch.RefundedAmount = fromStripeAmount(pi.LatestCharge.AmountRefunded, cur)
	}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		ch.Status, ch.AmountCaptured = domain.ChargeSucceeded, ch.Amount
		if manual {
			ch.AmountCaptured = fromStripeAmount(pi.AmountReceived, cur)
			ch.RefundedAmount = fromStripeAmount(refundedOfHold(pi), cur)
		}
	case stripe.PaymentIntentStatusRequiresCapture:
		ch.Status = domain.ChargePending // an automatic one: not final, as ever
		if manual {
			ch.Status, ch.CaptureBefore = domain.ChargeAuthorized, captureBefore(pi)
		}
	case stripe.PaymentIntentStatusCanceled:
		ch.Status, ch.FailureCode = domain.ChargeFailed, failureCode(pi.LastPaymentError, "canceled")
		if manual && wasAuthorized(pi) {
			// Stripe counts a released hold as refunded on its charge:
			// payd's voided charge took nothing, so it refunded nothing.
			ch.Status, ch.FailureCode, ch.RefundedAmount = domain.ChargeVoided, "", fromStripeAmount(0, cur)
			if lapsed(pi) {
				ch.FailureCode = domain.HoldLapsed
			}
		}
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		// After a confirm, requires_payment_method means the attempt
		// failed (a decline, or 3-D Secure not passed): nothing was charged.
		ch.Status, ch.FailureCode = domain.ChargeFailed, failureCode(pi.LastPaymentError, "card_declined")
	case stripe.PaymentIntentStatusRequiresAction:
		ch.Status = domain.ChargePending
		ch.Action = &domain.CustomerAction{ClientSecret: pi.ClientSecret, Type: "use_stripe_sdk"}
		if na := pi.NextAction; na != nil {
			ch.Action.Type = string(na.Type)
			if na.RedirectToURL != nil {
				ch.Action.RedirectURL = na.RedirectToURL.URL
			}
		}
	default: // processing, requires_confirmation
		ch.Status = domain.ChargePending
	}
	return ch, nil
}

// captureBefore is when hold pi lapses: its charge's capture_before when
// Stripe shows it (the latest charge expanded), else HoldWindow after the
// PaymentIntent was created.
func captureBefore(pi *stripe.PaymentIntent) time.Time {
	if c := pi.LatestCharge; c != nil && c.PaymentMethodDetails != nil && c.PaymentMethodDetails.Card != nil &&
		c.PaymentMethodDetails.Card.CaptureBefore > 0 {
		return time.Unix(c.PaymentMethodDetails.Card.CaptureBefore, 0).UTC()
	}
	return time.Unix(pi.Created, 0).UTC().Add(HoldWindow)
}

// wasAuthorized reports whether manual PaymentIntent pi, canceled, had
// held money first. Its latest charge, expanded, says so: a hold's charge
// succeeded (uncaptured), a declined one failed. A bare charge id only
// shows that a charge was made: one without a payment error is taken
// for a hold (a PaymentIntent cancelled while awaiting 3-D Secure has no
// charge yet). A lapse happens only to a hold.
func wasAuthorized(pi *stripe.PaymentIntent) bool {
	switch c := pi.LatestCharge; {
	case lapsed(pi):
		return true
	case c == nil || c.ID == "":
		return false
	case c.Status != "":
		return c.Status == stripe.ChargeStatusSucceeded
	}
	return pi.LastPaymentError == nil
}

// lapsed reports whether Stripe cancelled pi itself: the reason it gives
// an authorization left uncaptured past capture_before is automatic
// (expired is taken the same way).
func lapsed(pi *stripe.PaymentIntent) bool {
	return pi.CancellationReason == stripe.PaymentIntentCancellationReasonAutomatic ||
		pi.CancellationReason == stripe.PaymentIntentCancellationReasonExpired
}

// refundedOfHold is what was refunded of captured hold pi: Stripe counts
// the part its capture released (amount − amount_received) among its
// charge's amount_refunded, and payd never took that part.
func refundedOfHold(pi *stripe.PaymentIntent) int64 {
	if pi.LatestCharge == nil {
		return 0
	}
	return max(pi.LatestCharge.AmountRefunded-(pi.Amount-pi.AmountReceived), 0)
}

// failureCode is the most specific reason Stripe gives: the issuer's
// decline code, else the error code, else def.
func failureCode(e *stripe.Error, def string) string {
	switch {
	case e == nil:
		return def
	case e.DeclineCode != "":
		return string(e.DeclineCode)
	case e.Code != "":
		return string(e.Code)
	}
	return def
}

func toRefund(r *stripe.Refund, paymentIntent string) (domain.ProviderRefund, error) {
	cur, err := domain.ParseCurrency(strings.ToUpper(string(r.Currency)))
	if err != nil {
		return domain.ProviderRefund{}, fmt.Errorf("%w: refund %s: %w", domain.ErrProviderUnavailable, r.ID, err)
	}
	out := domain.ProviderRefund{ID: r.ID, IdempotencyKey: r.Metadata[MetaRefund], ChargeID: paymentIntent,
		Amount: fromStripeAmount(r.Amount, cur), Currency: string(cur), CreatedAt: time.Unix(r.Created, 0).UTC()}
	switch {
	case r.PaymentIntent != nil && r.PaymentIntent.ID != "":
		out.ChargeID = r.PaymentIntent.ID
		out.OrderID = r.PaymentIntent.Metadata[MetaOrder] // when expanded
	case out.ChargeID == "" && r.Charge != nil:
		out.ChargeID = r.Charge.ID // not a PaymentIntent's: not one payd made
	}
	switch r.Status {
	case stripe.RefundStatusSucceeded:
		out.Status = domain.ChargeSucceeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		out.Status = domain.ChargeFailed
	default: // pending, requires_action
		out.Status = domain.ChargePending
	}
	return out, nil
}

// chargeOfCharge reads a Charge made without a PaymentIntent (not by
// payd, which always charges through one) in payd's terms, for FindCharge.
func chargeOfCharge(c *stripe.Charge) (domain.Charge, error) {
	cur, err := domain.ParseCurrency(strings.ToUpper(string(c.Currency)))
	if err != nil {
		return domain.Charge{}, fmt.Errorf("%w: charge %s: %w", domain.ErrProviderUnavailable, c.ID, err)
	}
	ch := domain.Charge{ID: c.ID, IdempotencyKey: c.Metadata[MetaAttempt], OrderID: c.Metadata[MetaOrder],
		Amount: fromStripeAmount(c.Amount, cur), Currency: string(cur), RefundedAmount: fromStripeAmount(c.AmountRefunded, cur),
		DisputedAmount: fromStripeAmount(0, cur), CreatedAt: time.Unix(c.Created, 0).UTC(),
		CaptureMethod: domain.CaptureAutomatic, AmountCaptured: fromStripeAmount(0, cur)}
	switch c.Status {
	case stripe.ChargeStatusSucceeded:
		ch.Status, ch.AmountCaptured = domain.ChargeSucceeded, ch.Amount
	case stripe.ChargeStatusFailed:
		ch.Status, ch.FailureCode = domain.ChargeFailed, c.FailureCode
	default:
		ch.Status = domain.ChargePending
	}
	return ch, nil
}

// toDisputeStatus reads a Stripe dispute's status as payd's: won and lost
// are themselves; warning_closed (an inquiry closed without becoming a
// chargeback) and prevented (a chargeback stopped before it was filed,
// the payment refunded instead, e.g. by Visa RDR) are closed with nothing
// lost to the dispute, which payd's machine calls won: no money was
// withdrawn for them, and a refund that prevented one is a refund of its
// own. Every other status (warning_needs_response, warning_under_review,
// needs_response, under_review, and any Stripe adds) is open.
func toDisputeStatus(s stripe.DisputeStatus) domain.DisputeStatus {
	switch s {
	case stripe.DisputeStatusWon, stripe.DisputeStatusWarningClosed, stripe.DisputeStatusPrevented:
		return domain.DisputeWon
	case stripe.DisputeStatusLost:
		return domain.DisputeLost
	}
	return domain.DisputeOpen
}

// fundsWithdrawn reports whether dispute d's money is out of the account:
// withdrawn and not given back. Its balance transactions say so (one
// withdrawal when the chargeback is filed, one reinstatement if it is
// won); an inquiry has none. Without them (never so at payd's API
// version) the status decides: a chargeback open or lost.
func fundsWithdrawn(d *stripe.Dispute) bool {
	if d.BalanceTransactions != nil {
		n := 0
		for _, bt := range d.BalanceTransactions {
			switch {
			case bt == nil:
			case bt.Amount < 0:
				n++
			case bt.Amount > 0:
				n--
			}
		}
		return n > 0
	}
	switch d.Status {
	case stripe.DisputeStatusNeedsResponse, stripe.DisputeStatusUnderReview, stripe.DisputeStatusLost:
		return true
	}
	return false
}

// toDispute reads a dispute in payd's terms. Its charge is the
// PaymentIntent's ID (payd's name for it), else the Charge's; the order
// and attempt come from the PaymentIntent's metadata when it is expanded,
// empty otherwise (a dispute has none of payd's). Stripe does not say when
// a dispute closed: a closed one's ClosedAt is now, when payd learns it.
func toDispute(d *stripe.Dispute, now time.Time) (domain.ProviderDispute, error) {
	cur, err := domain.ParseCurrency(strings.ToUpper(string(d.Currency)))
	if err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("%w: dispute %s: %w", domain.ErrProviderUnavailable, d.ID, err)
	}
	out := domain.ProviderDispute{ID: d.ID, Amount: fromStripeAmount(d.Amount, cur), Currency: string(cur),
		Status: toDisputeStatus(d.Status), Reason: string(d.Reason), CreatedAt: time.Unix(d.Created, 0).UTC()}
	switch {
	case d.PaymentIntent != nil && d.PaymentIntent.ID != "":
		out.ChargeID = d.PaymentIntent.ID
		out.IdempotencyKey, out.OrderID = d.PaymentIntent.Metadata[MetaAttempt], d.PaymentIntent.Metadata[MetaOrder]
	case d.Charge != nil:
		out.ChargeID = d.Charge.ID
	}
	if out.Status != domain.DisputeOpen {
		out.ClosedAt = now.UTC()
	}
	if d.EvidenceDetails != nil && d.EvidenceDetails.DueBy > 0 {
		out.EvidenceDueBy = time.Unix(d.EvidenceDetails.DueBy, 0).UTC()
	}
	return out, nil
}

// declineOr reads an error that carries the PaymentIntent (Stripe's 402
// for a decline, and any other) as that PaymentIntent's state: a decline is
// a failed Charge, but a PaymentIntent that succeeded, is processing or
// awaits 3-D Secure is reported as such, never as a refusal that would
// release the order. Any other error becomes payd's.
func declineOr(err error, what string) (domain.Charge, error) {
	var se *stripe.Error
	if errors.As(err, &se) && se.PaymentIntent != nil && se.PaymentIntent.ID != "" {
		ch, cerr := toCharge(se.PaymentIntent)
		if cerr == nil {
			if ch.Status == domain.ChargeFailed && se.PaymentIntent.LastPaymentError == nil {
				ch.FailureCode = failureCode(se, "card_declined")
			}
			return ch, nil
		}
	}
	return domain.Charge{}, wrap(err, what)
}

// wrap translates a stripe-go error into payd's: anything that leaves the
// outcome open (no reply, a 5xx, 429, a key still in use) wraps
// domain.ErrProviderUnavailable; Stripe's "no such object" wraps
// domain.ErrChargeNotFound; its other refusals are a
// *domain.ProviderRequestError with Stripe's code. No card data is kept:
// Stripe's message is safe, the request is not quoted.
func wrap(err error, what string) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return provider.MarkUnreachable(fmt.Errorf("%s: %w: %w", what, domain.ErrProviderUnavailable, err))
	}
	st := se.HTTPStatusCode
	switch {
	case st == 0, st >= 500, st == http.StatusTooManyRequests, st == http.StatusConflict, st == http.StatusRequestTimeout:
		return fmt.Errorf("%s: %w: stripe status %d %s", what, domain.ErrProviderUnavailable, st, se.Code)
	case se.Type == stripe.ErrorTypeIdempotency:
		return fmt.Errorf("%s: %w", what, &domain.ProviderRequestError{StatusCode: st, Code: "idempotency_key_reused", Message: se.Msg})
	case se.Code == stripe.ErrorCodeResourceMissing && se.Param == "payment_method":
		return fmt.Errorf("%s: %w", what, &domain.ProviderRequestError{StatusCode: st, Code: "unknown_payment_method", Message: se.Msg})
	case st == http.StatusNotFound || se.Code == stripe.ErrorCodeResourceMissing:
		return fmt.Errorf("%s: %w: %w", what, domain.ErrChargeNotFound, &domain.ProviderRequestError{StatusCode: st, Code: string(se.Code), Message: se.Msg})
	}
	code := string(se.Code)
	if code == "" {
		code = string(se.Type)
	}
	return fmt.Errorf("%s: %w", what, &domain.ProviderRequestError{StatusCode: st, Code: code, Message: se.Msg})
}
