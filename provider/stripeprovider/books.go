package stripeprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/domain"
)

// FindCharge returns Stripe's record of the charge payd knows as chargeID:
// a PaymentIntent ID, as payd stores it for every Stripe charge, or a
// Charge ID (ch_…, py_…), as a settlement file or a dispute of a charge
// without a PaymentIntent may name it. The answer carries the order and
// attempt payd wrote in the PaymentIntent's metadata, the amount, what is
// refunded and what disputes withdrew and did not give back. Its ID is the
// PaymentIntent's whenever there is one, the ID payd refunds by. An ID
// Stripe does not know is domain.ErrChargeNotFound.
func (c *Client) FindCharge(ctx context.Context, chargeID string) (domain.Charge, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if isChargeID(chargeID) {
		p := &stripe.ChargeRetrieveParams{}
		p.AddExpand("payment_intent")
		ch, err := c.sc.V1Charges.Retrieve(ctx, chargeID, p)
		if err != nil {
			return domain.Charge{}, wrap(err, "find charge "+chargeID)
		}
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			// The PaymentIntent holds payd's metadata, and its latest
			// charge is the one that took the money.
			return c.findPaymentIntent(ctx, ch.PaymentIntent.ID)
		}
		out, err := chargeOfCharge(ch)
		if err != nil || !ch.Disputed {
			return out, err
		}
		return c.disputedOf(ctx, out, &stripe.DisputeListParams{Charge: stripe.String(ch.ID)})
	}
	return c.findPaymentIntent(ctx, chargeID)
}

// isChargeID reports whether id names a Charge rather than a PaymentIntent.
func isChargeID(id string) bool {
	return strings.HasPrefix(id, "ch_") || strings.HasPrefix(id, "py_")
}

func (c *Client) findPaymentIntent(ctx context.Context, id string) (domain.Charge, error) {
	p := &stripe.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	pi, err := c.sc.V1PaymentIntents.Retrieve(ctx, id, p)
	if err != nil {
		return domain.Charge{}, wrap(err, "find charge "+id)
	}
	ch, err := toCharge(pi)
	if err != nil {
		return domain.Charge{}, fmt.Errorf("find charge %s: %w", id, err)
	}
	ch.DisputedAmount = fromStripeAmount(0, domain.Currency(ch.Currency))
	if pi.LatestCharge == nil || !pi.LatestCharge.Disputed {
		return ch, nil
	}
	return c.disputedOf(ctx, ch, &stripe.DisputeListParams{PaymentIntent: stripe.String(pi.ID)})
}

// disputedOf sets ch.DisputedAmount: the amount of each dispute of the
// charge whose money is out of the account (withdrawn and not reinstated).
func (c *Client) disputedOf(ctx context.Context, ch domain.Charge, p *stripe.DisputeListParams) (domain.Charge, error) {
	p.Limit = stripe.Int64(100)
	cur := domain.Currency(ch.Currency)
	for d, err := range c.sc.V1Disputes.List(ctx, p) {
		if err != nil {
			return domain.Charge{}, wrap(err, "find charge "+ch.ID+": list its disputes")
		}
		if !fundsWithdrawn(d) {
			continue
		}
		if !strings.EqualFold(string(d.Currency), ch.Currency) {
			return domain.Charge{}, fmt.Errorf("find charge %s: %w: dispute %s is in %s, the charge in %s",
				ch.ID, domain.ErrProviderUnavailable, d.ID, d.Currency, ch.Currency)
		}
		ch.DisputedAmount = ch.DisputedAmount.Add(fromStripeAmount(d.Amount, cur))
	}
	return ch, nil
}

// ListRefunds returns every refund created on the account in [from, to),
// oldest first, following Stripe's pagination to the end, whatever its
// status and whoever made it. ChargeID is the PaymentIntent's ID (payd's
// name for the charge), OrderID the payd_order payd wrote on it, and
// IdempotencyKey payd's refund key (metadata payd_refund) for a refund
// payd made, empty for one made elsewhere (the Dashboard): Stripe does not
// show the Idempotency-Key a request carried.
//
// The Refunds API is the source rather than balance transactions: a
// refund is listed from its creation, pending and failed ones too, in the
// charge's currency and Stripe's integer amounts, with its own metadata;
// a balance transaction is in the account's settlement currency (converted
// for a charge in another), appears only once the money moved, and names
// the refund only as its source.
func (c *Client) ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error) {
	p := &stripe.RefundListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: from.Unix(), LesserThan: ceilUnix(to)}}
	p.Limit = stripe.Int64(100)
	p.AddExpand("data.payment_intent")
	var out []domain.ProviderRefund
	for r, err := range c.sc.V1Refunds.List(ctx, p) {
		if err != nil {
			return nil, wrap(err, "list refunds")
		}
		pr, err := toRefund(r, "")
		if c.skip(r.ID, string(r.Currency), err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list refunds: %w", err)
		}
		if pr.CreatedAt.Before(from) || !pr.CreatedAt.Before(to) {
			continue
		}
		out = append(out, pr)
	}
	reverse(out) // Stripe lists newest first; payd reads oldest first
	return out, nil
}

// ListDisputes returns every dispute opened on the account in [from, to),
// oldest first, following Stripe's pagination to the end, in payd's terms
// (toDispute): its charge as payd names it (the PaymentIntent), the order
// and attempt from the PaymentIntent's metadata, open, won or lost.
func (c *Client) ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error) {
	p := &stripe.DisputeListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: from.Unix(), LesserThan: ceilUnix(to)}}
	p.Limit = stripe.Int64(100)
	p.AddExpand("data.payment_intent")
	var out []domain.ProviderDispute
	for d, err := range c.sc.V1Disputes.List(ctx, p) {
		if err != nil {
			return nil, wrap(err, "list disputes")
		}
		pd, err := toDispute(d, c.now())
		if c.skip(d.ID, string(d.Currency), err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list disputes: %w", err)
		}
		if pd.CreatedAt.Before(from) || !pd.CreatedAt.Before(to) {
			continue
		}
		out = append(out, pd)
	}
	reverse(out)
	return out, nil
}

// FindDispute returns Stripe's record of one dispute by its id, as it
// stands now, in payd's terms exactly as ListDisputes gives it (toDispute).
// An id Stripe does not know is domain.ErrDisputeNotFound.
func (c *Client) FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	p := &stripe.DisputeRetrieveParams{}
	p.AddExpand("payment_intent")
	d, err := c.sc.V1Disputes.Retrieve(ctx, id, p)
	if err != nil {
		return domain.ProviderDispute{}, wrapDispute(err, "find dispute "+id)
	}
	pd, err := toDispute(d, c.now())
	if err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("find dispute %s: %w", id, err)
	}
	return pd, nil
}

// wrapDispute is wrap for a lookup of a dispute: Stripe's 404 says there is
// no such dispute, not no such charge.
func wrapDispute(err error, what string) error {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %w: %w", what, domain.ErrDisputeNotFound,
			&domain.ProviderRequestError{StatusCode: se.HTTPStatusCode, Code: string(se.Code), Message: se.Msg})
	}
	return wrap(err, what)
}

// skip reports whether err says an object is in a currency payd does not
// take (another integration's money on the account), telling Skipped: one
// such object must not abort a whole listing.
func (c *Client) skip(id, currency string, err error) bool {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != "currency" {
		return false
	}
	if c.skipped != nil {
		c.skipped(id, fmt.Sprintf("currency %q is not one payd takes", currency))
	}
	return true
}
