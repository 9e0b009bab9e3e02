package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/handler"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/redisx"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// run is payd's whole life: parse the command line, then serve, migrate,
// run the sandbox or the demo until ctx ends. End-to-end tests call it on
// port 0. Help that was asked for is a success.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := "serve"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help":
			printUsage(stdout)
			return nil
		case !strings.HasPrefix(a, "-"):
			sub, args = a, args[1:]
		}
	}
	switch sub {
	case "serve":
		cfg, err := loadConfig(sub, args, getenv, stdout)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "sandbox":
		cfg, err := loadConfig(sub, args, getenv, stdout)
		if err != nil {
			return err
		}
		return runSandbox(ctx, cfg, stdout, stderr)
	case "demo":
		return demo(ctx, args, stdout)
	case "admin": // operators' CLI against a running payd (admin_cli.go)
		return adminCommand(ctx, args, getenv, stdout)
	case "version":
		if err := parseFlags(flag.NewFlagSet("payd version", flag.ContinueOnError), sub, args, stdout); err != nil {
			return err
		}
		printVersion(stdout)
		return nil
	case "help":
		return help(args, stdout)
	}
	return fmt.Errorf("unknown command %q: run 'payd help' for the list", sub)
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(telemetry.TraceLogs(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// now is payd's clock: UTC, at the microsecond precision both databases store.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "up" || args[0] == "status") {
		cfg, err := loadConfig("migrate", args[1:], getenv, stdout)
		if err != nil {
			return err
		}
		return migrateDB(ctx, args[0], cfg, stdout)
	}
	if _, err := loadConfig("migrate", args, getenv, stdout); err != nil { // -h
		return err
	}
	return errors.New("usage: payd migrate up|status (run 'payd help migrate')")
}

func migrateDB(ctx context.Context, action string, cfg config, stdout io.Writer) error {
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

// serve runs the API until ctx ends, then shuts down gracefully: the
// listener closes, in-flight requests finish, background jobs stop.
func serve(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	repository.LogDriverTo(log)
	db, err := repository.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	log.Info("database opened", "dialect", db.Dialect(), "galera", db.Galera())
	if err := repository.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Only once the database is there: a payd that cannot reach it leaves
	// no secrets file behind.
	if err := cfg.keepDevSecrets(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()

	// Tracing (ADR 0022): on only with OTEL_EXPORTER_OTLP_ENDPOINT; spans
	// still buffered are flushed when payd stops.
	tr, err := telemetry.StartTracing(ctx, telemetry.TracingConfig{Endpoint: cfg.OTLPEndpoint, Env: cfg.Env, Provider: cfg.tracerProvider})
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(flushCtx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()

	prov, stopSandbox, err := providerFor(ctx, cfg, base, db, log, tr.ProviderOptions(cfg.ProviderTimeout)...)
	if err != nil {
		return err
	}
	defer stopSandbox()
	if sandbox, ok := prov.(*provider.Client); ok && cfg.ProviderURL == "" {
		cfg.sandboxURL = sandbox.BaseURL() // printed in the banner
	}

	a, err := wire(cfg, db, prov, log)
	if err != nil {
		return err
	}
	defer a.closeRedis()
	stopAdmin, err := telemetry.ServeAdmin(telemetry.AdminConfig{MetricsAddr: cfg.MetricsAddr, PprofAddr: cfg.PprofAddr,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}, a.metrics, log)
	if err != nil {
		return fmt.Errorf("PAYD_METRICS_ADDR or PAYD_PPROF_ADDR: %w", err)
	}
	defer stopAdmin()
	jobsCtx, stopJobs := context.WithCancel(ctx)
	defer stopJobs()
	for _, j := range a.jobs {
		go j.Loop(jobsCtx)
	}
	if a.redis != nil {
		go a.redis.Listen(jobsCtx)
	}

	// Timeouts cut slow and idle clients, so a few of them cannot hold
	// every connection. Event streams lift the write deadline for
	// themselves (handler.Events).
	srv := &http.Server{Handler: tr.Server(a.echo), ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("payd listening", "addr", ln.Addr().String(), "env", cfg.Env)
	printWelcome(stdout, cfg, base)

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
	if n, err := a.idem.ReleaseHeld(shutdownCtx); err != nil {
		log.Warn("release leases", "err", err, "released", n)
	} else if n > 0 {
		log.Info("released leases", "count", n)
	}
	log.Info("payd stopped")
	return nil
}

// paymentProvider is every port payd's use cases need from the provider:
// the sandbox's client (provider.Client) or Stripe's (stripeprovider.Client).
type paymentProvider = telemetry.Provider

// readBacklog is the backlog gauges' database read.
func readBacklog(db *repository.DB) func(context.Context) (telemetry.Backlog, error) {
	return func(ctx context.Context) (telemetry.Backlog, error) {
		b, err := repository.ReadBacklog(ctx, db)
		return telemetry.Backlog(b), err
	}
}

// providerFor returns the provider client: Stripe (PAYD_PROVIDER=stripe),
// the sandbox at PAYD_PROVIDER_URL, or a sandbox started here on loopback
// that delivers its webhooks to this very payd.
func providerFor(ctx context.Context, cfg config, base string, db *repository.DB, log *slog.Logger, opts ...provider.Option) (paymentProvider, func(), error) {
	if cfg.Stripe.Provider == "stripe" {
		sp, err := newStripe(cfg, log)
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

// app is payd wired together.
type app struct {
	idem *idempotency.Engine
	echo *echo.Echo
	jobs []service.Job

	metrics *telemetry.Metrics // served on its own listener when PAYD_METRICS_ADDR is set
	redis   *redisx.Redis      // nil without PAYD_REDIS_URL
}

func (a *app) closeRedis() {
	if a.redis != nil {
		_ = a.redis.Close()
	}
}

// wire builds stores → services → handlers.
func wire(cfg config, db *repository.DB, client paymentProvider, log *slog.Logger) (*app, error) {
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
	metrics := telemetry.NewMetrics()
	for name, pool := range db.Pools() { // go_sql_* series, one db_name per pool
		metrics.Register(collectors.NewDBStatsCollector(pool, name))
	}
	// Telemetry (ADR 0022): every provider call timed, the backlog read on
	// scrape, outcomes logged.
	prov := telemetry.ObservedProvider{Next: client, Observe: metrics.ProviderCalled}
	metrics.WatchBacklog(readBacklog(db), telemetry.BacklogTTL, telemetry.BacklogTimeout)
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
	observer := service.Observers{changes, metrics, telemetry.OutcomeLog{Log: log}}
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
		Now: now, Orphans: refunds, Observer: observer, Answers: handler.PayRecords{Engine: idem}, ProviderTimeout: cfg.ProviderTimeout,
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
	return &app{metrics: metrics, idem: idem, echo: e, jobs: jobs, redis: rds}, nil
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
