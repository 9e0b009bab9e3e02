package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// DefaultTimeout bounds one call to the provider unless WithTimeout says
// otherwise. Past it the outcome is unknown and the caller must ask again.
const DefaultTimeout = domain.DefaultProviderTimeout

// maxReplyBytes caps how much of a reply is read: the provider's answers are
// small, and an endless body must not hold a pay request hostage.
const maxReplyBytes = 4 << 20

// Client speaks the provider's HTTP API (the sandbox's wire
// format). It never logs: every failure is returned, once, to the caller.
type Client struct {
	base    string
	hc      *http.Client
	timeout time.Duration
	err     error // a bad base URL, reported by every call
}

// MaxIdleConnsPerHost is how many idle connections to the provider a
// Transport keeps for reuse. net/http's default is 2: with more pays than
// that in flight, nearly every charge dialled a new connection (over TLS,
// with a handshake), and closed it after.
const MaxIdleConnsPerHost = 64

// NewTransport returns the HTTP transport a Client uses unless given
// another: net/http's default transport keeping MaxIdleConnsPerHost idle
// connections per host. Wrap it (tracing) rather than
// http.DefaultTransport.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}

// defaultHTTPClient is shared by Clients made without WithHTTPClient, so
// they share one pool of connections.
var defaultHTTPClient = &http.Client{Transport: NewTransport()}

// Option configures a Client.
type Option func(*Client)

// WithTimeout bounds each call (default DefaultTimeout). A call that runs
// out of time fails with domain.ErrProviderUnavailable.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithHTTPClient makes the client send through hc (its transport, TLS and
// proxy settings); the per-call timeout still applies.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// NewClient returns a client for the provider API at baseURL, such as
// "http://127.0.0.1:8081". A malformed baseURL is reported by Err and by
// every call (as a plain error: nothing was sent, so nothing is unknown).
func NewClient(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: defaultHTTPClient, timeout: DefaultTimeout}
	if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.err = fmt.Errorf("provider: base URL %q must be an absolute http(s) URL", baseURL)
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Err reports a configuration error (a malformed base URL), so a program
// can refuse to start rather than fail its first payment.
func (c *Client) Err() error { return c.err }

// BaseURL is the provider API the client calls.
func (c *Client) BaseURL() string { return c.base }

// Charge asks for a charge under req.IdempotencyKey. A decline is a Charge
// with Status failed and a nil error.
func (c *Client) Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error) {
	body, err := fromChargeRequest(req)
	if err != nil {
		return domain.Charge{}, err
	}
	var out chargeDTO
	if err := c.do(ctx, http.MethodPost, "/v1/charges", req.IdempotencyKey, body, &out); err != nil {
		return domain.Charge{}, fmt.Errorf("charge %s: %w", req.IdempotencyKey, err)
	}
	ch, err := out.toCharge()
	if err != nil {
		// A 200 we cannot read may still mean money moved.
		return domain.Charge{}, fmt.Errorf("charge %s: %w: %w", req.IdempotencyKey, domain.ErrProviderUnavailable, err)
	}
	return ch, nil
}

// GetCharge asks about attempt a's charge, by the attempt's ID, the
// idempotency key its charges were sent under: it is looked up by that
// key first. A look-up's "not found" is no answer for an attempt payd is
// still settling (started or unknown): a charge request under the key that
// is delayed in transit (a proxy, a queue, a loaded provider) may still be
// carried out after it, however late. So such an attempt is then asked
// about by repeating its very create under the same key, as the Stripe
// adapter does (ADR 0020, 0054): the sandbox answers the charge recorded
// under the key, whichever request made it, and if none has reached it
// yet, this request is the attempt's first and only charge. Either way
// the answer is the provider's own and stays true. Any other attempt
// (settled, or one payd has no record of: a key an event named) is never
// charged by asking; domain.ErrChargeNotFound means the provider has
// recorded no charge under its key.
func (c *Client) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	ch, err := c.lookUp(ctx, a.ID)
	if !errors.Is(err, domain.ErrChargeNotFound) || !a.Status.Unsettled() {
		return ch, err
	}
	if ch, err = c.Charge(ctx, domain.ChargeRequest{IdempotencyKey: a.ID, OrderID: a.OrderID, Amount: a.Amount,
		Currency: string(a.Currency), PaymentMethod: a.PaymentMethod, CaptureMethod: a.CaptureMethod}); err != nil {
		return domain.Charge{}, fmt.Errorf("get charge %s: replay the create: %w", a.ID, err)
	}
	return ch, nil
}

// lookUp reads the charge recorded under idempotencyKey.
func (c *Client) lookUp(ctx context.Context, idempotencyKey string) (domain.Charge, error) {
	var out chargeDTO
	path := "/v1/charges/" + url.PathEscape(idempotencyKey)
	if err := c.do(ctx, http.MethodGet, path, "", nil, &out); err != nil {
		return domain.Charge{}, fmt.Errorf("get charge %s: %w", idempotencyKey, err)
	}
	ch, err := out.toCharge()
	if err != nil {
		return domain.Charge{}, fmt.Errorf("get charge %s: %w: %w", idempotencyKey, domain.ErrProviderUnavailable, err)
	}
	return ch, nil
}

// Refund gives back req.Amount of a succeeded charge, at most once per
// req.IdempotencyKey. Refunding more than is left is a *domain.ProviderRequestError.
func (c *Client) Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error) {
	body, err := fromRefundRequest(req)
	if err != nil {
		return domain.ProviderRefund{}, err
	}
	var out refundDTO
	if err := c.do(ctx, http.MethodPost, "/v1/refunds", req.IdempotencyKey, body, &out); err != nil {
		return domain.ProviderRefund{}, fmt.Errorf("refund %s: %w", req.IdempotencyKey, err)
	}
	r, err := out.toRefund()
	if err != nil {
		return domain.ProviderRefund{}, fmt.Errorf("refund %s: %w: %w", req.IdempotencyKey, domain.ErrProviderUnavailable, err)
	}
	return r, nil
}

// Capture takes req.Amount of an authorized charge's hold and releases
// the rest, at most once per req.IdempotencyKey: a repeat of the key
// answers the charge as it is now. The answer is the charge after (status
// succeeded, AmountCaptured). A hold that cannot be captured is a
// *domain.ProviderRequestError whose code says why (domain.CaptureTooLarge,
// ChargeAlreadyCaptured, ChargeAlreadyVoided, HoldLapsed,
// ChargeNotCapturable); a timeout or a 5xx is domain.ErrProviderUnavailable,
// and the caller asks (FindCharge) or sends the same key again.
func (c *Client) Capture(ctx context.Context, req domain.CaptureRequest) (domain.Charge, error) {
	body, err := fromCaptureRequest(req)
	if err != nil {
		return domain.Charge{}, err
	}
	return c.holdAction(ctx, "capture", "/v1/captures", req.IdempotencyKey, body)
}

// Void gives up an authorized charge's hold, at most once per
// req.IdempotencyKey: a repeat of the key answers the charge as it is
// now. The answer is the charge after (status voided). A hold captured
// already, or voided or lapsed before, is a *domain.ProviderRequestError
// as for Capture.
func (c *Client) Void(ctx context.Context, req domain.VoidRequest) (domain.Charge, error) {
	return c.holdAction(ctx, "void", "/v1/voids", req.IdempotencyKey, voidRequestDTO{ChargeID: req.ChargeID})
}

// holdAction sends a capture or a void and reads the charge it answers.
func (c *Client) holdAction(ctx context.Context, what, path, key string, body any) (domain.Charge, error) {
	var out chargeDTO
	if err := c.do(ctx, http.MethodPost, path, key, body, &out); err != nil {
		return domain.Charge{}, fmt.Errorf("%s %s: %w", what, key, err)
	}
	ch, err := out.toCharge()
	if err != nil {
		// A 200 we cannot read may still mean the hold moved.
		return domain.Charge{}, fmt.Errorf("%s %s: %w: %w", what, key, domain.ErrProviderUnavailable, err)
	}
	return ch, nil
}

// FindCharge looks a charge up by the provider's charge ID, with the order
// it pays and its refunded and disputed amounts; domain.ErrChargeNotFound
// means the provider has no such charge.
func (c *Client) FindCharge(ctx context.Context, chargeID string) (domain.Charge, error) {
	var out chargeDTO
	path := "/v1/charges/by-id/" + url.PathEscape(chargeID)
	if err := c.do(ctx, http.MethodGet, path, "", nil, &out); err != nil {
		return domain.Charge{}, fmt.Errorf("find charge %s: %w", chargeID, err)
	}
	ch, err := out.toCharge()
	if err != nil {
		return domain.Charge{}, fmt.Errorf("find charge %s: %w: %w", chargeID, domain.ErrProviderUnavailable, err)
	}
	return ch, nil
}

// window is the query of a list of what happened in [from, to).
func window(from, to time.Time) string {
	q := url.Values{}
	q.Set("from", from.UTC().Format(time.RFC3339Nano))
	q.Set("to", to.UTC().Format(time.RFC3339Nano))
	return q.Encode()
}

// ListRefunds returns every refund created in [from, to), oldest first,
// whoever asked for it, each with the order of the charge it refunds. It
// walks the list in pages of refundPage, so a busy window is never one
// reply (do reads at most 4 MiB of one: about 13,000 refunds).
func (c *Client) ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error) {
	var refunds []domain.ProviderRefund
	seen := map[string]bool{}
	for after := ""; ; {
		q := window(from, to) + "&limit=" + strconv.Itoa(refundPage)
		if after != "" {
			q += "&starting_after=" + url.QueryEscape(after)
		}
		var out refundListDTO
		if err := c.do(ctx, http.MethodGet, "/v1/refunds?"+q, "", nil, &out); err != nil {
			return nil, fmt.Errorf("list refunds: %w", err)
		}
		for _, d := range out.Data {
			r, err := d.toRefund()
			if err != nil {
				return nil, fmt.Errorf("list refunds: %w: %w", domain.ErrProviderUnavailable, err)
			}
			refunds = append(refunds, r)
		}
		if !out.HasMore {
			return refunds, nil
		}
		if len(out.Data) == 0 || seen[out.Data[len(out.Data)-1].ID] {
			return nil, fmt.Errorf("list refunds: %w: a page after %q that does not move on", domain.ErrProviderUnavailable, after)
		}
		after = out.Data[len(out.Data)-1].ID
		seen[after] = true
	}
}

// DisputeURL is where an operator reads the sandbox's record of dispute
// id: its API, which asks for no key. "" when the base URL is bad.
func (c *Client) DisputeURL(id string) string {
	if c.err != nil || id == "" {
		return ""
	}
	return c.base + "/v1/disputes/" + url.PathEscape(id)
}

// ListDisputes returns every dispute opened in [from, to), oldest first,
// as it stands now (open, won or lost).
func (c *Client) ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error) {
	var out disputeListDTO
	if err := c.do(ctx, http.MethodGet, "/v1/disputes?"+window(from, to), "", nil, &out); err != nil {
		return nil, fmt.Errorf("list disputes: %w", err)
	}
	disputes := make([]domain.ProviderDispute, 0, len(out.Data))
	for _, d := range out.Data {
		dp, err := d.toDispute()
		if err != nil {
			return nil, fmt.Errorf("list disputes: %w: %w", domain.ErrProviderUnavailable, err)
		}
		disputes = append(disputes, dp)
	}
	return disputes, nil
}

// FindDispute looks a dispute up by the provider's dispute ID, as it stands
// now (open, won or lost); domain.ErrDisputeNotFound means the provider has
// no such dispute.
func (c *Client) FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error) {
	var out disputeDTO
	if err := c.do(ctx, http.MethodGet, "/v1/disputes/"+url.PathEscape(id), "", nil, &out); err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("find dispute %s: %w", id, err)
	}
	d, err := out.toDispute()
	if err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("find dispute %s: %w: %w", id, domain.ErrProviderUnavailable, err)
	}
	return d, nil
}

// How many charges a page of ListCharges asks for, and refunds a page of
// ListRefunds.
const (
	chargePage = 500
	refundPage = 500
)

// ListCharges returns one page of the charges created in [from, to),
// oldest first, starting after the charge with the provider's ID after
// ("": from the start). A page is a bounded reply however busy the window
// (ADR 0066).
func (c *Client) ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error) {
	q := window(from, to) + "&limit=" + strconv.Itoa(chargePage)
	if after != "" {
		q += "&starting_after=" + url.QueryEscape(after)
	}
	var out chargeListDTO
	if err := c.do(ctx, http.MethodGet, "/v1/charges?"+q, "", nil, &out); err != nil {
		return domain.ChargePage{}, fmt.Errorf("list charges: %w", err)
	}
	page := domain.ChargePage{Charges: make([]domain.Charge, 0, len(out.Data))}
	for _, d := range out.Data {
		ch, err := d.toCharge()
		if err != nil {
			return domain.ChargePage{}, fmt.Errorf("list charges: %w: %w", domain.ErrProviderUnavailable, err)
		}
		page.Charges = append(page.Charges, ch)
	}
	if out.HasMore && len(page.Charges) > 0 {
		page.Next = page.Charges[len(page.Charges)-1].ID
	}
	return page, nil
}

// do sends one request and decodes a 2xx reply into out. Everything that
// leaves the outcome open (no reply, a cut or unreadable reply, a 5xx)
// wraps domain.ErrProviderUnavailable; the provider's 404 wraps domain.ErrDisputeNotFound when its
// code is dispute_not_found, else domain.ErrChargeNotFound; its other refusals are
// *domain.ProviderRequestError.
//
// net/http may resend a POST that carries an Idempotency-Key when a reused
// connection dies before any reply; that is safe precisely because of the
// key, and the caller still sees domain.ErrProviderUnavailable if the reply stays lost.
func (c *Client) do(ctx context.Context, method, path, key string, in, out any) error {
	if c.err != nil {
		return c.err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return MarkUnreachable(fmt.Errorf("%w: %w", domain.ErrProviderUnavailable, err))
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return MarkUnreachable(fmt.Errorf("%w: read reply (status %d): %w", domain.ErrProviderUnavailable, resp.StatusCode, err))
	}
	if err := statusError(resp.StatusCode, reply); err != nil {
		return err
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return fmt.Errorf("%w: decode reply (status %d): %w", domain.ErrProviderUnavailable, resp.StatusCode, err)
	}
	return nil
}

// statusError turns a non-2xx status into the error the caller acts on.
func statusError(status int, reply []byte) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		// The provider may or may not have acted: the caller must ask.
		return fmt.Errorf("%w: status %d", domain.ErrProviderUnavailable, status)
	}
	re := &domain.ProviderRequestError{StatusCode: status}
	var e errorDTO
	if json.Unmarshal(reply, &e) == nil {
		re.Code, re.Message = e.Error.Code, e.Error.Message
	}
	if status == http.StatusNotFound {
		// Only the provider itself may say "no such charge": a bare 404 from
		// a proxy or a wrong base URL answered nothing, and taking it for
		// "never charged" could lead to charging twice.
		if re.Code == "" {
			return fmt.Errorf("%w: status 404 without a provider error", domain.ErrProviderUnavailable)
		}
		if re.Code == "dispute_not_found" {
			return fmt.Errorf("%w: %w", domain.ErrDisputeNotFound, re)
		}
		return fmt.Errorf("%w: %w", domain.ErrChargeNotFound, re)
	}
	return re
}
