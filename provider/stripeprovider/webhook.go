package stripeprovider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/payd/payd/domain"
)

// Tolerance is how old a Stripe-Signature timestamp may be: Stripe's
// default, and the same five minutes payd grants its sandbox's webhooks.
const Tolerance = webhook.DefaultTolerance

// The Stripe event types payd reads; every other type is stored and ignored.
const (
	typePISucceeded     = "payment_intent.succeeded"
	typePIFailed        = "payment_intent.payment_failed"
	typePIRequiresActon = "payment_intent.requires_action"
	// A hold's: authorized, then captured or cancelled (voided, or lapsed).
	typePICapturable    = "payment_intent.amount_capturable_updated"
	typePICanceled      = "payment_intent.canceled"
	typeChargeCaptured  = "charge.captured"
	typeChargeRefunded  = "charge.refunded"
	typeRefundCreated   = "refund.created"
	typeRefundUpdated   = "refund.updated"
	typeRefundFailed    = "refund.failed"
	typeDisputeCreated  = "charge.dispute.created"
	typeDisputeUpdated  = "charge.dispute.updated"
	typeDisputeClosed   = "charge.dispute.closed"
	typeDisputeWithdraw = "charge.dispute.funds_withdrawn"
	typeDisputeReinstat = "charge.dispute.funds_reinstated"
)

// disputeEvents maps Stripe's dispute event types to payd's.
var disputeEvents = map[string]domain.ProviderEventType{
	typeDisputeCreated:  domain.EventDisputeCreated,
	typeDisputeUpdated:  domain.EventDisputeUpdated,
	typeDisputeClosed:   domain.EventDisputeClosed,
	typeDisputeWithdraw: domain.EventDisputeFundsWithdrawn,
	typeDisputeReinstat: domain.EventDisputeFundsReinstated,
}

// Webhooks verifies and reads Stripe's events.
type Webhooks struct {
	c       *Client
	secrets []string
	now     func() time.Time
}

// Webhooks returns the verifier of events signed with any of secrets
// (whsec_…, separated by spaces or commas, so one can be rotated). No
// secret is an error: an unverified event must never move money.
func (c *Client) Webhooks(secrets string) (*Webhooks, error) {
	w := &Webhooks{c: c, now: c.now, secrets: strings.FieldsFunc(secrets, func(r rune) bool { return r == ' ' || r == ',' })}
	if len(w.secrets) == 0 {
		return nil, errors.New("stripe: STRIPE_WEBHOOK_SECRET is required")
	}
	return w, nil
}

// Parse verifies body against the Stripe-Signature header with stripe-go
// (HMAC, timestamp within Tolerance) and reads it into payd's terms. The
// ID it returns is Stripe's event ID, the inbox's dedupe key: Stripe
// resends one event under one ID. A bad signature is
// domain.ErrInvalidSignature. When the event was rendered for another API
// version than stripe-go's, or its object does not read, the object is
// fetched fresh from the API rather than guessed at.
func (w *Webhooks) Parse(ctx context.Context, body []byte, sigHeader string) (string, domain.ProviderEvent, error) {
	id, pe, _, err := w.ParseStored(ctx, body, sigHeader)
	return id, pe, err
}

// ParseStored is Parse that also returns the body as payd should store and
// show it: a PaymentIntent's client_secret (which can complete the
// payment) is replaced by "redacted"; everything else is as received.
func (w *Webhooks) ParseStored(ctx context.Context, body []byte, sigHeader string) (string, domain.ProviderEvent, []byte, error) {
	id, pe, err := w.parse(ctx, body, sigHeader)
	if err != nil {
		return "", domain.ProviderEvent{}, nil, err
	}
	return id, pe, redact(body), nil
}

// redact removes data.object.client_secret from an event body; a body it
// cannot rewrite is returned as is.
func redact(body []byte) []byte {
	var ev map[string]json.RawMessage
	if json.Unmarshal(body, &ev) != nil {
		return body
	}
	var data map[string]json.RawMessage
	if json.Unmarshal(ev["data"], &data) != nil {
		return body
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data["object"], &obj) != nil {
		return body
	}
	if _, ok := obj["client_secret"]; !ok {
		return body
	}
	obj["client_secret"] = json.RawMessage(`"redacted"`)
	var err error
	if data["object"], err = json.Marshal(obj); err != nil {
		return body
	}
	if ev["data"], err = json.Marshal(data); err != nil {
		return body
	}
	out, err := json.Marshal(ev)
	if err != nil {
		return body
	}
	return out
}

func (w *Webhooks) parse(ctx context.Context, body []byte, sigHeader string) (string, domain.ProviderEvent, error) {
	ev, err := w.verify(body, sigHeader)
	if err != nil {
		return "", domain.ProviderEvent{}, err
	}
	if len(ev.ID) > 255 || len(ev.Type) > 64 {
		return "", domain.ProviderEvent{}, &domain.ValidationError{Field: "id", Reason: "event id or type too long"}
	}
	pe := domain.ProviderEvent{ID: ev.ID, Type: domain.ProviderEventType(ev.Type), CreatedAt: time.Unix(ev.Created, 0).UTC()}
	fresh := ev.APIVersion != stripe.APIVersion
	switch string(ev.Type) {
	case typePISucceeded, typePIFailed, typePIRequiresActon, typePICapturable:
		err = w.paymentIntent(ctx, ev, fresh, &pe)
	case typePICanceled:
		// Only a hold's cancel means something to payd (a void); any
		// other is stored and ignored as it always was, unread.
		if manualObject(ev) {
			err = w.canceledHold(ctx, ev, &pe)
		}
	case typeChargeCaptured:
		err = w.chargeCaptured(ctx, ev, &pe)
	case typeChargeRefunded:
		err = w.chargeRefunded(ctx, ev, &pe)
	case typeRefundCreated, typeRefundUpdated, typeRefundFailed:
		err = w.refund(ctx, ev, fresh, &pe)
	case typeDisputeCreated, typeDisputeUpdated, typeDisputeClosed, typeDisputeWithdraw, typeDisputeReinstat:
		err = w.dispute(ctx, ev, fresh, &pe)
	}
	if unreadable(err) {
		// Stripe has no such object on this account, or it is in a
		// currency payd does not take: no delivery will ever read better,
		// so the event is stored and ignored (200), not refused forever.
		return ev.ID, domain.ProviderEvent{ID: ev.ID, Type: notApplied(string(ev.Type)), CreatedAt: pe.CreatedAt}, nil
	}
	if err != nil {
		return "", domain.ProviderEvent{}, err
	}
	return ev.ID, pe, nil
}

// unreadable reports whether err means an event's object can never be
// read: Stripe answered 404 for it, or its currency is not one payd takes.
func unreadable(err error) bool {
	var ve *domain.ValidationError
	return errors.Is(err, domain.ErrChargeNotFound) || (errors.As(err, &ve) && ve.Field == "currency")
}

// notApplied is Stripe's event type as stored when payd does not apply the
// event: never one of payd's own names.
func notApplied(typ string) domain.ProviderEventType {
	if domain.ProviderEventType(typ).Known() {
		return domain.ProviderEventType("stripe." + typ)
	}
	return domain.ProviderEventType(typ)
}

func (w *Webhooks) verify(body []byte, header string) (stripe.Event, error) {
	opts := webhook.ConstructEventOptions{Tolerance: Tolerance, IgnoreAPIVersionMismatch: true}
	for _, s := range w.secrets {
		ev, err := webhook.ConstructEventWithOptions(body, header, s, opts)
		if err == nil {
			return ev, nil
		}
		if !errors.Is(err, webhook.ErrNoValidSignature) && !errors.Is(err, webhook.ErrNotSigned) &&
			!errors.Is(err, webhook.ErrInvalidHeader) && !errors.Is(err, webhook.ErrTooOld) {
			return stripe.Event{}, &domain.ValidationError{Field: "body", Reason: "is not a Stripe event"}
		}
	}
	return stripe.Event{}, domain.ErrInvalidSignature
}

// objectID is the id of the event's object, readable whatever its version.
func objectID(ev stripe.Event) string {
	if ev.Data == nil {
		return ""
	}
	id, _ := ev.Data.Object["id"].(string)
	return id
}

// decode reads the event's object into v; false when it does not read.
func decode(ev stripe.Event, v any) bool {
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return false
	}
	return json.Unmarshal(ev.Data.Raw, v) == nil
}

func (w *Webhooks) paymentIntent(ctx context.Context, ev stripe.Event, fresh bool, pe *domain.ProviderEvent) error {
	var pi stripe.PaymentIntent
	if fresh || !decode(ev, &pi) || pi.ID == "" || pi.Currency == "" {
		got, err := w.fetchPI(ctx, objectID(ev))
		if err != nil {
			return err
		}
		pi = *got
	}
	ch, err := toCharge(&pi)
	if err != nil {
		return err
	}
	paymentInto(ch, pe)
	switch string(ev.Type) {
	case typePISucceeded:
		pe.Type, pe.Status = domain.EventPaymentSucceeded, domain.ChargeSucceeded
		if ch.CaptureMethod == domain.CaptureManual {
			// A hold succeeds by its capture: the sandbox's
			// payment.captured (as charge.captured), never a
			// payment.succeeded of the whole amount.
			pe.Type = domain.EventPaymentCaptured
		}
	case typePIFailed:
		pe.Type, pe.Status = domain.EventPaymentFailed, domain.ChargeFailed
		pe.FailureCode = failureCode(pi.LastPaymentError, "card_declined")
	case typePICapturable:
		pe.Type, pe.Status = domain.EventPaymentAuthorized, domain.ChargeAuthorized
	}
	// payment_intent.requires_action keeps its own type: the attempt is
	// already unknown and the payment waits for the customer; it is stored
	// and ignored, and the success or failure that follows settles it.
	return nil
}

// paymentInto copies a payment event's references and money from ch.
func paymentInto(ch domain.Charge, pe *domain.ProviderEvent) {
	pe.ChargeID, pe.IdempotencyKey, pe.OrderID = ch.ID, ch.IdempotencyKey, ch.OrderID
	pe.Amount, pe.AmountText, pe.Currency = ch.Amount, domain.FormatAmount(ch.Amount, domain.Currency(ch.Currency)), ch.Currency
}

// fetchPI retrieves PaymentIntent id, with the fields expand names
// expanded.
func (w *Webhooks) fetchPI(ctx context.Context, id string, expand ...string) (*stripe.PaymentIntent, error) {
	if id == "" {
		return nil, &domain.ValidationError{Field: "data.object.id", Reason: "is required"}
	}
	ctx, cancel := context.WithTimeout(ctx, w.c.timeout)
	defer cancel()
	var p *stripe.PaymentIntentRetrieveParams
	if len(expand) > 0 {
		p = &stripe.PaymentIntentRetrieveParams{}
		for _, f := range expand {
			p.AddExpand(f)
		}
	}
	pi, err := w.c.sc.V1PaymentIntents.Retrieve(ctx, id, p)
	if err != nil {
		return nil, wrap(err, "fetch payment intent "+id)
	}
	return pi, nil
}

// manualObject reports whether the event's object says capture_method
// manual, readable whatever its version.
func manualObject(ev stripe.Event) bool {
	if ev.Data == nil {
		return false
	}
	m, _ := ev.Data.Object["capture_method"].(string)
	return m == string(stripe.PaymentIntentCaptureMethodManual)
}

// canceledHold reads payment_intent.canceled of a manual PaymentIntent.
// One that had been authorized is a payment.voided (FailureCode
// domain.HoldLapsed when Stripe let it lapse). The event cannot show
// that (its latest_charge is an id), so the PaymentIntent is fetched with
// its latest charge; cancelled, it no longer changes. One cancelled
// before it held anything keeps Stripe's type, stored and ignored.
func (w *Webhooks) canceledHold(ctx context.Context, ev stripe.Event, pe *domain.ProviderEvent) error {
	pi, err := w.fetchPI(ctx, objectID(ev), "latest_charge")
	if err != nil {
		return err
	}
	ch, err := toCharge(pi)
	if err != nil || ch.Status != domain.ChargeVoided {
		return err
	}
	paymentInto(ch, pe)
	pe.Type, pe.Status, pe.FailureCode = domain.EventPaymentVoided, domain.ChargeVoided, ch.FailureCode
	return nil
}

// chargeCaptured reads charge.captured, a hold's capture, as
// payment.captured. A Charge carries none of payd's metadata: its
// PaymentIntent (payd's name for the charge) is fetched for it. A charge
// without one is not payd's: it keeps Stripe's type, stored and ignored.
func (w *Webhooks) chargeCaptured(ctx context.Context, ev stripe.Event, pe *domain.ProviderEvent) error {
	chargeID := objectID(ev)
	if chargeID == "" {
		return &domain.ValidationError{Field: "data.object.id", Reason: "is required"}
	}
	var piID string
	switch ref := ev.Data.Object["payment_intent"].(type) {
	case string:
		piID = ref
	case map[string]any: // expanded
		piID, _ = ref["id"].(string)
	}
	if piID == "" {
		pe.ChargeID = chargeID
		return nil
	}
	pi, err := w.fetchPI(ctx, piID)
	if err != nil {
		return err
	}
	ch, err := toCharge(pi)
	if err != nil {
		return err
	}
	paymentInto(ch, pe)
	pe.Type, pe.Status = domain.EventPaymentCaptured, domain.ChargeSucceeded
	return nil
}

// chargeRefunded reads charge.refunded. Since API version 2022-11-15 the
// charge no longer lists its refunds, so the charge's newest refund is
// fetched; refund.updated names its refund exactly and is the better event
// to subscribe to (README).
func (w *Webhooks) chargeRefunded(ctx context.Context, ev stripe.Event, pe *domain.ProviderEvent) error {
	chargeID := objectID(ev)
	if chargeID == "" {
		return &domain.ValidationError{Field: "data.object.id", Reason: "is required"}
	}
	ctx, cancel := context.WithTimeout(ctx, w.c.timeout)
	defer cancel()
	p := &stripe.RefundListParams{Charge: stripe.String(chargeID)}
	p.Limit = stripe.Int64(1)
	p.AddExpand("data.payment_intent") // the order, for a refund made elsewhere
	for r, err := range w.c.sc.V1Refunds.List(ctx, p) {
		if err != nil {
			return wrap(err, "list refunds of "+chargeID)
		}
		return w.refundInto(ctx, r, pe)
	}
	pe.ChargeID = chargeID // nothing to confirm: stored and ignored
	pe.Type = domain.ProviderEventType(typeChargeRefunded)
	return nil
}

func (w *Webhooks) refund(ctx context.Context, ev stripe.Event, fresh bool, pe *domain.ProviderEvent) error {
	var r stripe.Refund
	if fresh || !decode(ev, &r) || r.ID == "" || r.Currency == "" {
		id := objectID(ev)
		if id == "" {
			return &domain.ValidationError{Field: "data.object.id", Reason: "is required"}
		}
		ctx, cancel := context.WithTimeout(ctx, w.c.timeout)
		defer cancel()
		p := &stripe.RefundRetrieveParams{}
		p.AddExpand("payment_intent")
		got, err := w.c.sc.V1Refunds.Retrieve(ctx, id, p)
		if err != nil {
			return wrap(err, "fetch refund "+id)
		}
		r = *got
	}
	return w.refundInto(ctx, &r, pe)
}

// refundInto makes a succeeded refund a refund.succeeded and a failed or
// cancelled one a refund.failed (payd's own: its reservation given back,
// or its money taken back if it had succeeded; one made elsewhere: taken
// back if payd had booked it); any other (pending) is stored and ignored. IdempotencyKey is payd's refund key (metadata payd_refund)
// for a refund payd made and empty for one made elsewhere (the Dashboard),
// which is how payd tells an outside refund from its own. For an outside
// refund the PaymentIntent is looked up for the order payd wrote on it.
func (w *Webhooks) refundInto(ctx context.Context, r *stripe.Refund, pe *domain.ProviderEvent) error {
	pr, err := toRefund(r, "")
	if err != nil {
		return err
	}
	pe.RefundID, pe.ChargeID, pe.IdempotencyKey, pe.OrderID = pr.ID, pr.ChargeID, pr.IdempotencyKey, pr.OrderID
	if pr.Status == domain.ChargeFailed {
		// payd's own refund that failed (pending, or taken back after it
		// succeeded), or one made elsewhere that failed: payd decides
		// whether it counted it (an outside refund it booked) and asks
		// Stripe before it takes anything back.
		pe.Type, pe.Status = domain.EventRefundFailed, domain.ChargeFailed
		return nil
	}
	if pr.Status != domain.ChargeSucceeded {
		if pe.Type == domain.EventRefundFailed {
			// Stripe's refund.failed shares payd's name: one payd will not
			// apply (not its refund, or no longer failed) is renamed so it
			// is stored and ignored.
			pe.Type = domain.ProviderEventType("stripe." + typeRefundFailed)
		}
		return nil
	}
	if pr.IdempotencyKey == "" && pe.OrderID == "" && r.PaymentIntent != nil && r.PaymentIntent.ID != "" {
		pi, err := w.fetchPI(ctx, r.PaymentIntent.ID)
		switch {
		case err == nil:
			pe.OrderID = pi.Metadata[MetaOrder]
		case !unreadable(err):
			return err
		}
	}
	pe.Type, pe.Status = domain.EventRefundSucceeded, domain.ChargeSucceeded
	pe.Amount, pe.AmountText, pe.Currency = pr.Amount, domain.FormatAmount(pr.Amount, domain.Currency(pr.Currency)), pr.Currency
	return nil
}

// dispute reads the charge.dispute.* events: created, updated, closed,
// funds_withdrawn and funds_reinstated. DisputeID is Stripe's dispute
// (also the event's ID, the disputed discrepancy's reference), ChargeID
// the PaymentIntent's ID (payd's name for the charge), else the Charge's;
// DisputeStatus the dispute's status as payd reads it (toDisputeStatus:
// won or lost once closed, an inquiry closed without a chargeback counting
// as won, open before). A dispute carries none of payd's metadata: the
// order and attempt are read from its PaymentIntent, and left empty when
// Stripe has none to show. The amount is the dispute's, in the charge's
// currency; whether money moved is the event's type, and FindCharge's
// DisputedAmount.
func (w *Webhooks) dispute(ctx context.Context, ev stripe.Event, fresh bool, pe *domain.ProviderEvent) error {
	var d stripe.Dispute
	if fresh || !decode(ev, &d) || d.ID == "" || d.Status == "" {
		id := objectID(ev)
		if id == "" {
			return &domain.ValidationError{Field: "data.object.id", Reason: "is required"}
		}
		ctx, cancel := context.WithTimeout(ctx, w.c.timeout)
		defer cancel()
		p := &stripe.DisputeRetrieveParams{}
		p.AddExpand("payment_intent")
		got, err := w.c.sc.V1Disputes.Retrieve(ctx, id, p)
		if err != nil {
			return wrap(err, "fetch dispute "+id)
		}
		d = *got
	}
	pe.Type, pe.RefundID = disputeEvents[string(ev.Type)], ""
	pe.ID, pe.DisputeID = d.ID, d.ID
	pe.DisputeStatus = toDisputeStatus(d.Status)
	pe.Reason, pe.FailureCode = string(d.Reason), string(d.Reason)
	switch {
	case d.PaymentIntent != nil && d.PaymentIntent.ID != "":
		pe.ChargeID = d.PaymentIntent.ID
		meta := d.PaymentIntent.Metadata
		if meta == nil {
			pi, err := w.fetchPI(ctx, d.PaymentIntent.ID)
			if err != nil && !unreadable(err) {
				return err
			}
			if err == nil {
				meta = pi.Metadata
			}
		}
		pe.IdempotencyKey, pe.OrderID = meta[MetaAttempt], meta[MetaOrder]
	case d.Charge != nil:
		pe.ChargeID = d.Charge.ID
	}
	if cur, err := domain.ParseCurrency(strings.ToUpper(string(d.Currency))); err == nil {
		pe.Amount, pe.Currency = fromStripeAmount(d.Amount, cur), string(cur)
		pe.AmountText = domain.FormatAmount(pe.Amount, cur)
	} else {
		pe.Currency = string(d.Currency) // as written; AmountText empty: not money payd reads
	}
	return nil
}
