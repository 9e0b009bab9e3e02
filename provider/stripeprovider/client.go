// Package stripeprovider is payd's adapter to Stripe: the same ports the
// sandbox's client serves (charge, ask, refund, list, webhook events, a
// hold's capture and void), spoken through stripe-go. A charge is a
// PaymentIntent created and confirmed at once under the attempt's ID as
// Idempotency-Key (ADR 0019); asking about an attempt retrieves its
// PaymentIntent by ID, or repeats the same create under the same key when
// the ID was never learned (ADR 0020). No stripe-go type escapes this
// package.
package stripeprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// Metadata keys payd writes on every PaymentIntent and Refund it creates.
const (
	MetaOrder   = "payd_order"
	MetaAttempt = "payd_attempt"
	MetaRefund  = "payd_refund"
	MetaReason  = "payd_reason"
)

// ReplayWindow is how long after an attempt was created payd still repeats
// its create under the same Idempotency-Key to learn the outcome. Stripe
// keeps keys for at least 24 hours; an hour of margin keeps payd clear of
// the edge (ADR 0020).
const ReplayWindow = 23 * time.Hour

// SearchLag is how long payd allows Stripe's search index to catch up with
// a write. A search miss sooner than this after the attempt's last possible
// replay (ReplayWindow after its creation) proves nothing and is reported
// as an unknown outcome, to be asked again (ADR 0020).
const SearchLag = 10 * time.Minute

// Config configures a Client.
type Config struct {
	SecretKey string // sk_test_… or sk_live_…
	// APIBase is Stripe's API root; empty means Stripe itself. Tests point
	// it at stripe-mock or the fake.
	APIBase string
	Timeout time.Duration // one call; domain.DefaultProviderTimeout when zero
	// HTTPClient, optional, carries the transport (the timeout still applies).
	HTTPClient *http.Client
	Now        func() time.Time
	// Skipped, optional, is told of each PaymentIntent ListCharges leaves
	// out because payd cannot read it (a currency payd does not take).
	Skipped func(id, reason string)
}

// Client is the Stripe adapter. It never logs (stripe-go's logger is
// silenced): every failure is returned, once, to the caller.
type Client struct {
	sc      *stripe.Client
	timeout time.Duration
	now     func() time.Time
	skipped func(id, reason string)
	// dashboard is the root of Stripe's dashboard for the key's mode:
	// a test key's records are under /test/.
	dashboard string
}

// New returns a Stripe client. A missing key is an error: nothing could be sent.
func New(cfg Config) (*Client, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripe: STRIPE_SECRET_KEY is required")
	}
	bc := &stripe.BackendConfig{
		HTTPClient:        cfg.HTTPClient,
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		MaxNetworkRetries: stripe.Int64(0), // payd asks before it sends again
		EnableTelemetry:   stripe.Bool(false),
	}
	if bc.HTTPClient == nil {
		bc.HTTPClient = &http.Client{Transport: provider.NewTransport()}
	}
	if cfg.APIBase != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	c := &Client{
		sc:        stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc))),
		timeout:   cfg.Timeout,
		now:       cfg.Now,
		skipped:   cfg.Skipped,
		dashboard: dashboardRoot(cfg.SecretKey),
	}
	if c.timeout <= 0 {
		c.timeout = domain.DefaultProviderTimeout
	}
	if c.now == nil {
		c.now = func() time.Time { return time.Now().UTC() }
	}
	return c, nil
}

// dashboardRoot is Stripe's dashboard for key's mode.
func dashboardRoot(key string) string {
	if strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_") {
		return "https://dashboard.stripe.com/test/"
	}
	return "https://dashboard.stripe.com/"
}

// DisputeURL is where an operator reads and answers dispute id in
// Stripe's dashboard.
func (c *Client) DisputeURL(id string) string {
	if id == "" {
		return ""
	}
	return c.dashboard + "disputes/" + url.PathEscape(id)
}

// Charge creates and confirms a PaymentIntent for req under
// req.IdempotencyKey. A decline is a Charge with Status failed and a nil
// error; a PaymentIntent that needs the customer (3-D Secure) or is still
// processing is a Charge with Status pending whose ID is the PaymentIntent's.
func (c *Client) Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error) {
	params, err := createParams(req)
	if err != nil {
		return domain.Charge{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pi, err := c.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return declineOr(err, "charge "+req.IdempotencyKey)
	}
	return toCharge(pi)
}

// GetCharge asks Stripe about attempt a, payd's record of it: by its
// PaymentIntent ID when payd stored one; otherwise by repeating the
// attempt's very create under the same key (its ID), which Stripe answers
// with the first result (or carries out, once, if it never arrived) — for
// an attempt still started or unknown only, and a first result still
// pending is followed by a retrieve of the PaymentIntent it names, since
// that result never changes (ADR 0052); otherwise, and past
// ReplayWindow, by a metadata search, which is eventually consistent
// (ADR 0020). domain.ErrChargeNotFound means Stripe has no PaymentIntent
// for the attempt. An attempt payd has no record of (no status: a key an
// event named) has none that payd created.
func (c *Client) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	idempotencyKey := a.ID
	if a.Status == "" {
		return domain.Charge{}, fmt.Errorf("get charge %s: %w: payd recorded no such attempt", idempotencyKey, domain.ErrChargeNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch {
	case a.ProviderChargeID != "":
		return c.retrieve(ctx, a.ID, a.ProviderChargeID)
	case a.Status.Unsettled() && c.now().Sub(a.CreatedAt) < ReplayWindow:
		// Only an attempt payd is still settling is replayed: one payd
		// settled (a refusal, a release) must never be charged by asking.
		ch, err := c.Charge(ctx, domain.ChargeRequest{IdempotencyKey: a.ID, OrderID: a.OrderID, Amount: a.Amount,
			Currency: string(a.Currency), PaymentMethod: a.PaymentMethod, CaptureMethod: a.CaptureMethod})
		if err != nil || ch.Status != domain.ChargePending {
			return ch, err
		}
		// Stripe answers a replayed key with the first response, as it
		// was: a PaymentIntent the create left processing or awaiting 3-D
		// Secure reads so in every replay, however it ended since. The
		// PaymentIntent it names is read as it is now (ADR 0052).
		return c.retrieve(ctx, a.ID, ch.ID)
	}
	return c.search(ctx, a)
}

// retrieve reads attempt's PaymentIntent id as it is now. Stripe named
// that id to payd: a 404 for it (another key's account, a wiped test
// account) does not mean it never charged. It is an unknown outcome, the
// attempt left for an operator (stuck_processing), never released to be
// paid again.
func (c *Client) retrieve(ctx context.Context, attempt, id string) (domain.Charge, error) {
	pi, err := c.sc.V1PaymentIntents.Retrieve(ctx, id, nil)
	if err != nil {
		if err = wrap(err, "get charge "+attempt); errors.Is(err, domain.ErrChargeNotFound) {
			return domain.Charge{}, fmt.Errorf("get charge %s: %w: stripe does not know payment intent %s",
				attempt, domain.ErrProviderUnavailable, id)
		}
		return domain.Charge{}, err
	}
	return toCharge(pi)
}

// search finds an attempt's PaymentIntent by metadata. Stripe's search
// index lags writes by up to about a minute; past ReplayWindow the create
// is a day old, so a miss means there is none.
func (c *Client) search(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	key := a.ID
	p := &stripe.PaymentIntentSearchParams{}
	p.Query = fmt.Sprintf("metadata['%s']:'%s'", MetaAttempt, key)
	for pi, err := range c.sc.V1PaymentIntents.Search(ctx, p) {
		if err != nil {
			return domain.Charge{}, wrap(err, "search charge "+key)
		}
		return toCharge(pi)
	}
	if a.Status.Unsettled() && c.now().Sub(a.CreatedAt) < ReplayWindow+SearchLag {
		// A replay sent just before the window closed may not be indexed
		// yet. (A settled attempt was never replayed: its miss stands.)
		return domain.Charge{}, fmt.Errorf("search charge %s: %w: not indexed yet, or none", key, domain.ErrProviderUnavailable)
	}
	return domain.Charge{}, fmt.Errorf("search charge %s: %w", key, domain.ErrChargeNotFound)
}

// Refund refunds req.Amount of the PaymentIntent req.ChargeID through the
// Refunds API, at most once per req.IdempotencyKey (its own key, never the
// charge's).
func (c *Client) Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error) {
	cur, err := domain.ParseCurrency(req.Currency)
	if err != nil {
		return domain.ProviderRefund{}, err
	}
	amount, err := toStripeAmount(req.Amount, cur)
	if err != nil {
		return domain.ProviderRefund{}, err
	}
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(req.ChargeID), Amount: stripe.Int64(amount)}
	p.AddMetadata(MetaRefund, req.IdempotencyKey)
	if req.Reason != "" {
		p.AddMetadata(MetaReason, truncate(req.Reason, 500))
	}
	p.SetIdempotencyKey(req.IdempotencyKey)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.sc.V1Refunds.Create(ctx, p)
	if err != nil {
		return domain.ProviderRefund{}, wrap(err, "refund "+req.IdempotencyKey)
	}
	return toRefund(r, req.ChargeID)
}

// CancelCharge cancels the PaymentIntent chargeID of attempt a, under its
// own Idempotency-Key ("<attempt>:cancel"), so that a browser still
// holding its client_secret can no longer confirm it (ADR 0019). The
// answer is the PaymentIntent's state: failed once cancelled (voided, a
// hold that had been authorized); a PaymentIntent Stripe will not cancel
// because it succeeded (or is processing) is reported as such, for payd
// to settle by it.
func (c *Client) CancelCharge(ctx context.Context, a domain.Attempt, chargeID string) (domain.Charge, error) {
	p := &stripe.PaymentIntentCancelParams{}
	if a.CaptureMethod == domain.CaptureManual {
		// Its latest charge tells a hold given up (voided) from one
		// that never held anything (failed).
		p.AddExpand("latest_charge")
	}
	p.SetIdempotencyKey(a.ID + ":cancel")
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pi, err := c.sc.V1PaymentIntents.Cancel(ctx, chargeID, p)
	if err != nil {
		// Stripe's refusal to cancel carries the PaymentIntent: its state
		// (already canceled, succeeded, processing) is the answer.
		ch, err := declineOr(err, "cancel charge "+a.ID)
		if errors.Is(err, domain.ErrChargeNotFound) {
			return domain.Charge{}, fmt.Errorf("cancel charge %s: %w: stripe does not know %s", a.ID, domain.ErrProviderUnavailable, chargeID)
		}
		return ch, err
	}
	return toCharge(pi)
}

// GetRefund asks Stripe about a refund it answered before (pending), by
// its ID. A 404 for an ID Stripe gave payd proves nothing: an unknown
// outcome, asked again later.
func (c *Client) GetRefund(ctx context.Context, providerRefundID string) (domain.ProviderRefund, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.sc.V1Refunds.Retrieve(ctx, providerRefundID, nil)
	if err != nil {
		if err = wrap(err, "get refund "+providerRefundID); errors.Is(err, domain.ErrChargeNotFound) {
			return domain.ProviderRefund{}, fmt.Errorf("get refund %s: %w: stripe does not know it", providerRefundID, domain.ErrProviderUnavailable)
		}
		return domain.ProviderRefund{}, err
	}
	return toRefund(r, "")
}

// chargePage is how many PaymentIntents a page of ListCharges holds:
// Stripe's largest list page.
const chargePage = 100

// ListCharges returns one page of the PaymentIntents created in [from,
// to), newest first as Stripe lists them, after the one with ID after
// ("": from the newest). Stripe's created is in whole seconds.
func (c *Client) ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error) {
	p := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: from.Unix(), LesserThan: ceilUnix(to)}}
	p.Limit = stripe.Int64(chargePage)
	if after != "" {
		p.StartingAfter = stripe.String(after)
	}
	var page domain.ChargePage
	seen := 0
	for pi, err := range c.sc.V1PaymentIntents.List(ctx, p) {
		if err != nil {
			return domain.ChargePage{}, wrap(err, "list charges")
		}
		seen++
		page.Next = pi.ID // the cursor moves over what is left out too
		ch, err := toCharge(pi)
		var ve *domain.ValidationError
		switch {
		case errors.As(err, &ve) && ve.Field == "currency":
			// Not payd's money (another integration on the account): one
			// such PaymentIntent must not abort the whole run.
			if c.skipped != nil {
				c.skipped(pi.ID, fmt.Sprintf("currency %q is not one payd takes", pi.Currency))
			}
		case err != nil:
			return domain.ChargePage{}, fmt.Errorf("list charges: %w", err)
		case !ch.CreatedAt.Before(from) && ch.CreatedAt.Before(to):
			page.Charges = append(page.Charges, ch)
		}
		if seen == chargePage {
			return page, nil // the iterator would fetch the next page: that is the next call's
		}
	}
	page.Next = "" // Stripe had no more
	return page, nil
}

func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
