// Command paydbench measures payd: it builds payd, runs it on a fresh
// database against a provider stub that answers every charge at once from
// memory, drives registrations, orders, new pays, replays and orders of a
// product with counted stock (the catalogue phase) at -c concurrent
// clients, then runs the raw-SQL floor (payd's own pay
// statements through database/sql, no HTTP, no ORM) on the same database,
// and prints throughput, latency, the payd/floor ratios, payd's CPU per
// request, statements per request and payd's peak RSS.
//
//	go run ./cmd/paydbench [-db mysql://root:@127.0.0.1:3306/test] [-c 16] [-n 2000] [-redis redis://127.0.0.1:6380/0] [-json]
//
// -report docs/performance.md rewrites the generated part of that document
// with the run's figures and the command that reproduces them, and -chart
// docs/performance.svg draws them: payd's and the floor's requests per
// second and p99 latency per phase. -from FILE takes the figures from an
// earlier run's -json output instead of measuring.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "paydbench:", err)
		os.Exit(1)
	}
}

// options are paydbench's flags.
type options struct {
	db       string // empty: SQLite in a temporary folder
	clients  int
	requests int
	json     bool
	pprof    string
	redis    string // empty: payd without Redis; else its PAYD_REDIS_URL
	payd     string // a payd binary to measure; empty: build ./cmd/payd
	chart    string // write the SVG chart here; empty: none
	report   string // write the Markdown report here; empty: none
	from     string // read the figures from this -json output instead of measuring
	// preload, when above 0, fills the database with that many orders of
	// a grown shop's shape before payd is measured (preload.go);
	// preloadKeep keeps that database for the next run with the same
	// -preload, which then skips the load.
	preload     int
	preloadKeep bool
	// sizes compares earlier runs' -json outputs (comma-separated),
	// smallest database first, instead of measuring (growth.go).
	sizes string
	// reads is how many requests of each operators' read to time; -1:
	// max(20, -n/20).
	reads int
	// reconcile, with preload, times reconciliations of the preload's last
	// 30 days after payd's phases (reconcile.go).
	reconcile bool
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("paydbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.db, "db", "", "mysql://USER:PASS@HOST:PORT/DB: run on a fresh database on that server (created, then dropped); empty: SQLite in a temporary folder")
	fs.IntVar(&o.clients, "c", 16, "concurrent clients")
	fs.IntVar(&o.requests, "n", 2000, "requests per phase (new pays, replays)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.redis, "redis", "", "PAYD_REDIS_URL for payd (redis://host:port/db or a cluster URL); empty: payd without Redis")
	fs.StringVar(&o.payd, "payd", "", "a payd binary to measure instead of building ./cmd/payd (to compare two builds)")
	fs.StringVar(&o.chart, "chart", "", "write an SVG chart of payd's and the floor's req/s and p99 per phase to this file (e.g. docs/performance.svg)")
	fs.StringVar(&o.report, "report", "", "write the figures as Markdown into this file (e.g. docs/performance.md), between its paydbench markers if it has them")
	fs.StringVar(&o.from, "from", "", "take the figures from this file, an earlier run's -json output, instead of measuring")
	fs.StringVar(&o.pprof, "pprof", "", "address for payd's profiling listener, passed as payd's -pprof if payd has that flag")
	fs.StringVar(&o.sizes, "sizes", "", "compare these runs' -json outputs (comma-separated, smallest database first) instead of measuring: with -report, a table in that document; with -chart, their chart")
	fs.IntVar(&o.reads, "reads", -1, "requests of each operators' read (reads.go); 0 leaves the reads out; default max(20, -n/20)")
	fs.BoolVar(&o.reconcile, "reconcile", false, "with -preload: after payd's phases, time a reconciliation of the preload's last 30 days against the provider's list and against a settlement file of the same books, with payd's memory while each runs")
	fs.IntVar(&o.preload, "preload", 0, "fill the database with this many orders of a 90-day-old shop (their attempts, ledger, refunds, audit, idempotency records, webhooks, events and deliveries) before measuring")
	fs.BoolVar(&o.preloadKeep, "preload-keep", false, "keep the preloaded database (MySQL: paydbench_preload_N; SQLite: in the user's cache folder) for the next run with the same -preload, which reuses it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.clients < 1 || o.requests < 1 {
		return o, errors.New("-c and -n must be at least 1")
	}
	if o.preload < 0 || o.preloadKeep && o.preload == 0 {
		return o, errors.New("-preload must be at least 0, and -preload-keep needs -preload")
	}
	if o.reconcile && o.preload == 0 {
		return o, errors.New("-reconcile needs -preload: it reconciles the preload's books")
	}
	return o, nil
}

// run is one benchmark: set up, measure payd, stop it, measure the floor,
// report; or, with -from, an earlier run's figures. Then the chart and the
// Markdown report, when asked for.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h asked for the usage, which is printed
	}
	if err != nil {
		return err
	}
	if o.sizes != "" {
		g, err := readSizes(o.sizes)
		if err != nil {
			return err
		}
		if o.chart != "" {
			if err := writeFile(o.chart, g.writeChart); err != nil {
				return err
			}
		}
		if o.report != "" {
			return g.writeGrowth(o.report, o.chart)
		}
		_, err = stdout.Write(g.markdown(""))
		return err
	}
	var rep *report
	if o.from != "" {
		rep, err = readReport(o.from)
	} else {
		rep, err = benchmark(ctx, o, stderr)
	}
	if err != nil {
		return err
	}
	if rep.Command == "" && o.from == "" {
		rep.Command = command(args, o)
	}
	if err := rep.write(stdout, o.json); err != nil {
		return err
	}
	if o.chart != "" {
		if err := writeFile(o.chart, rep.writeChart); err != nil {
			return err
		}
	}
	if o.report != "" {
		return rep.writeReport(o.report, o.chart)
	}
	return nil
}

// benchmark is one measured run: payd built (or given), a fresh database,
// payd's phases and the floor's.
func benchmark(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	tagRun()
	dir, err := os.MkdirTemp("", "paydbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := o.payd
	if bin == "" {
		if bin, err = buildPayd(ctx, dir); err != nil {
			return nil, err
		}
	}
	keep := ""
	if o.preloadKeep {
		keep = fmt.Sprintf("paydbench_preload_%d", o.preload)
	}
	db, err := newDatabase(ctx, o.db, dir, keep)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := db.Drop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(stderr, "paydbench: drop database:", err)
		}
	}()
	rep, err := measure(ctx, o, bin, dir, db)
	if err != nil {
		return nil, err
	}
	rep.Date = time.Now().UTC().Format(time.DateOnly)
	return rep, nil
}

// readReport reads an earlier run's -json output.
func readReport(path string) (*report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// writeFile writes what write produces to path.
func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// measure runs payd's phases, then the floor's.
func measure(ctx context.Context, o options, bin, dir string, db *database) (*report, error) {
	stub, err := startStub()
	if err != nil {
		return nil, err
	}
	defer stub.Close()
	rep := newReport(o, db.Dialect)
	if o.preload > 0 {
		if rep.Preload, err = preloadFor(ctx, bin, db, o.preload, os.Stderr); err != nil {
			return nil, err
		}
	}
	extra := pprofArgs(ctx, bin, o.pprof, rep)
	if o.redis != "" {
		extra = append(extra, "-redis-url", o.redis)
	}
	p, err := startPayd(ctx, bin, dir, db.URL, stub.URL, extra)
	if err != nil {
		return nil, err
	}
	if o.preload > 0 {
		if err := waitRollup(ctx, db, os.Stderr); err != nil {
			_ = p.Stop()
			return nil, err
		}
	}
	b := &bench{o: o, db: db, rep: rep, pid: p.Pid, api: newClient(p.URL, o.clients)}
	if db.Dialect == "mysql" {
		b.serverPID = findProcess("/proc", "mariadbd", "mysqld")
	}
	err = b.paydAndDrain(ctx, newScraper(p.URL), stub)
	if err == nil && o.reconcile {
		err = b.reconcile(ctx, stub)
	}
	if rss, rerr := peakRSS(p.Pid); rerr == nil {
		rep.PeakRSSBytes = rss
	}
	if serr := p.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("stop payd: %w", serr)
	}
	if db.Dialect == "sqlite" {
		busy := p.busy.Load()
		rep.SQLiteBusy = &busy
	}
	if err != nil {
		return nil, err
	}
	if err := b.floor(ctx); err != nil {
		return nil, err
	}
	rep.ratios()
	rep.LoadAfter = loadAverage()
	return rep, nil
}

// drainWait is how long payd has, after the load, to give back what it took.
const drainWait = 10 * time.Second

// paydAndDrain reads payd's goroutines and pools once no connection is in
// use (payd's background jobs run a first pass as it starts), runs payd's
// phases, closes the clients' and the stub's idle connections and reads
// them again once payd has drained (or drainWait has passed).
func (b *bench) paydAndDrain(ctx context.Context, s *scraper, stub *stub) error {
	before, err := s.idle(ctx, drainWait)
	if err != nil {
		return err
	}
	if err := b.payd(ctx); err != nil {
		return err
	}
	b.api.hc.CloseIdleConnections()
	stub.closeIdle()
	r, err := s.settle(ctx, before, drainWait)
	if err != nil {
		// On a grown database payd's own metrics (its backlog gauges
		// count rows) may not answer in time: a finding, not the end of
		// the run's figures.
		b.rep.Notes = append(b.rep.Notes, "payd's goroutines and pools after the load were not read: "+err.Error())
		return nil
	}
	b.rep.Resources = &r
	return nil
}

// pprofArgs passes -pprof to payd when asked for and payd has the flag;
// otherwise the report says why there is no profile.
func pprofArgs(ctx context.Context, bin, addr string, rep *report) []string {
	if addr == "" {
		return nil
	}
	if !hasFlag(ctx, bin, "pprof") {
		rep.Notes = append(rep.Notes, "payd has no -pprof flag: not profiled")
		return nil
	}
	rep.Pprof = addr
	return []string{"-pprof", addr}
}
