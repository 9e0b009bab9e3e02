// Package stripefake is a stateful fake of the few Stripe endpoints payd
// uses, for behaviour tests: PaymentIntents created and confirmed at once,
// retrieved, listed and searched; refunds; disputes; idempotency keys
// honoured as Stripe does (the first answer replayed; other parameters
// under a used key refused); and events signed the way stripe-go's webhook
// package verifies them. Test PaymentMethod ids choose the outcome, as in
// Stripe's test mode. It is not Stripe: the contract is checked against
// stripe-mock (provider/stripeprovider's contract test).
package stripefake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// Test PaymentMethods and what they do.
const (
	PMVisa         = "pm_card_visa"           // succeeds
	PMDeclined     = "pm_card_chargeDeclined" // declined: generic_decline
	PMInsufficient = "pm_card_chargeDeclinedInsufficientFunds"
	PM3DS          = "pm_card_threeDSecure2Required" // requires_action until Authenticate
	PMProcessing   = "pm_card_processing"            // fake-only: processing until Finish
)

// Fake is the fake Stripe. Its zero value is not usable: call New.
type Fake struct {
	Secret string // the webhook signing secret (whsec_…)
	srv    *httptest.Server

	mu       sync.Mutex
	seq      int
	pis      map[string]map[string]any
	order    []string // PaymentIntent ids, oldest first
	refunds  map[string]map[string]any
	disputes map[string]map[string]any
	// holds is each PaymentIntent ever authorized with capture_method
	// manual, and its charge's capture_before (Unix seconds).
	holds  map[string]int64
	keys   map[string]idemReply
	events []Event
	calls  []string
	keyed  []keyedCall
	// dropReplies: the next n requests are carried out but their replies
	// are lost (the connection is cut).
	dropReplies int
	// down: requests fail with 500 and change nothing.
	down bool
	// pendRefunds: new refunds stay pending until FinishRefund.
	pendRefunds bool
	now         func() time.Time
}

// Event is one signed webhook the fake would send.
type Event struct {
	ID, Type string
	Body     []byte
}

// keyedCall is one request about a PaymentIntent, with the attempt it is for.
type keyedCall struct{ method, attempt string }

type idemReply struct {
	params string
	status int
	body   []byte
}

// New starts a fake on a loopback port, closed by t's cleanup if t is given.
func New(cleanup func(func())) *Fake {
	f := &Fake{Secret: "whsec_fake_" + strconv.FormatInt(time.Now().UnixNano(), 36), pis: map[string]map[string]any{},
		refunds: map[string]map[string]any{}, disputes: map[string]map[string]any{}, holds: map[string]int64{}, keys: map[string]idemReply{},
		now: time.Now}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	if cleanup != nil {
		cleanup(f.srv.Close)
	}
	return f
}

// URL is the fake's API base (STRIPE_API_BASE).
func (f *Fake) URL() string { return f.srv.URL }

// Close stops the fake.
func (f *Fake) Close() { f.srv.Close() }

// DropReplies makes the next n requests take effect but lose their reply.
func (f *Fake) DropReplies(n int) { f.mu.Lock(); f.dropReplies = n; f.mu.Unlock() }

// SetNow sets the fake's clock: the created time of every object and
// event made from now on.
func (f *Fake) SetNow(now func() time.Time) { f.mu.Lock(); f.now = now; f.mu.Unlock() }

// SetDown makes every request fail with 500 without taking effect.
func (f *Fake) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// Calls lists "METHOD path" of every request received, in order.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// CallsFor lists, in order, "POST" for each create sent under the attempt's
// Idempotency-Key and "GET" for each retrieve of its PaymentIntent: how
// payd asked about the attempt and charged it.
func (f *Fake) CallsFor(attemptID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.keyed {
		if c.attempt == attemptID {
			out = append(out, c.method)
		}
	}
	return out
}

// Count is how many requests "METHOD path" the fake received.
func (f *Fake) Count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

// Intents returns the id and status of every PaymentIntent of an order, oldest first.
func (f *Fake) Intents(orderID string) [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][2]string
	for _, id := range f.order {
		if meta(f.pis[id])["payd_order"] == orderID {
			out = append(out, [2]string{id, f.pis[id]["status"].(string)})
		}
	}
	return out
}

// Succeeded counts the PaymentIntents of an order (metadata payd_order)
// that took the customer's money.
func (f *Fake) Succeeded(orderID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, pi := range f.pis {
		if meta(pi)["payd_order"] == orderID && pi["status"] == "succeeded" {
			n++
		}
	}
	return n
}

// Created counts the PaymentIntents made for an order, whatever their state.
func (f *Fake) Created(orderID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, pi := range f.pis {
		if meta(pi)["payd_order"] == orderID {
			n++
		}
	}
	return n
}

// PaymentIntentOf returns the id of the newest PaymentIntent of an order.
func (f *Fake) PaymentIntentOf(orderID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.order) - 1; i >= 0; i-- {
		if meta(f.pis[f.order[i]])["payd_order"] == orderID {
			return f.order[i]
		}
	}
	return ""
}

// Events returns every event emitted so far, oldest first.
func (f *Fake) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// Authenticate finishes 3-D Secure for a PaymentIntent in requires_action:
// ok → succeeded, else back to requires_payment_method with
// payment_intent_authentication_failure. It emits the webhook.
func (f *Fake) Authenticate(id string, ok bool) {
	f.finish(id, ok, "payment_intent_authentication_failure")
}

// Finish settles a processing PaymentIntent and emits the webhook.
func (f *Fake) Finish(id string, ok bool) { f.finish(id, ok, "card_declined") }

func (f *Fake) finish(id string, ok bool, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finishLocked(id, ok, code)
}

// finishLocked is finish; the caller holds mu.
func (f *Fake) finishLocked(id string, ok bool, code string) {
	pi := f.pis[id]
	pi["next_action"] = nil
	if ok {
		f.succeed(pi)
		return
	}
	pi["status"] = "requires_payment_method"
	pi["last_payment_error"] = map[string]any{"type": "card_error", "code": code, "message": "failed"}
	f.emit("payment_intent.payment_failed", pi)
}

// Confirm confirms PaymentIntent id again with pm, as a browser holding its
// client_secret could after a decline: pm_card_visa charges it. It is
// refused (an error, nothing charged) once the PaymentIntent is canceled
// or already succeeded, as Stripe refuses.
func (f *Fake) Confirm(id, pm string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi, ok := f.pis[id]
	if !ok {
		return fmt.Errorf("no such payment intent %s", id)
	}
	if st := pi["status"]; st != "requires_payment_method" && st != "requires_action" && st != "requires_confirmation" {
		return fmt.Errorf("payment intent %s is %s: it cannot be confirmed", id, st)
	}
	if pm != PMVisa {
		return fmt.Errorf("fake: Confirm supports %s only", PMVisa)
	}
	pi["payment_method"], pi["last_payment_error"], pi["next_action"] = pm, nil, nil
	f.succeed(pi)
	return nil
}

// LapseHold lets hold id (a manual-capture PaymentIntent in
// requires_capture) lapse, as Stripe does once its charge's
// capture_before has passed: canceled with cancellation_reason automatic,
// its charge refunded whole. It emits payment_intent.canceled.
func (f *Fake) LapseHold(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi, ok := f.pis[id]
	if !ok {
		return fmt.Errorf("no such payment intent %s", id)
	}
	if pi["status"] != "requires_capture" || pi["capture_method"] != "manual" {
		return fmt.Errorf("payment intent %s is not a hold (%s)", id, pi["status"])
	}
	pi["status"], pi["cancellation_reason"] = "canceled", "automatic"
	pi["canceled_at"], pi["amount_capturable"] = f.now().Unix(), 0
	f.emit("payment_intent.canceled", pi)
	return nil
}

// Twin creates another PaymentIntent, succeeded, with piID's amount,
// currency and metadata (as a second integration on the account might),
// and returns its id and its payment_intent.succeeded event.
func (f *Fake) Twin(piID string) (string, Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := clone(f.pis[piID])
	pi["id"], pi["latest_charge"], pi["status"], pi["next_action"] = f.id("pi"), f.id("ch"), "succeeded", nil
	pi["amount_received"] = pi["amount"]
	id := pi["id"].(string)
	f.pis[id] = pi
	f.order = append(f.order, id)
	f.emit("payment_intent.succeeded", pi)
	return id, f.events[len(f.events)-1]
}

// OtherMoney returns, without recording it, a payment_intent.succeeded for
// PaymentIntent piID as it is but for amount (Stripe's integer amount):
// an event reporting other money than payd asked for.
func (f *Fake) OtherMoney(piID string, amount int64) Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := clone(f.pis[piID])
	pi["status"], pi["amount"], pi["amount_received"], pi["next_action"] = "succeeded", amount, amount, nil
	ev := map[string]any{"id": f.id("evt"), "object": "event", "api_version": stripe.APIVersion, "created": f.now().Unix(),
		"type": "payment_intent.succeeded", "livemode": false, "data": map[string]any{"object": pi}}
	b, _ := json.Marshal(ev)
	return Event{ID: ev["id"].(string), Type: "payment_intent.succeeded", Body: b}
}

// Status is PaymentIntent id's status.
func (f *Fake) Status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, _ := f.pis[id]["status"].(string)
	return s
}

// PendRefunds makes the refunds created from now on stay pending (as a
// bank transfer's or some cards' do on Stripe) until FinishRefund.
func (f *Fake) PendRefunds(on bool) { f.mu.Lock(); f.pendRefunds = on; f.mu.Unlock() }

// FinishRefund settles refund id: ok → succeeded (refund.updated, then
// charge.refunded); else failed (refund.updated, then refund.failed), its
// amount no longer counted as refunded. A refund already succeeded may
// fail too, as Stripe's can.
func (f *Fake) FinishRefund(id string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.refunds[id]
	if ok {
		r["status"] = "succeeded"
		f.emit("refund.updated", r)
		f.emitChargeRefunded(f.pis[r["payment_intent"].(string)])
		return
	}
	r["status"], r["failure_reason"] = "failed", "expired_or_canceled_card"
	f.emit("refund.updated", r)
	f.emit("refund.failed", r)
}

// Refunds lists the fake's refunds as [id, status], oldest first.
func (f *Fake) Refunds() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.refunds))
	for id := range f.refunds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([][2]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, [2]string{id, f.refunds[id]["status"].(string)})
	}
	return out
}

// DisputeOptions shapes a dispute OpenDispute opens.
type DisputeOptions struct {
	Amount int64  // Stripe's integer amount; 0 disputes the whole charge
	Reason string // fraudulent when empty
	// Inquiry opens an inquiry (warning_needs_response): the bank asks
	// questions and takes no money, unless UpdateDispute escalates it.
	Inquiry bool
}

// Dispute opens a dispute of the whole of a PaymentIntent's charge, as
// OpenDispute with no options, and returns its id.
func (f *Fake) Dispute(piID string) string { return f.OpenDispute(piID, DisputeOptions{}) }

// OpenDispute opens a dispute on a PaymentIntent's charge and returns its
// id. A chargeback (needs_response) withdraws its amount at once, as Stripe
// does: charge.dispute.created, then charge.dispute.funds_withdrawn, the
// dispute listing the withdrawal among its balance_transactions. An
// inquiry emits charge.dispute.created only.
func (f *Fake) OpenDispute(piID string, o DisputeOptions) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := f.pis[piID]
	amount := o.Amount
	if amount == 0 {
		amount = pi["amount"].(int64)
	}
	reason, status := o.Reason, "needs_response"
	if reason == "" {
		reason = "fraudulent"
	}
	if o.Inquiry {
		status = "warning_needs_response"
	}
	d := map[string]any{"id": f.id("dp"), "object": "dispute", "amount": amount, "currency": pi["currency"],
		"charge": pi["latest_charge"], "payment_intent": piID, "reason": reason, "status": status,
		"balance_transactions": []any{}, "is_charge_refundable": false, "created": f.now().Unix(), "livemode": false,
		"metadata": map[string]any{},
		// Stripe wants the merchant's evidence by a date the network sets;
		// the fake's is a week after the dispute opened.
		"evidence_details": map[string]any{"due_by": f.now().Add(7 * 24 * time.Hour).Unix(), "has_evidence": false,
			"past_due": false, "submission_count": 0}}
	f.disputes[d["id"].(string)] = d
	f.emit("charge.dispute.created", d)
	if !o.Inquiry {
		f.moveDisputeFunds(d, -amount, "charge.dispute.funds_withdrawn")
	}
	return d["id"].(string)
}

// UpdateDispute moves an open dispute to status (under_review once the
// merchant answered, warning_under_review for an inquiry answered, or
// needs_response for an inquiry the bank escalates to a chargeback, which
// withdraws its amount) and emits charge.dispute.updated.
func (f *Fake) UpdateDispute(id, status string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.disputes[id]
	if !ok {
		return fmt.Errorf("no such dispute %s", id)
	}
	from, _ := d["status"].(string)
	if disputeClosed(from) {
		return fmt.Errorf("dispute %s is %s: it is closed", id, from)
	}
	inquiry := strings.HasPrefix(from, "warning_")
	switch status {
	case "under_review", "needs_response":
		d["status"] = status
		f.emit("charge.dispute.updated", d)
		if inquiry {
			f.moveDisputeFunds(d, -d["amount"].(int64), "charge.dispute.funds_withdrawn")
		}
	case "warning_under_review":
		if !inquiry {
			return fmt.Errorf("dispute %s is a chargeback, not an inquiry", id)
		}
		d["status"] = status
		f.emit("charge.dispute.updated", d)
	default:
		return fmt.Errorf("fake: UpdateDispute to %q is not supported", status)
	}
	return nil
}

// CloseDispute decides an open dispute and emits charge.dispute.closed:
// won gives the withdrawn amount back (charge.dispute.funds_reinstated
// after it), lost keeps it withdrawn; an inquiry closes as warning_closed,
// having moved no money.
func (f *Fake) CloseDispute(id, status string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.disputes[id]
	if !ok {
		return fmt.Errorf("no such dispute %s", id)
	}
	from, _ := d["status"].(string)
	if disputeClosed(from) {
		return fmt.Errorf("dispute %s is %s: it is closed", id, from)
	}
	inquiry := strings.HasPrefix(from, "warning_")
	switch {
	case status == "warning_closed" && inquiry, (status == "won" || status == "lost") && !inquiry:
	default:
		return fmt.Errorf("dispute %s (%s) cannot close as %q", id, from, status)
	}
	d["status"] = status
	f.emit("charge.dispute.closed", d)
	if status == "won" {
		f.moveDisputeFunds(d, d["amount"].(int64), "charge.dispute.funds_reinstated")
	}
	return nil
}

// DisputeStatus is dispute id's status ("" when there is none).
func (f *Fake) DisputeStatus(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, _ := f.disputes[id]["status"].(string)
	return s
}

func disputeClosed(status string) bool {
	return status == "won" || status == "lost" || status == "warning_closed" || status == "prevented"
}

// moveDisputeFunds records on dispute d the balance transaction of amount
// (negative: withdrawn) and emits typ; the caller holds mu.
func (f *Fake) moveDisputeFunds(d map[string]any, amount int64, typ string) {
	bt := map[string]any{"id": f.id("txn"), "object": "balance_transaction", "amount": amount, "currency": d["currency"],
		"created": f.now().Unix(), "type": "adjustment", "reporting_category": "dispute", "source": d["id"], "status": "available"}
	d["balance_transactions"] = append(d["balance_transactions"].([]any), bt)
	f.emit(typ, d)
}

// RefundOutside refunds amount (Stripe's integer amount) of a
// PaymentIntent as the Dashboard would, outside payd: no metadata, no
// Idempotency-Key. It emits refund.created and charge.refunded and returns
// the refund's id.
func (f *Fake) RefundOutside(piID string, amount int64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi, ok := f.pis[piID]
	if !ok {
		return "", fmt.Errorf("no such payment intent %s", piID)
	}
	if pi["status"] != "succeeded" || f.refunded(piID)+amount > toInt(pi["amount_received"]) || amount <= 0 {
		return "", fmt.Errorf("payment intent %s cannot be refunded %d", piID, amount)
	}
	r := map[string]any{"id": f.id("re"), "object": "refund", "amount": amount, "currency": pi["currency"], "status": "succeeded",
		"payment_intent": piID, "charge": pi["latest_charge"], "metadata": map[string]any{}, "created": f.now().Unix()}
	f.refunds[r["id"].(string)] = r
	f.emit("refund.created", r)
	f.emitChargeRefunded(pi)
	return r["id"].(string), nil
}

// ContradictingFailure returns, without recording it, a signed-ready
// payment_intent.payment_failed for a PaymentIntent as it is now but
// declined: the kind of stale or forged event payd must check with Stripe
// before believing.
func (f *Fake) ContradictingFailure(piID string) Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := clone(f.pis[piID])
	pi["status"] = "requires_payment_method"
	pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline"}
	ev := map[string]any{"id": f.id("evt"), "object": "event", "api_version": stripe.APIVersion, "created": f.now().Unix(),
		"type": "payment_intent.payment_failed", "livemode": false, "data": map[string]any{"object": pi}}
	b, _ := json.Marshal(ev)
	return Event{ID: ev["id"].(string), Type: "payment_intent.payment_failed", Body: b}
}

// Sign signs body as Stripe would, at time t.
func (f *Fake) Sign(body []byte, t time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: f.Secret, Timestamp: t}).Header
}

// Deliver posts event e, freshly signed, to url and returns the status.
func (f *Fake) Deliver(ctx context.Context, url string, e Event) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(e.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", f.Sign(e.Body, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// emit records an event for obj; the caller holds mu.
func (f *Fake) emit(typ string, obj map[string]any) {
	ev := map[string]any{"id": f.id("evt"), "object": "event", "api_version": stripe.APIVersion, "created": f.now().Unix(),
		"type": typ, "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": clone(obj)}}
	b, _ := json.Marshal(ev)
	f.events = append(f.events, Event{ID: ev["id"].(string), Type: typ, Body: b})
}

func (f *Fake) id(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_fake%06d", prefix, f.seq)
}

// clone is a deep copy of m that keeps every value's Go type: a round
// trip through JSON would turn the int64 amounts and created times into
// float64s, which the list and refund code reads as int64.
func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return clone(x)
	case map[string]string:
		c := make(map[string]string, len(x))
		for k, s := range x {
			c[k] = s
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = cloneValue(e)
		}
		return c
	}
	return v
}

func meta(o map[string]any) map[string]string {
	out := map[string]string{}
	if m, ok := o["metadata"].(map[string]any); ok {
		for k, v := range m {
			out[k], _ = v.(string)
		}
	}
	if m, ok := o["metadata"].(map[string]string); ok {
		return m
	}
	return out
}

// canonical is the request's parameters in a stable order, to compare a
// replay under a key with its first use.
func canonical(v url.Values) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s&", k, strings.Join(v[k], ","))
	}
	return b.String()
}

// Intent is a PaymentIntent as the fake holds it: what a test reads as
// the provider's books.
type Intent struct {
	ID, OrderID, Attempt  string // Attempt: metadata payd_attempt, the create's Idempotency-Key
	Status, PaymentMethod string
	Currency              string
	// Amount and Refunded are Stripe's integer amounts; Refunded counts
	// the refunds that succeeded.
	Amount, Refunded int64
	Created          time.Time
}

// PaymentIntents returns every PaymentIntent, oldest first.
func (f *Fake) PaymentIntents() []Intent {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Intent, 0, len(f.order))
	for _, id := range f.order {
		pi := f.pis[id]
		m := meta(pi)
		in := Intent{ID: id, OrderID: m["payd_order"], Attempt: m["payd_attempt"], Amount: toInt(pi["amount"]),
			Created: time.Unix(toInt(pi["created"]), 0)}
		in.Status, _ = pi["status"].(string)
		in.PaymentMethod, _ = pi["payment_method"].(string)
		in.Currency, _ = pi["currency"].(string)
		for _, r := range f.refunds {
			if r["payment_intent"] == id && r["status"] == "succeeded" {
				in.Refunded += toInt(r["amount"])
			}
		}
		out = append(out, in)
	}
	return out
}

// Settle finishes PaymentIntent id as Finish (processing) or Authenticate
// (requires_action) would, but only while it still waits for the bank or
// the customer, in one step under the fake's lock: a PaymentIntent payd
// cancelled meanwhile stays cancelled. It reports whether it settled one.
func (f *Fake) Settle(id string, ok bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch st, _ := f.pis[id]["status"].(string); st {
	case "processing":
		f.finishLocked(id, ok, "card_declined")
	case "requires_action":
		f.finishLocked(id, ok, "payment_intent_authentication_failure")
	default:
		return false
	}
	return true
}

// toInt reads an integer the fake stored (int64, or float64 once cloned through JSON).
func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}
