package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/handler"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/notify"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/redisx"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// PaymentProvider is every port payd's use cases need from the provider:
// the sandbox's client (provider.Client) or Stripe's (stripeprovider.Client).
type PaymentProvider = telemetry.Provider

// readBacklog is the backlog gauges' database read.
func readBacklog(db *repository.DB) func(context.Context) (telemetry.Backlog, error) {
	return func(ctx context.Context) (telemetry.Backlog, error) {
		b, err := repository.ReadBacklog(ctx, db)
		if err != nil {
			return telemetry.Backlog{}, err
		}
		n, err := repository.ReadNotifyBacklog(ctx, db)
		if err != nil {
			return telemetry.Backlog{}, err
		}
		r, err := repository.ReadRetentionOldest(ctx, db)
		return telemetry.Backlog{OrdersProcessing: b.OrdersProcessing, DiscrepanciesOpen: b.DiscrepanciesOpen,
			OldestUnknownAttempt: b.OldestUnknownAttempt, WebhookEventsPending: b.WebhookEventsPending, DisputesOpen: b.DisputesOpen,
			NotifyPending: n.Pending, OldestNotifyPending: n.OldestPending, NotifyHeld: n.Held,
			HoldsOpen: b.HoldsOpen, NextHoldLapse: b.NextHoldLapse, OldestHold: b.OldestHold,
			OldestRetained: map[string]time.Time{
				service.RetainedWebhookEvents: r.WebhookEvents, service.RetainedNotifyDeliveries: r.NotifyDeliveries,
				service.RetainedNotifyEvents: r.NotifyEvents, service.RetainedCheckpoints: r.Checkpoints,
			}}, err
	}
}

// providerFor returns the provider client: Stripe (PAYD_PROVIDER=stripe),
// the sandbox at PAYD_PROVIDER_URL, or a sandbox started here on sandboxLn
// (loopback) that delivers its webhooks to this very payd.
func providerFor(ctx context.Context, cfg Config, base string, sandboxLn net.Listener, log *slog.Logger, tr telemetry.Tracing) (PaymentProvider, func(), error) {
	if cfg.Stripe.Provider == "stripe" {
		sp, err := newStripe(cfg, log, tr.ProviderTransport(provider.NewTransport()))
		return sp, func() {}, err
	}
	opts := tr.ProviderOptions(cfg.ProviderTimeout)
	if cfg.ProviderURL != "" {
		return provider.NewClient(cfg.ProviderURL, opts...), func() {}, nil
	}
	hook := cfg.SandboxWebhookURL
	if hook == "" {
		hook = base + "/v1/webhooks/provider"
	}
	stop, addr, err := startSandbox(ctx, cfg, sandboxLn, hook, log)
	if err != nil {
		return nil, nil, fmt.Errorf("start sandbox: %w", err)
	}
	return provider.NewClient("http://"+addr, opts...), stop, nil
}

// Parts is payd wired together: what Serve runs, and what tests that run
// several replicas on one database drive.
type Parts struct {
	Idempotency *idempotency.Engine
	Echo        *echo.Echo // the HTTP API
	Jobs        []service.Job

	Metrics *telemetry.Metrics // served on its own listener when PAYD_METRICS_ADDR is set
	Redis   *redisx.Redis      // nil without PAYD_REDIS_URL

	catalogue *service.Catalogue // Build seeds the demo catalogue through it (democatalogue.go)

	draining *atomic.Bool // set by Drain: /readyz answers 503 from then on
}

// Drain makes /readyz answer 503 not_ready ("shutting down") from now on,
// while every other route serves as before: a load balancer stops sending
// new work before the listener closes (Serve, PAYD_SHUTDOWN_DELAY).
func (p *Parts) Drain() { p.draining.Store(true) }

func (p *Parts) closeRedis() {
	if p.Redis != nil {
		_ = p.Redis.Close()
	}
}

// Wire builds stores → services → handlers on db, charging through client.
func Wire(cfg Config, db *repository.DB, client PaymentProvider, log *slog.Logger) (*Parts, error) {
	sealer, err := idempotency.NewSealer(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("PAYD_SECRET_KEY: %w", err)
	}
	crashAt(cfg.Fault)
	if err := mutate(cfg.Mutant); err != nil {
		return nil, fmt.Errorf("PAYD_TEST_MUTANT: %w", err)
	}
	metrics := telemetry.NewMetrics()
	for name, pool := range db.Pools() { // go_sql_* series, one db_name per pool
		metrics.Register(collectors.NewDBStatsCollector(pool, name))
	}
	metrics.WatchBacklog(readBacklog(db), telemetry.BacklogTTL, telemetry.BacklogTimeout)
	db.OnRetry(func(ctx context.Context, reason domain.RetryReason, attempt int, err error) {
		metrics.DBRetried(reason)
		log.DebugContext(ctx, "database conflict, retrying", "reason", reason, "attempt", attempt, "err", err)
	})

	records := repository.NewRecordStore(db)
	idem := newIdempotency(cfg, records, sealer, now)
	idem.Observer = metrics
	// What the use cases do reaches this process's event streams, the
	// metrics and the outcome log; a payment settled outside its request
	// stores its answer in the pay request's idempotency record.
	changes := &service.Changes{}
	observer := service.Observers{changes, metrics, telemetry.OutcomeLog{Log: log}}
	rds, eventsLive, err := wireRedis(cfg, idem, changes, metrics, log)
	if err != nil {
		return nil, err
	}
	if rds != nil {
		observer = append(observer, redisx.Events{Redis: rds})
	}
	// Telemetry (ADR 0022): every provider call timed, the backlog read on
	// scrape, outcomes logged.
	uc, err := NewUseCases(cfg, db, client, Hooks{Changes: changes, Observer: observer, Answers: handler.PayRecords{Engine: idem},
		Timed: func(p PaymentProvider) PaymentProvider {
			return telemetry.ObservedProvider{Next: p, Observe: metrics.ProviderCalled}
		}})
	if err != nil {
		return nil, err
	}
	stripeHooks, err := stripeWebhooks(cfg, client, uc.Webhooks) // nil unless PAYD_PROVIDER=stripe
	if err != nil {
		return nil, fmt.Errorf("STRIPE_WEBHOOK_SECRET: %w", err)
	}
	var webhooks *handler.Webhooks // the sandbox's events: nil in Stripe mode, one endpoint per mode
	if stripeHooks == nil {
		if webhooks, err = handler.NewWebhooks(uc.Webhooks, provider.ParseEvent, cfg.WebhookSecret); err != nil {
			return nil, fmt.Errorf("PAYD_WEBHOOK_SECRET: %w", err)
		}
		webhooks.Rejected = metrics.WebhookRejected
	}
	admin := &handler.Admin{
		Service:     uc.Admin,
		Refunds:     uc.Refunds,
		Reconcile:   uc.Reconciler,
		Resolver:    uc.Resolver,
		Records:     idem,
		Settlements: settlementsFor(cfg), // Stripe mode: a balance-transactions export (stripe.go)
		Endpoints: &notify.Admin{Endpoints: repository.NewEndpointStore(db, sealer), Log: repository.NewNotifyStore(db),
			Policy: cfg.notifyPolicy(), Now: now},
	}
	admin.Links, _ = client.(handler.ProviderLinks) // the sandbox's API, or Stripe's dashboard
	draining := new(atomic.Bool)
	e := handler.New(handler.Deps{
		Log:         log,
		Customers:   uc.Customers,
		Orders:      uc.Orders,
		Checkout:    uc.Checkout,
		Webhooks:    webhooks,
		Admin:       admin,
		EventPoll:   time.Second,
		EventsLive:  eventsLive,
		Idempotency: idem,
		AdminToken:  cfg.AdminToken,
		Operators:   cfg.operators,
		Ready:       func(ctx context.Context) error { return ready(ctx, db, draining) },
		Metrics:     metrics,

		MetricsElsewhere: cfg.MetricsAddr != "",
		MaxStreams:       cfg.MaxStreams,

		// The provider (stripe.go): /v1/webhooks/stripe in Stripe
		// mode, and what the checkout page pays with.
		StripeWebhooks: stripeHooks,
		CheckoutPage:   checkoutPage(cfg),
		RateLimits:     cfg.RateLimits, // ADR 0037

		// The merchant and its catalogue (ADR 0058).
		MerchantKey: cfg.MerchantKey,
		Merchants:   cfg.merchants,
		Products:    &handler.Products{Service: uc.Catalogue, Audit: uc.Admin},
		Shipments:   &handler.Shipments{Service: uc.Shipments, Audit: uc.Admin},
		Holds:       uc.Holds,
		Audit:       uc.Admin,
		// Orders' client secrets (ADR 0059), derived from PAYD_SECRET_KEY.
		ClientSecrets: uc.Tokens,
	})
	jobs := []service.Job{
		{Name: service.JobPurgeIdempotency, Every: time.Minute, Run: service.PurgeRecords(records, now), Log: log, Observer: observer},
		{Name: service.JobExpireOrders, Every: 10 * time.Second, Run: uc.Expire, Log: log, Observer: observer},
		{Name: service.JobRecoverPayments, Every: max(cfg.Lease/3, time.Second), Run: uc.Recoverer.Run, Log: log, Observer: observer},
		{Name: service.JobHolds, Every: max(min(cfg.Lease/3, cfg.AuthorizationTTL/4), time.Second), Run: uc.Holds.Run, Log: log, Observer: observer},
	}
	if cfg.Retention > 0 { // PAYD_RETENTION (ADR 0062)
		jobs = append(jobs, service.Job{Name: service.JobRetention, Every: time.Minute,
			Run: service.Retain(repository.NewRetentionStore(db), cfg.Retention, now, observer), Log: log, Observer: observer})
	}
	jobs = append(jobs, service.Job{Name: service.JobStatsRollup, Every: time.Minute, Run: rollStats(repository.NewStatsStore(db), now), Log: log, Observer: observer})
	jobs = append(jobs, reconcileJobs(cfg, db, uc.Reconciler, log, observer)...) // PAYD_RECONCILE_EVERY
	jobs = append(jobs, notifyWorker(cfg, db, sealer, metrics, log).Job(notifyEvery, log, observer))
	return &Parts{Metrics: metrics, Idempotency: idem, Echo: e, Jobs: jobs, Redis: rds, draining: draining, catalogue: uc.Catalogue}, nil
}

// NewIdempotency is the idempotency engine on db's records, with payd's
// settings and clock (nil: payd's).
func NewIdempotency(cfg Config, db *repository.DB, clock func() time.Time) (*idempotency.Engine, error) {
	sealer, err := idempotency.NewSealer(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("PAYD_SECRET_KEY: %w", err)
	}
	if clock == nil {
		clock = now
	}
	return newIdempotency(cfg, repository.NewRecordStore(db), sealer, clock), nil
}

func newIdempotency(cfg Config, records *repository.RecordStore, sealer *idempotency.Sealer, now func() time.Time) *idempotency.Engine {
	return &idempotency.Engine{Records: records, Sealer: sealer, Lease: cfg.Lease, InflightWait: cfg.InflightWait, TTL: cfg.IdempotencyTTL, Now: now,
		AnswerWithin: cfg.ProviderTimeout + service.InFlightMargin(cfg.ProviderTimeout)}
}

// Hooks are what NewUseCases takes from its caller besides the settings.
type Hooks struct {
	Now      func() time.Time // nil: payd's clock (UTC, microseconds)
	Changes  *service.Changes // the orders' event feed; nil: a new one
	Observer service.Observer // what the use cases report to; nil: Changes alone
	// Answers stores a pay answer settled outside its request (the HTTP
	// layer's PayRecords); nil: not stored.
	Answers service.SettledAnswers
	// Timed wraps the provider port every use case calls (the metrics'
	// stopwatch); nil: the provider as it is.
	Timed func(PaymentProvider) PaymentProvider
}

// UseCases is payd's services on one database, wired to each other, to
// their stores and to the provider: what the HTTP handlers and the jobs
// serve, and what the service tests drive.
type UseCases struct {
	Customers  *service.Customers
	Orders     *service.Orders
	Checkout   *service.Checkout
	Refunds    *service.Refunds
	Disputes   *service.Disputes
	Webhooks   *service.Webhooks
	Recoverer  *service.Recoverer
	Reconciler *service.Reconciler
	Resolver   *service.Resolver
	Admin      *service.Admin
	Catalogue  *service.Catalogue
	Shipments  *service.Shipments
	Holds      *service.Holds                       // captures, cancels' voids and the holds job (ADR 0060)
	Tokens     *service.Tokens                      // customers' tokens and orders' client secrets
	Expire     func(context.Context) (int64, error) // the expire_orders job

	// The stores tests read beside the use cases.
	Discrepancies *repository.DiscrepancyStore
	Ledger        *repository.LedgerStore
	DisputeStore  *repository.DisputeStore
}

// NewUseCases builds stores → services on db, charging through client.
func NewUseCases(cfg Config, db *repository.DB, client PaymentProvider, h Hooks) (*UseCases, error) {
	tokens, err := service.NewTokens(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("PAYD_SECRET_KEY: %w", err)
	}
	now := now // payd's clock, unless the caller brings one
	if h.Now != nil {
		now = h.Now
	}
	changes := h.Changes
	if changes == nil {
		changes = &service.Changes{}
	}
	observer := h.Observer
	if observer == nil {
		observer = changes
	}
	prov := client
	if h.Timed != nil {
		prov = h.Timed(client)
	}
	var (
		tx            = repository.NewTransactor(db)
		orders        = repository.NewOrderStore(db)
		attempts      = repository.NewAttemptStore(db)
		custs         = repository.NewCustomerStore(db)
		products      = repository.NewProductStore(db)
		discrepancies = repository.NewDiscrepancyStore(db)
		refundStore   = repository.NewRefundStore(db)
		audit         = repository.NewAuditStore(db)
		inbox         = repository.NewInboxStore(db)
		runs          = repository.NewRunStore(db)
		ledger        = repository.NewLedgerStore(db)
		disputeStore  = repository.NewDisputeStore(db)
	)
	limits := domain.DefaultLimits
	limits.MaxAmount = decimal.RequireFromString(cfg.MaxAmount)

	refunds := &service.Refunds{Tx: tx, Orders: orders, Attempts: attempts, Store: refundStore,
		Discrepancies: discrepancies, Provider: prov, Now: now, Observer: observer,
		Ledger: ledger, Charges: prov, Audit: audit, Disputes: disputeStore}
	if g, ok := client.(service.RefundGetter); ok { // Stripe: a pending refund is asked by its ID
		refunds.Getter = g
	}
	checkout := &service.Checkout{Tx: tx, Orders: orders, Attempts: attempts, Provider: prov,
		Now: now, Orphans: refunds, Observer: observer, Answers: h.Answers, ProviderTimeout: cfg.ProviderTimeout,
		Batch: repository.NewPayBatch(db), Ledger: ledger, AuthorizationTTL: cfg.AuthorizationTTL}
	holds := &service.Holds{Tx: tx, Orders: orders, Actions: repository.NewHoldActionStore(db), Attempts: attempts,
		Ledger: ledger, Provider: prov, Now: now, Observer: observer, Lease: cfg.Lease, Timeout: cfg.ProviderTimeout}
	// A charge reported for other money is recorded, on every path (ADR 0010).
	checkout.Discrepancies = discrepancies
	if c, ok := client.(service.ChargeCanceller); ok { // Stripe: a failed PaymentIntent is cancelled before release
		checkout.Canceller = c
	}
	disputes := &service.Disputes{Tx: tx, Store: disputeStore, Ledger: ledger, Orders: orders, Attempts: attempts,
		Discrepancies: discrepancies, Audit: audit, Charges: prov, Finder: prov, Now: now, Observer: observer}
	receiver := &service.Webhooks{Inbox: inbox, Attempts: attempts, Orders: orders,
		Checkout: checkout, Refunds: refunds, Discrepancies: discrepancies, Now: now, Provider: prov, // Provider: ADR 0010
		Observer: observer, Disputes: disputes}
	receiver.SameCharge = cfg.Stripe.Provider == "stripe" // a Stripe event for another PaymentIntent is a discrepancy
	recoverer := &service.Recoverer{Checkout: checkout, Attempts: attempts, Orders: orders, Provider: prov, Refunds: refunds, Lease: cfg.Lease, Now: now,
		ActionTTL: cfg.OrderTTL}
	reconciler := &service.Reconciler{Tx: tx, Orders: orders, Attempts: attempts, Discrepancies: discrepancies, Runs: runs,
		Provider: prov, Lease: cfg.Lease, Now: now, Observer: observer,
		RefundStore: refundStore, Refunds: prov, Outside: refunds, Ledger: ledger, // refunds compared too
		Disputes: prov, DisputeBook: disputes, // and disputes, with the provider's list
		Books:       refunds,                                                             // and orders repaired from their ledgers (ADR 0055)
		Charges:     prov,                                                                // a settlement file's line is held to the provider's owner of its charge
		Checkpoints: repository.NewCheckpointStore(db), ResumeWithin: cfg.IdempotencyTTL} // a run payd did not finish resumes (ADR 0068)
	return &UseCases{
		Customers: &service.Customers{Store: custs, Tokens: tokens, Now: now, ReplayWindow: cfg.IdempotencyTTL,
			Cache: service.NewTokenCache(service.TokenCacheTTL, service.TokenCacheSize, nil)},
		Orders: &service.Orders{Store: orders, Attempts: attempts, Products: products, Customers: custs, Limits: limits, TTL: cfg.OrderTTL,
			Now: now, Observer: observer, Feed: changes, CaptureMethod: domain.CaptureMethod(cfg.CaptureMethod), Holds: holds},
		Holds:      holds,
		Tokens:     tokens,
		Checkout:   checkout,
		Refunds:    refunds,
		Disputes:   disputes,
		Webhooks:   receiver,
		Recoverer:  recoverer,
		Reconciler: reconciler,
		Resolver: &service.Resolver{Tx: tx, Orders: orders, Attempts: attempts, Discrepancies: discrepancies, Checkout: checkout,
			Recoverer: recoverer, Refunds: refunds, Charges: prov, Now: now, Ledger: ledger},
		Admin: &service.Admin{Orders: orders, Attempts: attempts, Inbox: inbox, Audit: audit, Refunds: refundStore, Discrepancies: discrepancies,
			RunList: runs, CustomerList: custs, Ledger: ledger, Disputes: disputeStore, StatsReader: repository.NewStatsStore(db), Now: now},
		Catalogue: &service.Catalogue{Store: products, MaxPrice: limits.MaxAmount, Now: now},
		Shipments: &service.Shipments{Store: orders, Now: now, Observer: observer},
		Expire:    service.ExpireOrders(orders, now, observer),

		Discrepancies: discrepancies,
		Ledger:        ledger,
		DisputeStore:  disputeStore,
	}, nil
}

// notifyEvery is how often each replica's notify worker looks for events
// to fan out and deliveries due (a full pass runs again at once).
const notifyEvery = time.Second

// notifyWorker is the worker that tells the merchant's endpoints (ADR
// 0053), with the endpoint from PAYD_NOTIFY_URL if set.
func notifyWorker(cfg Config, db *repository.DB, sealer *idempotency.Sealer, metrics *telemetry.Metrics, log *slog.Logger) *notify.Worker {
	policy := cfg.notifyPolicy()
	hc := notify.NewClient(cfg.NotifyTimeout, policy)
	if cfg.NotifyVia != "" {
		notify.DialVia(hc, cfg.NotifyVia)
	}
	w := &notify.Worker{Store: repository.NewNotifyStore(db), Endpoints: repository.NewEndpointStore(db, sealer),
		Sender: notify.Sender{Client: hc, Policy: policy},
		Lease:  notify.LeaseFor(cfg.NotifyTimeout), Now: now, Log: log, Observer: metrics,
		Tracer: cfg.tracing.TracerProvider(), PerEndpoint: 8}
	if cfg.NotifyURL != "" {
		e := notify.EnvEndpoint(cfg.NotifyURL, cfg.NotifySecret, now())
		w.Env = &e
	}
	return w
}

// rollStats is the overview's rollup job (ADR 0065): each pass counts the
// hours over for 10 minutes, 500 at most (a full pass runs again at once),
// then again the hours of attempts changed since the last pass, less 5
// minutes for a transaction still open then. A pass holds the rollup for
// up to 5 minutes; another replica's pass meanwhile does nothing.
func rollStats(stats *repository.StatsStore, now func() time.Time) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		n, err := stats.Roll(ctx, repository.RollupPass{Now: now(), Settle: 10 * time.Minute, Margin: 5 * time.Minute, Lease: 5 * time.Minute, MaxHours: 500})
		return int64(n), err
	}
}
