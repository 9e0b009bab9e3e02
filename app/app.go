// Package app is payd put together: its configuration (every PAYD_*
// variable and flag, and the checks that refuse unsafe settings) and the
// one wiring of stores, services and handlers, Build, that `payd serve`
// and every end-to-end test run.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/shopspring/decimal"
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/handler"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/redisx"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(handler.TraceLogs(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// now is payd's clock: UTC, at the microsecond precision both databases store.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Migrate is `payd migrate up|status`: apply the pending migrations, or
// list every migration and whether it is applied.
func Migrate(ctx context.Context, action string, cfg Config, stdout io.Writer) error {
	db, err := repository.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if action == "up" {
		if err := repository.Migrate(ctx, db); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	}
	states, err := repository.MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	for _, s := range states {
		state := "pending"
		if s.Applied {
			state = "applied " + s.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%05d  %-36s %s\n", s.Version, s.Name, state)
	}
	return nil
}

// App is payd built: its database open and migrated, its listener bound,
// its provider reachable and every use case wired to them. Serve runs it;
// Close releases what Build took.
type App struct {
	cfg    Config
	log    *slog.Logger
	db     *repository.DB
	ln     net.Listener
	base   string
	banner io.Writer
	tr     tracing
	parts  *Parts
	closes []func() // run by Close, last first
}

// options are Build's optional inputs.
type options struct {
	logs, banner io.Writer
	ln           net.Listener
	tp           trace.TracerProvider
}

// Option changes how Build builds payd.
type Option func(*options)

// Logs sends payd's JSON log to w (the command line: stderr).
func Logs(w io.Writer) Option { return func(o *options) { o.logs = w } }

// Banner sends the welcome banner Serve prints to w (the command line:
// stdout).
func Banner(w io.Writer) Option { return func(o *options) { o.banner = w } }

// Listener serves on ln instead of a listener on PAYD_ADDR.
func Listener(ln net.Listener) Option { return func(o *options) { o.ln = ln } }

// TracerProvider records spans in tp instead of exporting them over OTLP
// (tests).
func TracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// Build opens and migrates the database, keeps the development secrets,
// binds the listener, starts tracing and the provider (the in-process
// sandbox unless PAYD_PROVIDER_URL or PAYD_PROVIDER=stripe says otherwise)
// and wires payd. It is the one place payd's object graph is built: main
// and every end-to-end test come through it.
func Build(ctx context.Context, cfg Config, opts ...Option) (_ *App, err error) {
	o := options{logs: io.Discard, banner: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tp != nil {
		cfg.tracerProvider = o.tp
	}
	a := &App{cfg: cfg, log: newLogger(cfg, o.logs), banner: o.banner}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	log := a.log
	repository.LogDriverTo(log)
	db, err := repository.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a.db = db
	a.onClose(func() { _ = db.Close() })
	log.Info("database opened", "dialect", db.Dialect(), "galera", db.Galera())
	if err := repository.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// Only once the database is there: a payd that cannot reach it leaves
	// no secrets file behind.
	if err := a.cfg.keepDevSecrets(); err != nil {
		return nil, err
	}
	if a.ln = o.ln; a.ln == nil {
		if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, err
		}
	}
	ln := a.ln
	a.onClose(func() { _ = ln.Close() })
	a.base = "http://" + ln.Addr().String()

	// Tracing (ADR 0022): on only with OTEL_EXPORTER_OTLP_ENDPOINT; spans
	// still buffered are flushed when payd stops.
	if a.tr, err = startTracing(ctx, a.cfg); err != nil {
		return nil, err
	}
	tr := a.tr
	a.onClose(func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.shutdown(flushCtx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	})

	prov, stopSandbox, err := providerFor(ctx, a.cfg, a.base, db, log, tr.providerOptions(a.cfg)...)
	if err != nil {
		return nil, err
	}
	a.onClose(stopSandbox)
	if sandbox, ok := prov.(*provider.Client); ok && a.cfg.ProviderURL == "" {
		a.cfg.sandboxURL = sandbox.BaseURL() // printed in the banner
	}

	if a.parts, err = Wire(a.cfg, db, prov, log); err != nil {
		return nil, err
	}
	a.onClose(a.parts.closeRedis)
	return a, nil
}

// onClose adds f to what Close runs.
func (a *App) onClose(f func()) { a.closes = append(a.closes, f) }

// Close releases what Build took: Redis, the sandbox, the traces still
// buffered, the listener and the database, in that order.
func (a *App) Close() {
	for i := len(a.closes) - 1; i >= 0; i-- {
		a.closes[i]()
	}
	a.closes = nil
}

// Addr is where payd listens.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Serve runs the API until ctx ends, then shuts down gracefully: the
// listener closes, in-flight requests finish, background jobs stop. It
// prints the welcome banner once payd listens.
func (a *App) Serve(ctx context.Context) error {
	cfg, log, p := a.cfg, a.log, a.parts
	stopAdmin, err := serveAdmin(cfg, p.Metrics, log)
	if err != nil {
		return fmt.Errorf("PAYD_METRICS_ADDR or PAYD_PPROF_ADDR: %w", err)
	}
	defer stopAdmin()
	jobsCtx, stopJobs := context.WithCancel(ctx)
	defer stopJobs()
	for _, j := range p.Jobs {
		go j.Loop(jobsCtx)
	}
	if p.Redis != nil {
		go p.Redis.Listen(jobsCtx)
	}

	// Timeouts cut slow and idle clients, so a few of them cannot hold
	// every connection. Event streams lift the write deadline for
	// themselves (handler.Events).
	srv := &http.Server{Handler: a.tr.server(p.Echo), ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(a.ln) }()
	log.Info("payd listening", "addr", a.ln.Addr().String(), "env", cfg.Env)
	printWelcome(a.banner, cfg, a.base)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopJobs()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	// In-flight requests have finished; payments left with an unknown
	// outcome keep their records processing. Release those leases so a
	// retry (on another replica, or after restart) recovers them at once.
	if n, err := p.Idempotency.ReleaseHeld(shutdownCtx); err != nil {
		log.Warn("release leases", "err", err, "released", n)
	} else if n > 0 {
		log.Info("released leases", "count", n)
	}
	log.Info("payd stopped")
	return nil
}

// Run is `payd serve`: Build, Serve until ctx ends, Close.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	a, err := Build(ctx, cfg, Logs(stderr), Banner(stdout))
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx)
}

// PaymentProvider is every port payd's use cases need from the provider:
// the sandbox's client (provider.Client) or Stripe's (stripeprovider.Client).
type PaymentProvider interface {
	service.PaymentProvider
	service.RefundProvider
	service.ChargeLister
	// The books (ADR 0030): asked before money moves on anyone's word,
	// and listed by reconciliation.
	service.ChargeFinder
	service.RefundLister
	service.DisputeLister
	service.DisputeFinder
}

// providerFor returns the provider client: Stripe (PAYD_PROVIDER=stripe),
// the sandbox at PAYD_PROVIDER_URL, or a sandbox started here on loopback
// that delivers its webhooks to this very payd.
func providerFor(ctx context.Context, cfg Config, base string, db *repository.DB, log *slog.Logger, opts ...provider.Option) (PaymentProvider, func(), error) {
	if cfg.Stripe.Provider == "stripe" {
		sp, err := newStripe(cfg, db, log)
		return sp, func() {}, err
	}
	if cfg.ProviderURL != "" {
		return provider.NewClient(cfg.ProviderURL, opts...), func() {}, nil
	}
	hook := cfg.SandboxWebhookURL
	if hook == "" {
		hook = base + "/v1/webhooks/provider"
	}
	stop, addr, err := startSandbox(ctx, cfg, hook, log)
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

	Metrics *handler.Metrics // served on its own listener when PAYD_METRICS_ADDR is set
	Redis   *redisx.Redis    // nil without PAYD_REDIS_URL
}

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
	tokens, err := service.NewTokens(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("PAYD_SECRET_KEY: %w", err)
	}
	crashAt(cfg.Fault)
	var (
		tx            = repository.NewTransactor(db)
		orders        = repository.NewOrderStore(db)
		attempts      = repository.NewAttemptStore(db)
		records       = repository.NewRecordStore(db)
		custs         = repository.NewCustomerStore(db)
		discrepancies = repository.NewDiscrepancyStore(db)
		refundStore   = repository.NewRefundStore(db)
		audit         = repository.NewAuditStore(db)
		inbox         = repository.NewInboxStore(db)
		runs          = repository.NewRunStore(db)
		ledger        = repository.NewLedgerStore(db)
		disputeStore  = repository.NewDisputeStore(db)
		changes       = &service.Changes{}
	)
	metrics := handler.NewMetrics()
	for name, pool := range db.Pools() { // go_sql_* series, one db_name per pool
		metrics.Register(collectors.NewDBStatsCollector(pool, name))
	}
	// Signals (ADR 0022): every provider call timed, the backlog read on
	// scrape, outcomes logged.
	prov := observedProvider{next: client, observe: metrics.ProviderCalled}
	metrics.WatchBacklog(readBacklog(db), backlogTTL, backlogTimeout)
	db.OnRetry(func(ctx context.Context, reason string, attempt int, err error) {
		metrics.DBRetried(reason)
		log.DebugContext(ctx, "database conflict, retrying", "reason", reason, "attempt", attempt, "err", err)
	})
	limits := domain.DefaultLimits
	limits.MaxAmount = decimal.RequireFromString(cfg.MaxAmount)

	idem := &idempotency.Engine{Records: records, Sealer: sealer, Lease: cfg.Lease, InflightWait: cfg.InflightWait, TTL: cfg.IdempotencyTTL, Now: now,
		Observer: metrics}
	// What the use cases do reaches this process's event streams, the
	// metrics and, for payments settled outside their request, the pay
	// request's idempotency record.
	observer := service.Observers{changes, metrics, handler.PayRecords{Engine: idem}, handler.OutcomeLog{Log: log}}
	rds, eventsLive, err := wireRedis(cfg, idem, changes, metrics, log)
	if err != nil {
		return nil, err
	}
	if rds != nil {
		observer = append(observer, redisx.Events{Redis: rds})
	}
	refunds := &service.Refunds{Tx: tx, Orders: orders, Attempts: attempts, Store: refundStore,
		Discrepancies: discrepancies, Provider: prov, Now: now, Observer: observer,
		Ledger: ledger, Charges: prov, Audit: audit, Disputes: disputeStore}
	if g, ok := client.(service.RefundGetter); ok { // Stripe: a pending refund is asked by its ID
		refunds.Getter = g
	}
	checkout := &service.Checkout{Tx: tx, Orders: orders, Attempts: attempts, Provider: prov,
		Now: now, Orphans: refunds, Observer: observer, ProviderTimeout: cfg.ProviderTimeout,
		Batch: repository.NewPayBatch(db), Ledger: ledger}
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
	receiver.SameCharge = cfg.Stripe.Provider == "stripe"     // a Stripe event for another PaymentIntent is a discrepancy
	stripeHooks, err := stripeWebhooks(cfg, client, receiver) // nil unless PAYD_PROVIDER=stripe
	if err != nil {
		return nil, fmt.Errorf("STRIPE_WEBHOOK_SECRET: %w", err)
	}
	var webhooks *handler.Webhooks // the sandbox's events: nil in Stripe mode, one endpoint per mode
	if stripeHooks == nil {
		if webhooks, err = handler.NewWebhooks(receiver, provider.ParseEvent, cfg.WebhookSecret); err != nil {
			return nil, fmt.Errorf("PAYD_WEBHOOK_SECRET: %w", err)
		}
		webhooks.Rejected = metrics.WebhookRejected
	}
	recoverer := &service.Recoverer{Checkout: checkout, Attempts: attempts, Orders: orders, Provider: prov, Refunds: refunds, Lease: cfg.Lease, Now: now,
		ActionTTL: cfg.OrderTTL}
	reconciler := &service.Reconciler{Tx: tx, Orders: orders, Attempts: attempts, Discrepancies: discrepancies, Runs: runs,
		Provider: prov, Lease: cfg.Lease, Now: now, Observer: observer,
		RefundStore: refundStore, Refunds: prov, Outside: refunds, Ledger: ledger, // refunds compared too
		Disputes: prov, DisputeBook: disputes} // and disputes, with the provider's list
	admin := &handler.Admin{
		Service: &service.Admin{Orders: orders, Attempts: attempts, Inbox: inbox, Audit: audit, Refunds: refundStore, Discrepancies: discrepancies,
			RunList: runs, CustomerList: custs, Ledger: ledger, Disputes: disputeStore, Now: now},
		Refunds:   refunds,
		Reconcile: reconciler,
		Resolver: &service.Resolver{Tx: tx, Orders: orders, Attempts: attempts, Discrepancies: discrepancies, Checkout: checkout,
			Recoverer: recoverer, Refunds: refunds, Charges: prov, Now: now, Ledger: ledger},
		Records:     idem,
		Settlements: settlementsFor(cfg), // Stripe mode: a balance-transactions export (stripe.go)
	}
	e := handler.New(handler.Deps{
		Log: log,
		Customers: &service.Customers{Store: custs, Tokens: tokens, Now: now, ReplayWindow: cfg.IdempotencyTTL,
			Cache: service.NewTokenCache(service.TokenCacheTTL, service.TokenCacheSize, nil)},
		Orders:      &service.Orders{Store: orders, Attempts: attempts, Limits: limits, TTL: cfg.OrderTTL, Now: now, Observer: observer, Feed: changes},
		Checkout:    checkout,
		Webhooks:    webhooks,
		Admin:       admin,
		EventPoll:   time.Second,
		EventsLive:  eventsLive,
		Idempotency: idem,
		AdminToken:  cfg.AdminToken,
		Operators:   cfg.operators,
		Ready:       func(ctx context.Context) error { return ready(ctx, db) },
		Metrics:     metrics,

		MetricsElsewhere: cfg.MetricsAddr != "",
		MaxStreams:       cfg.MaxStreams,

		// The provider (stripe.go): /v1/webhooks/stripe in Stripe
		// mode, and what the checkout page pays with.
		StripeWebhooks: stripeHooks,
		CheckoutPage:   checkoutPage(cfg),
	})
	jobs := []service.Job{
		{Name: "purge_idempotency", Every: time.Minute, Run: service.PurgeRecords(records, now), Log: log, Observer: observer},
		{Name: "expire_orders", Every: 10 * time.Second, Run: service.ExpireOrders(orders, now, observer), Log: log, Observer: observer},
		{Name: "recover_payments", Every: max(cfg.Lease/3, time.Second), Run: recoverer.Run, Log: log, Observer: observer},
	}
	jobs = append(jobs, reconcileJobs(cfg, db, reconciler, log, observer)...) // PAYD_RECONCILE_EVERY
	return &Parts{Metrics: metrics, Idempotency: idem, Echo: e, Jobs: jobs, Redis: rds}, nil
}

func ready(ctx context.Context, db *repository.DB) error {
	if err := db.Ping(ctx); err != nil {
		return errors.New("database unreachable")
	}
	pending, err := repository.Pending(ctx, db)
	if err != nil {
		return errors.New("migration state unknown")
	}
	if pending {
		return errors.New("migrations pending")
	}
	return nil
}
