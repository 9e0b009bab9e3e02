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
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/telemetry"
)

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(telemetry.TraceLogs(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// now is payd's clock: UTC, at the microsecond precision both databases store.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// migrationTimeout bounds one statement of `payd migrate` on MySQL: an
// index built on a table of ten million rows takes minutes.
const migrationTimeout = time.Hour

// Migrate is `payd migrate up|status`: apply the pending migrations, each
// logged as `payd serve` logs it (one JSON line per version, on stdout
// here), or list every migration and whether it is applied.
func Migrate(ctx context.Context, action string, cfg Config, stdout io.Writer) error {
	db, err := repository.Open(ctx, cfg.DatabaseURL, repository.LongStatements(migrationTimeout))
	if err != nil {
		return err
	}
	defer db.Close()
	if action == "up" {
		applied, err := repository.MigrateUp(ctx, db)
		logMigrations(newLogger(cfg, stdout), applied)
		if err != nil {
			return err
		}
		if len(applied) == 0 {
			fmt.Fprintln(stdout, "no migrations pending")
			return nil
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
	tr     telemetry.Tracing
	parts  *Parts
	closes []func()   // run by Close, last first
	files  startFiles // what this start created, removed if it fails
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

// Build binds the listener, opens and migrates the database, keeps the
// development secrets and holds the secret key to the database's, starts
// tracing and the provider (the in-process sandbox unless
// PAYD_PROVIDER_URL or PAYD_PROVIDER=stripe says otherwise) and wires payd
// through Wire. main comes through it (cli.Main runs serve with it), and so
// do the end-to-end tests that start payd in-process or as an OS process of
// the built binary; the few that need several replicas on one database of
// their own, or a provider stand-in of their own, call Wire directly and
// serve its Echo with httptest.
//
// What can fail without touching the disk comes first: the listeners are
// bound before a database is opened, so a wrong address or a port in use
// creates no file. A start that fails later removes the files it created
// (startFiles), and only those.
func Build(ctx context.Context, cfg Config, opts ...Option) (_ *App, err error) {
	o := options{logs: io.Discard, banner: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	a := &App{cfg: cfg, log: newLogger(cfg, o.logs), banner: o.banner}
	defer func() {
		if err != nil {
			a.Close()
			a.files.remove()
		}
	}()
	log := a.log
	if a.ln = o.ln; a.ln == nil {
		if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.settingName("PAYD_ADDR"), err)
		}
	}
	ln := a.ln
	a.onClose(func() { _ = ln.Close() })
	a.base = "http://" + ln.Addr().String()
	var sandboxLn net.Listener // the in-process sandbox's, bound now for the same reason
	if cfg.Stripe.Provider != "stripe" && cfg.ProviderURL == "" {
		if _, err := sandboxConfig(cfg, "", log); err != nil {
			return nil, err
		}
		if sandboxLn, err = net.Listen("tcp", cfg.SandboxAddr); err != nil {
			return nil, fmt.Errorf("%s: start sandbox: %w", cfg.settingName("PAYD_SANDBOX_ADDR"), err)
		}
		a.onClose(func() { _ = sandboxLn.Close() })
	}

	// Tracing (ADR 0022, ADR 0035): as the OTEL_* variables say, off
	// unless they name an exporter; spans still buffered are flushed when
	// payd stops. Started before the database: its pools are wrapped when
	// it is on.
	if a.tr, err = telemetry.StartTracing(ctx, telemetry.TracingConfig{Env: cfg.Env, Provider: o.tp, Log: log}); err != nil {
		return nil, err
	}
	tr := a.tr
	a.cfg.tracing = tr
	a.onClose(func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(flushCtx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	})
	repository.LogDriverTo(log)
	a.files.createDB(cfg.DatabaseURL)
	db, err := repository.Open(ctx, cfg.DatabaseURL, tr.DatabaseOptions()...)
	if err != nil {
		return nil, err
	}
	a.db = db
	a.onClose(func() { _ = db.Close() })
	log.Info("database opened", "dialect", db.Dialect(), "galera", db.Galera())
	applied, err := repository.MigrateUp(ctx, db)
	logMigrations(log, applied)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// Only once the database is there: a payd that cannot reach it leaves
	// no secrets file behind.
	made, err := a.cfg.keepDevSecrets()
	a.files.add(made)
	if err != nil {
		return nil, err
	}
	if err := checkSecretKey(ctx, a.cfg, db, made); err != nil {
		return nil, err
	}

	if sandboxLn != nil {
		a.files.createDB(cfg.SandboxDatabaseURL)
	}
	prov, stopSandbox, err := providerFor(ctx, a.cfg, a.base, sandboxLn, log, tr)
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
	seedDemoCatalogue(ctx, a.cfg, sandboxLn != nil, a.parts.catalogue, log)
	a.onClose(a.parts.closeRedis)
	return a, nil
}

// logMigrations logs each migration a start applied, one line each, and
// nothing when none was pending.
func logMigrations(log *slog.Logger, applied []repository.MigrationState) {
	for _, m := range applied {
		log.Info("migration applied", "version", m.Version, "name", m.Name)
	}
}

// adminListenerName names the settings whose address an admin listener
// failed on (ServeAdmin's error), as they were given.
func (c Config) adminListenerName(err error) string {
	var le *telemetry.ListenError
	if !errors.As(err, &le) {
		return c.settingName("PAYD_METRICS_ADDR") + " or " + c.settingName("PAYD_PPROF_ADDR")
	}
	var names []string
	if c.MetricsAddr == le.Addr {
		names = append(names, c.settingName("PAYD_METRICS_ADDR"))
	}
	if c.PprofAddr == le.Addr {
		names = append(names, c.settingName("PAYD_PPROF_ADDR"))
	}
	return strings.Join(names, " and ")
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

// Serve runs the API until ctx ends, then shuts down gracefully: /readyz
// answers 503 for PAYD_SHUTDOWN_DELAY while payd still serves (drain),
// then the listener closes, in-flight requests finish, background jobs
// stop. It prints the welcome banner once payd listens.
func (a *App) Serve(ctx context.Context) error {
	cfg, log, p := a.cfg, a.log, a.parts
	stopAdmin, err := telemetry.ServeAdmin(telemetry.AdminConfig{MetricsAddr: cfg.MetricsAddr, PprofAddr: cfg.PprofAddr,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}, p.Metrics, log)
	if err != nil {
		// Nothing was served: the start failed, and leaves no file it made.
		a.Close()
		a.files.remove()
		return fmt.Errorf("%s: %w", cfg.adminListenerName(err), err)
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
	srv := &http.Server{Handler: a.tr.Server(p.Echo), ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
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
	if err := a.drain(errc); err != nil {
		return err
	}
	stopJobs()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DrainTimeout)
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

// drain is the shutdown delay (PAYD_SHUTDOWN_DELAY): /readyz answers 503
// while every other route serves as before, so a load balancer or
// Kubernetes takes payd out of rotation before its listener closes. A
// second SIGTERM or SIGINT ends the delay at once (the first one ended
// Serve's ctx in main); the server failing ends it with that error.
func (a *App) drain(errc <-chan error) error {
	delay := a.cfg.ShutdownDelay
	if delay <= 0 {
		a.parts.Drain()
		return nil
	}
	// Registered only now: the first signal has already been taken by
	// main's handler and ended ctx. Before /readyz turns, so whoever sees
	// the 503 can cut the delay short.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	a.log.Info("draining", "delay", delay.String())
	a.parts.Drain()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case sig := <-again:
		a.log.Info("draining cut short", "signal", sig.String())
	case err := <-errc:
		return err
	}
	return nil
}

// DrainTimeout is how long Serve lets in-flight requests finish once the
// shutdown delay is over. The Helm chart's shutdown.drainSeconds and the
// compose file's stop_grace_period are sized from it (their tests say so).
const DrainTimeout = 30 * time.Second

// Run is `payd serve`: Build, Serve until ctx ends, Close.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	a, err := Build(ctx, cfg, Logs(stderr), Banner(stdout))
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx)
}

// ready is /readyz: payd shutting down, its database unreachable or its
// migrations pending is not ready.
func ready(ctx context.Context, db *repository.DB, draining *atomic.Bool) error {
	if draining.Load() {
		return errors.New("shutting down")
	}
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
