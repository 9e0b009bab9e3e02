package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/internal/nemesis"
	"github.com/payd/payd/internal/testdeps"
)

// The nemesis, the Jepsen way: from a seed, a schedule of faults on the
// wires between processes (latency, black holes, resets, slow closes,
// bandwidth, replies cut short) and on the processes themselves (a
// replica killed and restarted, a Galera node killed and rejoined, a
// Redis master failed over, the database restarted), while clients pay,
// replay, cancel, refund and read, recording every request and answer in
// a history. Once everything is healed and settled, every key is sent
// once more and every order read, the provider's books and payd's are
// read, and internal/nemesis checks the invariants over the whole history.
//
// It restarts the shared MariaDB server, so it runs only when asked
// (PAYD_TEST_NEMESIS=1, which .ci/run sets in a step of its own). Replay a
// failing seed with:
//
//	PAYD_TEST_NEMESIS=1 go test -race -count=1 -v -run 'TestNemesis/sqlite' ./e2e -payd.nemesis.seed=N
//
// PAYD_NEMESIS_DURATION sets the schedule's length (default 90s); a long
// one (PAYD_NEMESIS_DURATION=30m) is a soak.

var nemSeedFlag = flag.Int64("payd.nemesis.seed", 0, "nemesis: the schedule's seed (env PAYD_NEMESIS_SEED; default a fixed seed per setup)")

// envNemesis asks for the nemesis tests.
const envNemesis = "PAYD_TEST_NEMESIS"

// nemesisDep is what the nemesis tests skip without.
var nemesisDep = testdeps.Dep{Name: "the nemesis switch", Enable: "set " + envNemesis + "=1 (it restarts the shared database server; .ci/run does so in a step of its own)"}

const (
	nemSoak      = 10 * time.Minute // a schedule this long is a soak: per-minute figures, and no growth allowed
	nemClients   = 6
	nemOpTimeout = 5 * time.Second // a client gives up on an answer after this: no answer recorded
	// nemSettle is how long the world may take to become quiet after the
	// schedule, the shop told of every event: a delivery that failed under
	// a fault waits out its backoff (5 s, then 10 s, 20 s, …; one order's
	// events one after another) before payd's backlog drains.
	nemSettle = 2 * time.Minute
	// nemNotifyDrain is how long the sweep's own events (a key that ran
	// anew) may take to reach the shop before the world is read.
	nemNotifyDrain = time.Minute
)

// requireNemesis skips t unless the nemesis was asked for.
func requireNemesis(t *testing.T) {
	t.Helper()
	if os.Getenv(envNemesis) != "1" {
		testdeps.Skip(t, nemesisDep, envNemesis+" is not 1: the nemesis restarts the shared database server and runs in its own step of .ci/run")
	}
	askedFor(t)
}

// nemSeed is the schedule's seed: the flag, the environment or def.
func nemSeed(t *testing.T, def int64) int64 {
	t.Helper()
	if *nemSeedFlag != 0 {
		return *nemSeedFlag
	}
	if v := os.Getenv("PAYD_NEMESIS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("PAYD_NEMESIS_SEED=%q is not a number", v)
		}
		return n
	}
	return def
}

// nemDuration is the schedule's length.
func nemDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("PAYD_NEMESIS_DURATION")
	if v == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PAYD_NEMESIS_DURATION=%q is not a positive duration", v)
	}
	return d
}

func TestNemesis(t *testing.T) {
	requireNemesis(t)
	t.Parallel() // beside TestNemesisMutant
	d := nemDuration(t)
	// The setups run at once, each from a goroutine of its own rather
	// than as parallel subtests, which -parallel (the machine's cores)
	// would queue: the schedules are wall-clock time, and the step has
	// four minutes for all of them.
	//
	// The stripe setup's schedule is 60 seconds unless
	// PAYD_NEMESIS_DURATION says otherwise: the shortest that holds every
	// fault kind (nemesis.NewPlan), so that a fourth setup fits the step's
	// budget beside the other three.
	setups := []struct {
		o     nemOpts
		seed  int64
		short time.Duration // the schedule when PAYD_NEMESIS_DURATION is unset; 0: d
	}{
		{nemOpts{name: "sqlite", replicas: 1, dialect: "sqlite"}, 1, 0},
		{nemOpts{name: "mysql", replicas: 3, dialect: "mysql", redis: true, restart: true}, 2, 0},
		{nemOpts{name: "galera", replicas: 3, dialect: "mysql", galera: true, redis: true}, 3, 0},
		{nemOpts{name: "stripe", replicas: 1, dialect: "sqlite", stripe: true}, 4, time.Minute},
	}
	var wg sync.WaitGroup
	for _, s := range setups {
		wg.Go(func() {
			t.Run(s.o.name, func(t *testing.T) {
				d := d
				if s.short > 0 && os.Getenv("PAYD_NEMESIS_DURATION") == "" {
					d = s.short
				}
				s.o.seed = nemSeed(t, s.seed)
				runNemesis(t, s.o, s.o.seed, d)
			})
		})
	}
	wg.Wait()
}

// TestNemesisMutant runs the SQLite setup's schedule on payd with one
// guard removed (PAYD_TEST_MUTANT, test builds only): the checker must
// notice each. CI runs claim_unguarded, which the step's time allows;
// PAYD_NEMESIS_MUTANTS=all (or a comma list of names) runs others.
func TestNemesisMutant(t *testing.T) {
	requireNemesis(t)
	t.Parallel() // beside TestNemesis's setups: the step's time is theirs
	for _, m := range nemMutants(t) {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			o := nemOpts{name: "sqlite-" + m, replicas: 1, dialect: "sqlite", extra: env{"PAYD_TEST_MUTANT": m}}
			rep, _ := nemRun(t, o, nemSeed(t, 1), nemDuration(t), true)
			if len(rep.Violations) == 0 {
				t.Fatalf("%s: the checker found nothing broken (%v checked); it cannot tell the guarded statement from the unguarded one", m, rep.Checked)
			}
			broken := map[string]int{}
			for _, v := range rep.Violations {
				broken[v.Invariant]++
			}
			// The unguarded take cannot oversell past the CHECK (stock >=
			// 0): a cart beyond what is left fails on it, and payd answers
			// the creation 500 where the guard made it 409 out_of_stock.
			if m == "stock_unguarded" && !slices.ContainsFunc(rep.Violations, func(v nemesis.Violation) bool {
				return v.Invariant == nemesis.InvNo5xx && len(v.Slice) == 1 && v.Slice[0].Kind == nemesis.OpCreate
			}) {
				t.Errorf("%s: no order creation answered 5xx (%v broken): the carts never asked for more than was left", m, broken)
			}
			t.Logf("%s: %d violations found (%v), e.g. %s: %s", m, len(rep.Violations), broken, rep.Violations[0].Invariant, rep.Violations[0].Detail)
		})
	}
}

// nemMutants are the mutants TestNemesisMutant runs: PAYD_NEMESIS_MUTANTS
// names them ("all", or a comma list); unset, only claim_unguarded.
func nemMutants(t *testing.T) []string {
	// markPaid without its pay_request_id guard is no mutant here: the
	// claim's guard already keeps a second request from charging while
	// one holds the order, and a claim is released only on a definitive
	// decline, so no late success of another request reaches it.
	known := []string{"claim_unguarded", "refund_unguarded", "stock_unguarded"}
	v := os.Getenv("PAYD_NEMESIS_MUTANTS")
	switch v {
	case "":
		return known[:1]
	case "all":
		return known
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			t.Fatalf("PAYD_NEMESIS_MUTANTS: unknown mutant %q (known: %v)", n, known)
		}
		names = append(names, n)
	}
	return names
}

// runNemesis runs one setup's schedule and fails t on any broken invariant.
func runNemesis(t *testing.T, o nemOpts, seed int64, d time.Duration) {
	rep, _ := nemRun(t, o, seed, d, false)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
}

// nemRun starts the setup, runs the schedule under the clients' load,
// settles, sweeps, reads both books and checks. mutant: the run is
// expected to break invariants, so not settling is no failure of its own.
func nemRun(t *testing.T, o nemOpts, seed int64, d time.Duration, mutant bool) (nemesis.Report, []nemesis.Op) {
	began := time.Now()
	s := startNemSetup(t, o)
	plan := nemesis.NewPlan(seed, d, s.planTargets())
	t.Logf("nemesis %s seed=%d, %v:\n%s", o.name, seed, d, plan)

	w := newNemWorkload(t, s, seed)
	every := max(d/6, 5*time.Second)
	if d >= nemSoak {
		every = time.Minute
		if _, err := soakChartPath(os.Getenv("PAYD_NEMESIS_SVG"), o.name); err != nil {
			t.Fatal(err) // before half an hour of load, not after it
		}
	}
	sampler := nemesis.NewSampler(s.metrics(), every)
	w.sampler = sampler
	runner := &nemesis.Runner{Net: s.net, Process: s.process, Log: func(format string, args ...any) {
		t.Logf("%s %s", time.Since(began).Round(time.Millisecond), fmt.Sprintf(format, args...))
	}}

	ctx, stop := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.Run(ctx) }()
	var clients sync.WaitGroup
	for c := range nemClients {
		clients.Go(func() { w.client(ctx, c) })
	}
	scheduled := time.Now() // the schedule's start, as the matrix counts it
	faults, err := runner.Run(context.Background(), plan)
	stop()
	clients.Wait()
	<-sampled
	if err != nil {
		t.Errorf("nemesis %s seed=%d: the schedule: %v", o.name, seed, err)
	}
	loaded := time.Since(began)

	settling := time.Now()
	stuck := false
	if why := w.settle(); why != "" {
		if !mutant {
			t.Errorf("nemesis %s seed=%d: the system did not settle within %v of the schedule's end: %s", o.name, seed, nemSettle, why)
			w.stuck()
			stuck = true
		} else {
			t.Logf("the mutant did not settle: %s", why)
		}
	}
	if !stuck {
		// A world that did not settle has failed already: its drain
		// rounds would each wait out the settle again and run the
		// package past its deadline before the checker's report.
		w.drain()
	}
	settled := time.Since(settling)
	if s.stripe != nil {
		sent, failed := s.stripe.deliveries()
		t.Logf("nemesis %s: %d Stripe event deliveries tried, %d of them not answered 2xx (and tried again)", o.name, sent, failed)
	}
	swept := time.Now()
	w.sweep()
	if why := w.drainNotify(); why != "" {
		t.Logf("nemesis %s: the shop's backlog did not drain within %v of the sweep (what is left must show pending): %s", o.name, nemNotifyDrain, tail(why, 1))
	}
	world := w.world(o.name, seed)
	read := time.Since(swept)
	checking := time.Now()
	rep := nemesis.Check(world)
	t.Logf("nemesis %s: settled in %v, swept and read in %v, checked in %v", o.name, settled.Round(time.Millisecond),
		read.Round(time.Millisecond), time.Since(checking).Round(time.Millisecond))
	summary := nemesis.Summary(o.name, seed, faults, world.Ops, rep)
	t.Log(summary)
	fmt.Println(summary)
	links := map[string]nemesis.LinkKind{}
	for _, l := range s.net.Links() {
		links[l.Name] = l.Kind
	}
	matrix := fmt.Sprintf("nemesis %s seed=%d: answers by fault\n%s", o.name, seed, nemesis.Matrix(plan, scheduled, world.Ops, links).Markdown())
	t.Log(matrix)
	fmt.Println(matrix)
	if world.Merchant != nil {
		linkOf := map[string]string{}
		for i, r := range s.reps {
			linkOf[r.name] = fmt.Sprintf("merchant-%d", i+1)
		}
		shop := fmt.Sprintf("nemesis %s seed=%d: what the shop heard by fault\n%s", o.name, seed,
			nemesis.Shop(plan, scheduled, world.Merchant.Arrivals, linkOf).Markdown())
		t.Log(shop)
		fmt.Println(shop)
	}
	t.Logf("nemesis %s: setup and schedule %v, all %v", o.name, loaded.Round(time.Second), time.Since(began).Round(time.Second))
	if len(rep.Violations) > 0 {
		t.Logf("the schedule of seed %d:\n%s", seed, plan)
		w.dump(rep, world)
	}
	if d >= nemSoak {
		w.soakReport(sampler)
	}
	return rep, world.Ops
}
