package service_test

// This file is the only place the service tests build payd's use cases,
// through app.NewUseCases as payd builds them: the stores on a real
// database (internal/dbtest), the real sandbox provider (sandboxtest), the
// clock, and the hooks. The tests themselves
// speak in use-case methods and domain outcomes only, so a change to how
// the graph is wired changes this file alone.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/app"
	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
	"github.com/payd/payd/service"
)

// Timings of every world: a provider call may take providerTimeout, so a
// charge request may be in flight for providerTimeout plus its margin;
// lease is PAYD_LEASE, longer than that.
const (
	providerTimeout = 2 * time.Second
	lease           = 30 * time.Second
	orderTTL        = time.Hour
)

// inFlightWindow is how long after it was sent a charge request may still
// reach the provider.
var inFlightWindow = providerTimeout + service.InFlightMargin(providerTimeout)

// world is one payd (or several replicas of it) on a fresh database of one
// dialect, with a sandbox provider of its own and a clock the test moves.
type world struct {
	t     *testing.T
	url   string // the database, for more replicas
	clock *clock
	sb    *sandboxtest.Sandbox
	prov  *spyProvider

	customers  *service.Customers
	orders     *service.Orders
	checkout   *service.Checkout
	refunds    *service.Refunds
	webhooks   *service.Webhooks
	recoverer  *service.Recoverer
	reconciler *service.Reconciler
	resolver   *service.Resolver
	idem       *idempotency.Engine
	expire     func(context.Context) (int64, error)

	records       *repository.RecordStore
	discrepancies *repository.DiscrepancyStore
	ledger        *repository.LedgerStore
	disputeStore  *repository.DisputeStore
	disputes      *service.Disputes
	admin         *service.Admin
	catalogue     *service.Catalogue
	holds         *service.Holds
	db            *repository.DB // this replica's connections

	observed *tally // payment outcomes Checkout reported (paid, declined, unknown, held), shared by replicas
}

// tally counts named outcomes.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

// eachDialect runs fn once per database dialect, each with a world of its own.
func eachDialect(t *testing.T, fn func(t *testing.T, w *world)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		fn(t, newWorld(t, d))
	})
}

// newWorld builds payd's use cases on a fresh database of dialect d.
func newWorld(t *testing.T, d migrations.Dialect) *world {
	t.Helper()
	c := &clock{}
	sb := sandboxtest.New(t, sandbox.Config{DatabaseURL: sandboxtest.SQLiteURL(t), Clock: c.Now, AsyncDelay: time.Second})
	w := &world{t: t, url: dbtest.NewURL(t, d), clock: c, sb: sb, prov: &spyProvider{inner: sb.Client}, observed: &tally{n: map[string]int{}}}
	w.build(dbtest.OpenURL(t, w.url))
	return w
}

// replica returns another payd on the same database and provider, with
// connections of its own, as a second process would be.
func (w *world) replica() *world {
	w.t.Helper()
	r := &world{t: w.t, url: w.url, clock: w.clock, sb: w.sb, prov: w.prov, observed: w.observed}
	r.build(dbtest.OpenURL(w.t, w.url))
	return r
}

// build wires payd's use cases on db as payd wires them (app.NewUseCases),
// with the test's clock, provider and observer, and the timings above.
func (w *world) build(db *repository.DB) {
	cfg := app.Config{SecretKey: "service-test-secret-key-0123456789", IdempotencyTTL: 24 * time.Hour, InflightWait: 0,
		Lease: lease, OrderTTL: orderTTL, ProviderTimeout: providerTimeout, MaxAmount: domain.DefaultMaxAmount.String()}
	idem, err := app.NewIdempotency(cfg, db, w.clock.Now)
	if err != nil {
		w.t.Fatal(err)
	}
	changes := &service.Changes{}
	uc, err := app.NewUseCases(cfg, db, w.prov, app.Hooks{Now: w.clock.Now, Changes: changes,
		Observer: service.Observers{changes, &observer{w: w}}, Answers: &payAnswers{w: w}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.idem, w.db, w.records = idem, db, repository.NewRecordStore(db)
	w.customers, w.orders, w.checkout, w.refunds, w.disputes = uc.Customers, uc.Orders, uc.Checkout, uc.Refunds, uc.Disputes
	w.webhooks, w.recoverer, w.reconciler, w.resolver, w.admin = uc.Webhooks, uc.Recoverer, uc.Reconciler, uc.Resolver, uc.Admin
	w.expire, w.discrepancies, w.ledger, w.disputeStore = uc.Expire, uc.Discrepancies, uc.Ledger, uc.DisputeStore
	w.catalogue, w.holds = uc.Catalogue, uc.Holds
}

// observer is what these tests hear from the use cases: the payment
// results Checkout reports, counted.
type observer struct {
	service.NopObserver
	w *world
}

func (o *observer) PaymentResult(_ context.Context, _ domain.Attempt, result service.PaymentOutcome) {
	o.w.observe(string(result))
}

// payAnswers stores each pay answer settled outside its request in the
// request's idempotency record, as the HTTP layer's PayRecords does (with
// respond standing in for its rendering).
type payAnswers struct{ w *world }

func (p *payAnswers) PaymentSettled(ctx context.Context, ord domain.Order, a domain.Attempt, outcome error, final bool) error {
	return p.w.idem.Complete(ctx, domain.CustomerScope(ord.CustomerID), a.RequestID, ord.ID, respond(ord, outcome), final)
}

func (w *world) observe(result string) {
	w.observed.mu.Lock()
	defer w.observed.mu.Unlock()
	w.observed.n[result]++
}

// outcomes returns how often Checkout reported result (paid, declined, unknown, held).
func (w *world) outcomes(result string) int {
	w.observed.mu.Lock()
	defer w.observed.mu.Unlock()
	return w.observed.n[result]
}

// respond renders a pay outcome as the idempotency record stores it: the
// status a pay request answers and, for an order, its status as the body.
func respond(o domain.Order, err error) idempotency.Response {
	var decline *domain.DeclineError
	switch {
	case errors.As(err, &decline):
		return idempotency.Response{Status: http.StatusPaymentRequired, Body: []byte(decline.Code)}
	case err != nil:
		return idempotency.Response{Status: http.StatusConflict, Body: []byte(err.Error())}
	case o.Status == domain.StatusProcessing:
		return idempotency.Response{Status: http.StatusAccepted, Body: []byte(o.Status)}
	case o.Status == domain.StatusPaid || o.Status == domain.StatusRefunded:
		return idempotency.Response{Status: http.StatusOK, Body: []byte(o.Status)}
	}
	return idempotency.Response{Status: http.StatusBadGateway, Body: []byte(o.Status)}
}

// ---- fixtures ----

// customer registers a customer and returns its ID.
func (w *world) customer(t *testing.T) string {
	t.Helper()
	c, _, err := w.customers.Register(context.Background(), service.Keyed{Key: "reg-" + newKey(), Fingerprint: "fp"}, newKey()+"@example.com", "Ada")
	if err != nil {
		t.Fatalf("Register = %v", err)
	}
	return c.ID
}

// order creates a pending order of amount (EUR, one custom line) for
// customerID, as the merchant's server does.
func (w *world) order(t *testing.T, customerID, amount string) domain.Order {
	t.Helper()
	o, err := w.orders.Create(context.Background(), service.Keyed{}, service.NewOrder{Merchant: true, CustomerID: customerID, Currency: "EUR",
		Items: []service.NewItem{{SKU: "sku-1", Name: "Tea", Quantity: 1, UnitPrice: &amount}}})
	if err != nil {
		t.Fatalf("Orders.Create = %v", err)
	}
	return o
}

// paidOrder creates an order of amount and pays it with pm_ok.
func (w *world) paidOrder(t *testing.T, customerID, amount string) domain.Order {
	t.Helper()
	o := w.order(t, customerID, amount)
	o, err := w.checkout.Pay(context.Background(), service.PayRequest{CustomerID: customerID, OrderID: o.ID, RequestID: newKey(), PaymentMethod: "pm_ok"})
	if err != nil || o.Status != domain.StatusPaid {
		t.Fatalf("Pay = %v, %v, want paid", o.Status, err)
	}
	return o
}

// heldOrder creates a manual-capture order of amount for customerID, as
// the merchant's server does, and pays it with pm_ok: authorized.
func (w *world) heldOrder(t *testing.T, customerID, amount string) domain.Order {
	t.Helper()
	o, err := w.orders.Create(context.Background(), service.Keyed{}, service.NewOrder{Merchant: true, CustomerID: customerID, Currency: "EUR",
		CaptureMethod: "manual", Items: []service.NewItem{{SKU: "sku-1", Name: "Tea", Quantity: 1, UnitPrice: &amount}}})
	if err != nil {
		t.Fatalf("Orders.Create(manual) = %v", err)
	}
	if o, err = w.pay(customerID, o.ID, newKey(), "pm_ok"); err != nil || o.Status != domain.StatusAuthorized {
		t.Fatalf("Pay(manual) = %v, %v, want authorized", o.Status, err)
	}
	return o
}

// loseNextHoldReply makes the reply to the next capture or void vanish
// after the provider carried it out.
func (w *world) loseNextHoldReply() {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	w.prov.lostHolds++
}

// pay is one pay request.
func (w *world) pay(customerID, orderID, key, method string) (domain.Order, error) {
	return w.checkout.Pay(context.Background(), service.PayRequest{CustomerID: customerID, OrderID: orderID, RequestID: key, PaymentMethod: method})
}

// payKeyed is one pay request as the HTTP layer runs it: through the
// idempotency engine, which records its answer under (customer, key).
func (w *world) payKeyed(t *testing.T, customerID, orderID, key, method string) (domain.Order, error) {
	t.Helper()
	ctx := context.Background()
	call := idempotency.Call{Scope: domain.CustomerScope(customerID), Key: key, Method: http.MethodPost, Path: "/v1/orders/" + orderID + "/pay",
		Body: []byte(`{"payment_method":"` + method + `"}`), OrderID: orderID}
	start, err := w.idem.Begin(ctx, call)
	if err != nil || start.Replay != nil {
		t.Fatalf("Begin = %+v, %v, want to execute", start, err)
	}
	o, err := w.pay(customerID, orderID, key, method)
	if _, ferr := w.idem.Finish(ctx, call, respond(o, err)); ferr != nil {
		t.Fatalf("Finish = %v", ferr)
	}
	return o, err
}

// recordOf returns the idempotency record of a customer's key.
func (w *world) recordOf(t *testing.T, customerID, key string) domain.Record {
	t.Helper()
	r, err := w.records.Find(context.Background(), domain.CustomerScope(customerID), key)
	if err != nil {
		t.Fatalf("find record %s: %v", key, err)
	}
	return r
}

// attempts returns an order's payment attempts, oldest first.
func (w *world) attempts(t *testing.T, customerID, orderID string) []domain.Attempt {
	t.Helper()
	_, as, err := w.orders.GetWithAttempts(context.Background(), customerID, orderID)
	if err != nil {
		t.Fatalf("GetWithAttempts = %v", err)
	}
	return as
}

// get reads an order.
func (w *world) get(t *testing.T, customerID, orderID string) domain.Order {
	t.Helper()
	o, err := w.orders.Get(context.Background(), customerID, orderID)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	return o
}

// discrepanciesOf returns an order's discrepancies.
func (w *world) discrepanciesOf(t *testing.T, orderID string) []domain.Discrepancy {
	t.Helper()
	ds, err := w.discrepancies.ListByOrder(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// ---- the provider's side ----

// charge is what the provider holds for one charge, in test terms.
type charge struct {
	ID, Key, OrderID string
	Status           string
	Amount           decimal.Decimal
	Refunded         decimal.Decimal
}

// charges returns the charges the sandbox really made for an order
// (every status), oldest first.
func (w *world) charges(t *testing.T, orderID string) []charge {
	t.Helper()
	all, err := w.sb.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []charge
	for _, c := range all {
		if c.OrderID == orderID {
			out = append(out, charge{ID: c.ID, Key: c.IdempotencyKey, OrderID: c.OrderID, Status: string(c.Status), Amount: c.Amount, Refunded: c.RefundedAmount})
		}
	}
	return out
}

// chargeBehindPaydsBack has the sandbox charge amount under a key payd
// never made, as if someone used payd's provider account directly.
func (w *world) chargeBehindPaydsBack(t *testing.T, key, orderID, amount string) {
	t.Helper()
	_, err := w.sb.Client.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: key, OrderID: orderID,
		Amount: decimal.RequireFromString(amount), Currency: "EUR", PaymentMethod: "pm_ok"})
	if err != nil {
		t.Fatal(err)
	}
}

// foreignCharge makes a pending order of amount for a new customer, has
// the provider charge it under a key payd never made
// (chargeBehindPaydsBack), and reconciles the hour around now, which finds
// it: the customer, the order and the run's missing_local_payment.
func (w *world) foreignCharge(t *testing.T, amount string) (string, domain.Order, domain.Discrepancy) {
	t.Helper()
	cust := w.customer(t)
	o := w.order(t, cust, amount)
	w.chargeBehindPaydsBack(t, newKey(), o.ID, amount)
	if _, err := w.reconcile(w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, d := range w.discrepanciesOf(t, o.ID) {
		if d.Type == domain.MissingLocalPayment {
			return cust, o, d
		}
	}
	t.Fatalf("discrepancies = %+v, want a missing_local_payment", w.discrepanciesOf(t, o.ID))
	return "", domain.Order{}, domain.Discrepancy{}
}

// refundBehindPaydsBack refunds amount of an order's charge at the provider directly.
func (w *world) refundBehindPaydsBack(t *testing.T, chargeID, amount string) {
	t.Helper()
	_, err := w.sb.Client.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: newKey(), ChargeID: chargeID,
		Amount: decimal.RequireFromString(amount), Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
}

// resolveAsync lets the sandbox settle its pending (pm_async*) charges.
func (w *world) resolveAsync(t *testing.T) {
	t.Helper()
	w.clock.Advance(2 * time.Second)
	if _, err := w.sb.ResolvePending(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// settleFromProvider applies to attempt a what the provider now holds for
// it, as an outcome arriving outside the pay request (Checkout.Settle).
func (w *world) settleFromProvider(t *testing.T, customerID string, a domain.Attempt) (domain.Order, error) {
	t.Helper()
	ctx := context.Background()
	ch, err := w.sb.Client.GetCharge(ctx, a)
	if err != nil {
		t.Fatalf("GetCharge(%s) = %v", a.ID, err)
	}
	o := w.get(t, customerID, a.OrderID)
	return w.checkout.Settle(ctx, o, a, ch, domain.SourceWebhook)
}

// event is one webhook delivery as payd's receiver reads it: the message
// id (the dedupe key), the type, the raw payload and the parsed event.
type event struct {
	ID      string
	Type    domain.ProviderEventType
	Payload []byte
	Data    domain.ProviderEvent
}

// receive hands ev to the webhook use case, as the HTTP receiver does once
// the signature checked out.
func (w *world) receive(ctx context.Context, ev event) (service.WebhookOutcome, error) {
	d := ev.Data
	d.Type = ev.Type
	return w.webhooks.Receive(ctx, ev.ID, d, ev.Payload)
}

// events returns the webhook events the sandbox owes for an order, one per
// event ID, in the order it queued them, as payd's receiver would read them.
func (w *world) events(t *testing.T, orderID string) []event {
	t.Helper()
	ds, err := w.sb.Deliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, d := range ds {
		if d.Copy != 0 {
			continue
		}
		e, err := provider.ParseEvent(d.Payload)
		if err != nil {
			t.Fatalf("ParseEvent(%s) = %v", d.Payload, err)
		}
		if e.OrderID != orderID {
			continue
		}
		out = append(out, event{ID: d.EventID, Type: e.Type, Payload: d.Payload, Data: e})
	}
	return out
}

// reconcileEmptySettlement reconciles [from, to) against a settlement file
// that lists no charge at all.
func (w *world) reconcileEmptySettlement(from, to time.Time) (domain.ReconciliationRun, error) {
	return w.reconciler.Run(context.Background(), service.ReconcileRequest{From: from, To: to, File: settlementOf()})
}

// settlementOf is a checked settlement file that lists charges, in pages
// of two, and names no refund by id.
func settlementOf(charges ...domain.Charge) *domain.Settlement {
	return &domain.Settlement{Charges: func(yield func([]domain.Charge) error) error {
		for page := range slices.Chunk(charges, 2) {
			if err := yield(page); err != nil {
				return err
			}
		}
		return nil
	}}
}

// reconcile reconciles [from, to) against the provider's own list.
func (w *world) reconcile(from, to time.Time) (domain.ReconciliationRun, error) {
	return w.reconciler.Run(context.Background(), service.ReconcileRequest{From: from, To: to})
}

// spyProvider is the sandbox client, with a log of the calls payd made and
// the few failures the sandbox cannot stage: a charge request lost before
// it reached the provider, a reply that reports other money, and a refund
// whose reply was lost.
type spyProvider struct {
	inner *provider.Client

	mu          sync.Mutex
	log         []string                   // "charge <key>", "get <key>"
	loseCharges int                        // the next n charge requests never reach the provider
	lateCharges int                        // the next n charge requests reach the provider only after payd gave up
	misreport   bool                       // charge replies report one unit more than was charged
	lostRefunds int                        // the replies to the next n refund requests are lost; the provider refunds
	lostHolds   int                        // the replies to the next n captures or voids are lost; the provider carries them out
	disputed    map[string]decimal.Decimal // charge ID → what an open dispute withdrew (the sandbox has no disputes yet)
	afterCharge func(domain.Charge)        // runs once the provider charged, before its reply reaches payd
	// beforeRefund runs once, while the next refund request is held on its
	// way to the provider.
	beforeRefund func()
	// listPage, when set, hands out the provider's charges in pages of
	// this many; stuckList has every page after the first start where
	// the first did, as a broken provider might.
	listPage  int
	stuckList bool
	// onList, when set, runs before each page is listed; its error is the
	// page's. onListRefunds runs before the refunds are.
	onList        func(after string) error
	onListRefunds func()
}

// delayNextCharge makes the next charge request so slow that payd gives up
// at its deadline; the provider receives it just after and charges.
func (w *world) delayNextCharge() {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	w.prov.lateCharges++
}

// loseNextCharge makes the next charge request vanish on its way to the
// provider: payd sees no reply, the provider sees nothing.
func (w *world) loseNextCharge() {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	w.prov.loseCharges++
}

// misreportAmounts makes every charge reply report another amount than the
// provider charged.
func (w *world) misreportAmounts() {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	w.prov.misreport = true
}

// loseNextRefundReply makes the provider refund the next refund request
// and its reply vanish: payd's refund stays pending.
func (w *world) loseNextRefundReply() {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	w.prov.lostRefunds++
}

// calls returns the provider calls payd made so far, each "charge" or
// "get" followed by the key, and forgets them.
func (w *world) calls() []string {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	l := w.prov.log
	w.prov.log = nil
	return l
}

// callsOf returns the keys of the calls of operation op payd made so far
// (capture, void, charge, ...), without clearing the log.
func (w *world) callsOf(op string) []string {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	var keys []string
	for _, l := range w.prov.log {
		if k, ok := strings.CutPrefix(l, op+" "); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func (p *spyProvider) record(op, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, op+" "+key)
}

func (p *spyProvider) Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error) {
	p.record("charge", req.IdempotencyKey)
	p.mu.Lock()
	lose, late, misreport := p.loseCharges > 0, p.lateCharges > 0, p.misreport
	if lose {
		p.loseCharges--
	} else if late {
		p.lateCharges--
	}
	p.mu.Unlock()
	if lose {
		return domain.Charge{}, domain.ErrProviderUnavailable
	}
	if late {
		<-ctx.Done()
		if _, err := p.inner.Charge(context.WithoutCancel(ctx), req); err != nil {
			return domain.Charge{}, err
		}
		return domain.Charge{}, fmt.Errorf("%w: %w", domain.ErrProviderUnavailable, ctx.Err())
	}
	ch, err := p.inner.Charge(ctx, req)
	if err == nil && misreport {
		ch.Amount = ch.Amount.Add(decimal.NewFromInt(1))
	}
	p.mu.Lock()
	after := p.afterCharge
	p.mu.Unlock()
	if err == nil && after != nil {
		after(ch)
	}
	return ch, err
}

func (p *spyProvider) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	p.record("get", a.ID)
	return p.inner.GetCharge(ctx, a)
}

func (p *spyProvider) FindCharge(ctx context.Context, chargeID string) (domain.Charge, error) {
	p.record("find", chargeID)
	ch, err := p.inner.FindCharge(ctx, chargeID)
	p.mu.Lock()
	if v, ok := p.disputed[chargeID]; ok && err == nil {
		ch.DisputedAmount = v
	}
	p.mu.Unlock()
	return ch, err
}

// dispute has the provider report amount of charge chargeID under an
// open dispute (zero: the dispute is over, the money back).
func (w *world) dispute(chargeID, amount string) {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	if w.prov.disputed == nil {
		w.prov.disputed = map[string]decimal.Decimal{}
	}
	w.prov.disputed[chargeID] = decimal.RequireFromString(amount)
}

// Capture captures a hold at the sandbox; its reply may be lost (lostHolds).
func (p *spyProvider) Capture(ctx context.Context, req domain.CaptureRequest) (domain.Charge, error) {
	p.record("capture", req.IdempotencyKey)
	ch, err := p.inner.Capture(ctx, req)
	return p.holdReply(ch, err)
}

// Void voids a hold at the sandbox; its reply may be lost (lostHolds).
func (p *spyProvider) Void(ctx context.Context, req domain.VoidRequest) (domain.Charge, error) {
	p.record("void", req.IdempotencyKey)
	ch, err := p.inner.Void(ctx, req)
	return p.holdReply(ch, err)
}

// holdReply is the reply to a capture or a void, unless it is lost.
func (p *spyProvider) holdReply(ch domain.Charge, err error) (domain.Charge, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostHolds > 0 {
		p.lostHolds--
		return domain.Charge{}, fmt.Errorf("%w: the reply was lost", domain.ErrProviderUnavailable)
	}
	return ch, err
}

func (p *spyProvider) Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error) {
	p.mu.Lock()
	lost := p.lostRefunds > 0
	if lost {
		p.lostRefunds--
	}
	hold := p.beforeRefund
	p.beforeRefund = nil
	p.mu.Unlock()
	if hold != nil {
		hold()
	}
	r, err := p.inner.Refund(ctx, req)
	if lost && err == nil {
		return domain.ProviderRefund{}, domain.ErrProviderUnavailable
	}
	return r, err
}

func (p *spyProvider) ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error) {
	p.mu.Lock()
	n, stuck, onList := p.listPage, p.stuckList, p.onList
	p.log = append(p.log, "list "+after) // the pages asked for
	p.mu.Unlock()
	if onList != nil {
		if err := onList(after); err != nil {
			return domain.ChargePage{}, err
		}
	}
	if n == 0 {
		return p.inner.ListCharges(ctx, from, to, after)
	}
	all, err := provider.AllCharges(ctx, p.inner, from, to)
	if err != nil {
		return domain.ChargePage{}, err
	}
	start := 0
	if after != "" && !stuck {
		start = slices.IndexFunc(all, func(c domain.Charge) bool { return c.ID == after }) + 1
	}
	end := min(start+n, len(all))
	page := domain.ChargePage{Charges: all[start:end]}
	if end < len(all) {
		page.Next = all[end-1].ID
	}
	return page, nil
}

// ---- helpers ----

// clock is payd's and the sandbox's time: the real time, moved forward by
// Advance, at the microsecond precision both databases store.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset).Truncate(time.Microsecond)
}

// Advance moves the clock forward by d.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// newKey returns a fresh idempotency key.
func newKey() string {
	return uuid.NewString()
}

// statusesOf lists the statuses of charges, for failure messages and counts.
func statusesOf(cs []charge) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Status
	}
	slices.Sort(out)
	return out
}

// ListRefunds is the sandbox's refund list, as reconciliation reads it.
func (p *spyProvider) ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error) {
	p.mu.Lock()
	hook := p.onListRefunds
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return p.inner.ListRefunds(ctx, from, to)
}

// ListDisputes is the sandbox's dispute list, as reconciliation reads it.
func (p *spyProvider) ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error) {
	return p.inner.ListDisputes(ctx, from, to)
}

// FindDispute is the sandbox's dispute by its ID.
func (p *spyProvider) FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error) {
	return p.inner.FindDispute(ctx, id)
}
