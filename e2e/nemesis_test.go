package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
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
	nemOpTimeout = 5 * time.Second  // a client gives up on an answer after this: no answer recorded
	nemSettle    = 90 * time.Second // how long the world may take to become quiet after the schedule
)

// requireNemesis skips t unless the nemesis was asked for.
func requireNemesis(t *testing.T) {
	t.Helper()
	if os.Getenv(envNemesis) != "1" {
		testdeps.Skip(t, nemesisDep, envNemesis+" is not 1: the nemesis restarts the shared database server and runs in its own step of .ci/run")
	}
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
	known := []string{"claim_unguarded", "refund_unguarded"}
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
	if why := w.settle(); why != "" {
		if !mutant {
			t.Errorf("nemesis %s seed=%d: the system did not settle within %v of the schedule's end: %s", o.name, seed, nemSettle, why)
			w.stuck()
		} else {
			t.Logf("the mutant did not settle: %s", why)
		}
	}
	w.drain()
	settled := time.Since(settling)
	if s.stripe != nil {
		sent, failed := s.stripe.deliveries()
		t.Logf("nemesis %s: %d Stripe event deliveries tried, %d of them not answered 2xx (and tried again)", o.name, sent, failed)
	}
	swept := time.Now()
	w.sweep()
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

// ---- the clients ----

// nemWorkload is the clients' shared knowledge: the customers, the orders
// they made and every key they sent (for replays and the final sweep),
// and the history of what they sent and heard.
type nemWorkload struct {
	t       *testing.T
	s       *nemSetup
	seed    int64
	hist    nemesis.History
	sampler *nemesis.Sampler
	http    *http.Client
	tokens  []string // the customers' tokens

	mu     sync.Mutex
	orders []*nemOrder
	keys   []*nemKey
	byKey  map[string]*nemKey
}

// nemOrder is an order the clients made.
type nemOrder struct {
	id, amount string
	token      string
}

// nemKey is one idempotent request under its key: sent again, it is the
// same request.
type nemKey struct {
	kind   nemesis.OpKind
	order  *nemOrder
	key    string
	amount string // refund: the amount asked for, "" for the rest
	method string // HTTP method
	path   string
	token  string
	body   []byte
}

func newNemWorkload(t *testing.T, s *nemSetup, seed int64) *nemWorkload {
	t.Helper()
	w := &nemWorkload{t: t, s: s, seed: seed, byKey: map[string]*nemKey{},
		http: &http.Client{Timeout: nemOpTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(w.http.CloseIdleConnections)
	d := s.reps[0].current().driver
	for range 3 {
		_, tok := d.register(newEmail())
		w.tokens = append(w.tokens, tok)
	}
	return w
}

var (
	nemAmounts = []string{"10.00", "25.50", "99.99", "7.30"}
	nemMethods = []struct {
		name   string
		weight int
	}{{"pm_ok", 50}, {"pm_declined", 10}, {"pm_insufficient_funds", 5}, {"pm_async", 15}, {"pm_async_fail", 5}, {"pm_timeout", 10}}
)

func nemMethod(r *rand.Rand) string {
	x := r.IntN(100)
	for _, m := range nemMethods {
		if x -= m.weight; x < 0 {
			return m.name
		}
	}
	return "pm_ok"
}

// client runs one client's loop until ctx ends: each turn, one of the
// operations the issue lists, drawn from the client's seeded stream.
func (w *nemWorkload) client(ctx context.Context, c int) {
	r := nemRand(w.seed, c)
	for ctx.Err() == nil {
		time.Sleep(time.Duration(80+r.IntN(120)) * time.Millisecond) // a client's pace: the history stays quick to drain and check
		switch x := r.IntN(100); {
		case x < 22: // a new order paid with a new key
			if o := w.newOrder(r); o != nil {
				w.send(c, r, w.payKey(o, nemMethod(r)))
			}
		case x < 30: // the same key twice at once
			if o := w.newOrder(r); o != nil {
				k := w.payKey(o, nemMethod(r))
				w.concurrently(c, r, k, k)
			}
		case x < 40: // competing keys on one order
			if o := w.newOrder(r); o != nil {
				w.concurrently(c, r, w.payKey(o, nemMethod(r)), w.payKey(o, "pm_ok"), w.payKey(o, nemMethod(r)))
			}
		case x < 46: // a new key on an order the clients already know, whatever its state
			if o := w.anyOrder(r); o != nil {
				w.send(c, r, w.payKey(o, "pm_ok"))
			}
		case x < 56: // a replay of a key sent before
			if k := w.anyKey(r, nemesis.OpPay); k != nil {
				w.send(c, r, k)
			}
		case x < 62: // a cancel, sometimes racing a pay of a fresh order
			if r.IntN(2) == 0 {
				if o := w.newOrder(r); o != nil {
					w.concurrently(c, r, w.cancelKey(o), w.payKey(o, nemMethod(r)))
				}
			} else if o := w.anyOrder(r); o != nil {
				w.send(c, r, w.cancelKey(o))
			}
		case x < 74: // refunds: partial, full, or two at once
			o := w.anyOrder(r)
			if o == nil {
				break
			}
			switch r.IntN(3) {
			case 0:
				w.send(c, r, w.refundKey(o, "1.00"))
			case 1:
				w.send(c, r, w.refundKey(o, ""))
			default:
				w.concurrently(c, r, w.refundKey(o, "2.50"), w.refundKey(o, []string{"", "1.00"}[r.IntN(2)]))
			}
		case x < 78: // a refund replayed
			if k := w.anyKey(r, nemesis.OpRefund); k != nil {
				w.send(c, r, k)
			}
		case x < 88: // GET /v1/requests/{key}
			if k := w.anyKey(r, nemesis.OpPay); k != nil {
				w.do(c, r, nemesis.Op{Kind: nemesis.OpRequest, OrderID: k.order.id, Key: k.key, Method: http.MethodGet, Path: "/v1/requests/" + k.key}, k.token, false)
			}
		default: // an order read
			if o := w.anyOrder(r); o != nil {
				w.read(c, r, o, false)
			}
		}
	}
}

// newOrder creates an order (not part of the history: a lost answer only
// leaves an order nobody pays), trying three times; nil if none was made.
func (w *nemWorkload) newOrder(r *rand.Rand) *nemOrder {
	amount, token := nemAmounts[r.IntN(len(nemAmounts))], w.tokens[r.IntN(len(w.tokens))]
	body, _ := json.Marshal(client.CreateOrderRequest{Currency: "USD", Items: []client.ItemRequest{{Sku: "sku-1", Name: "Thing", Quantity: 1, UnitPrice: amount}}})
	for range 3 {
		rep, err := w.roundTrip(w.s.reps[r.IntN(len(w.s.reps))].base, http.MethodPost, "/v1/orders", token, "", body)
		if err == nil && rep.Status == http.StatusCreated {
			var o client.Order
			if json.Unmarshal(rep.Body, &o) == nil && o.Id != "" {
				no := &nemOrder{id: o.Id, amount: amount, token: token}
				w.mu.Lock()
				w.orders = append(w.orders, no)
				w.mu.Unlock()
				return no
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func (w *nemWorkload) anyOrder(r *rand.Rand) *nemOrder {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.orders) == 0 {
		return nil
	}
	return w.orders[r.IntN(len(w.orders))]
}

func (w *nemWorkload) anyKey(r *rand.Rand, kind nemesis.OpKind) *nemKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	var of []*nemKey
	for _, k := range w.keys {
		if k.kind == kind {
			of = append(of, k)
		}
	}
	if len(of) == 0 {
		return nil
	}
	return of[r.IntN(len(of))]
}

// remember notes a new key, for replays and the sweep.
func (w *nemWorkload) remember(k *nemKey) *nemKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, k)
	w.byKey[k.key] = k
	return k
}

func (w *nemWorkload) payKey(o *nemOrder, method string) *nemKey {
	if w.s.stripe != nil {
		method = nemStripeMethods[method]
	}
	body, _ := json.Marshal(client.PayRequest{PaymentMethod: method})
	return w.remember(&nemKey{kind: nemesis.OpPay, order: o, key: "pay-" + uuid.NewString(), method: http.MethodPost,
		path: "/v1/orders/" + o.id + "/pay", token: o.token, body: body})
}

func (w *nemWorkload) cancelKey(o *nemOrder) *nemKey {
	return w.remember(&nemKey{kind: nemesis.OpCancel, order: o, key: "cancel-" + uuid.NewString(), method: http.MethodPost,
		path: "/v1/orders/" + o.id + "/cancel", token: o.token})
}

func (w *nemWorkload) refundKey(o *nemOrder, amount string) *nemKey {
	req := client.RefundRequest{Reason: "customer asked"}
	if amount != "" {
		req.Amount = &amount
	}
	body, _ := json.Marshal(req)
	return w.remember(&nemKey{kind: nemesis.OpRefund, order: o, key: "refund-" + uuid.NewString(), amount: amount, method: http.MethodPost,
		path: "/v1/admin/orders/" + o.id + "/refund", token: testAdminToken, body: body})
}

// send sends k's request once.
func (w *nemWorkload) send(c int, r *rand.Rand, k *nemKey) {
	w.sendSettled(c, r, k, false)
}

func (w *nemWorkload) sendSettled(c int, r *rand.Rand, k *nemKey, settled bool) {
	w.do(c, r, nemesis.Op{Kind: k.kind, OrderID: k.order.id, Key: k.key, Amount: k.amount, Method: k.method, Path: k.path, ReqBody: k.body}, k.token, settled)
}

// concurrently sends each request at the same moment.
func (w *nemWorkload) concurrently(c int, r *rand.Rand, ks ...*nemKey) {
	var wg sync.WaitGroup
	for _, k := range ks {
		rr := rand.New(rand.NewPCG(r.Uint64(), 0)) // each goroutine its own stream
		wg.Go(func() { w.send(c, rr, k) })
	}
	wg.Wait()
}

// read is an order read.
func (w *nemWorkload) read(c int, r *rand.Rand, o *nemOrder, settled bool) {
	w.do(c, r, nemesis.Op{Kind: nemesis.OpRead, OrderID: o.id, Method: http.MethodGet, Path: "/v1/orders/" + o.id}, o.token, settled)
}

// do sends op's request to a replica picked by r and records it with
// what came back, or why nothing did.
func (w *nemWorkload) do(c int, r *rand.Rand, op nemesis.Op, token string, settled bool) nemesis.Op {
	op.Client, op.Settled = c, settled
	base := w.s.reps[r.IntN(len(w.s.reps))].base
	op.Start = time.Now()
	rep, err := w.roundTrip(base, op.Method, op.Path, token, op.Key, op.ReqBody)
	op.End = time.Now()
	if op.Kind == nemesis.OpRead || op.Kind == nemesis.OpRequest {
		op.Key = ""
		if op.Kind == nemesis.OpRequest {
			op.Key = strings.TrimPrefix(op.Path, "/v1/requests/")
		}
	}
	if err != nil {
		op.Err = err.Error()
	} else {
		op.Status, op.Body, op.RetryAfter = rep.Status, rep.Body, rep.Header.Get("Retry-After")
	}
	if w.sampler != nil {
		w.sampler.Observe(op.End.Sub(op.Start))
	}
	op.ID = w.hist.Add(op)
	return op
}

// roundTrip is one request with the client's timeout; every answer is
// held to openapi.yaml.
func (w *nemWorkload) roundTrip(base, method, path, token, key string, body []byte) (reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	checkContract(w.t, req, resp.StatusCode, resp.Header, b)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// ---- settling, the sweep and the books ----

// settle waits until every replica is ready and nothing is left in
// flight (the property test's busy: no order processing, no attempt
// started or unknown, no refund pending, no charge pending at the
// provider, every webhook delivered), twice in a row. It returns "" then,
// else what was still busy.
func (w *nemWorkload) settle() string {
	ids := w.orderIDs()
	if len(ids) == 0 {
		return ""
	}
	busy := func(ctx context.Context, ids []string) string {
		if why := busyPayd(ctx, w.s.db, ids); why != "" {
			return why
		}
		return w.s.stripe.busy()
	}
	if w.s.prov != nil {
		busy = (&propRun{t: w.t, s: &stack{db: w.s.db, sandbox: w.s.prov.sb}}).busy
	}
	deadline := time.Now().Add(nemSettle)
	quiet, why := 0, ""
	began, said := time.Now(), time.Now()
	for time.Now().Before(deadline) && quiet < 2 {
		if why != "" && time.Since(said) > 5*time.Second {
			w.t.Logf("settling for %v: %s", time.Since(began).Round(time.Second), tail(why, 1))
			said = time.Now()
		}
		if !w.s.ready() {
			why, quiet = "a replica is not ready", 0
		} else if why = busy(context.Background(), ids); why == "" {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(300 * time.Millisecond)
	}
	if quiet >= 2 {
		return ""
	}
	return why
}

func (w *nemWorkload) orderIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, len(w.orders))
	for i, o := range w.orders {
		ids[i] = o.id
	}
	return ids
}

// drain is what a client does once the world is quiet: it sends every
// key again, and again after the world settled, until a round in which no
// key answered pending or not at all (four rounds at most): a key that
// ran anew may start a payment that turns another key's answer (409, in
// progress) into a run of its own the next time. A key whose payment was released unpaid (the
// recoverer found the charge never reached the provider) or whose request
// failed without completing runs again when sent again, so only after
// this may the sweep expect every answer to be final. These are ordinary
// requests of the history: the checker holds them to every invariant.
func (w *nemWorkload) drain() {
	w.mu.Lock()
	keys := append([]*nemKey(nil), w.keys...)
	w.mu.Unlock()
	for round := range 4 {
		answers := make([]nemesis.Op, len(keys))
		forEach(2*nemClients, len(keys), func(i int) {
			rr := rand.New(rand.NewPCG(uint64(i), uint64(round)+2))
			k := keys[i]
			answers[i] = w.do(nemClients, rr, nemesis.Op{Kind: k.kind, OrderID: k.order.id, Key: k.key, Amount: k.amount, Method: k.method, Path: k.path, ReqBody: k.body}, k.token, false)
		})
		pending := 0
		for _, op := range answers {
			if op.Status == 0 || op.Status == http.StatusAccepted || op.RetryAfter != "" {
				pending++
			}
		}
		if pending == 0 {
			return // nothing started anew: sent again, every key replays
		}
		if why := w.settle(); why != "" {
			w.t.Logf("drain round %d: not settled: %s", round+1, why)
		}
	}
}

// sweep sends every key once more and reads every order, now that the
// world is quiet and every key has been drained: these answers must be
// final.
func (w *nemWorkload) sweep() {
	w.mu.Lock()
	keys, orders := append([]*nemKey(nil), w.keys...), append([]*nemOrder(nil), w.orders...)
	w.mu.Unlock()
	r := nemRand(w.seed, nemClients)
	forEach(2*nemClients, len(keys), func(i int) {
		rr := rand.New(rand.NewPCG(uint64(i), 1))
		w.sendSettled(nemClients, rr, keys[i], true)
		if k := keys[i]; k.kind == nemesis.OpPay {
			w.do(nemClients, rr, nemesis.Op{Kind: nemesis.OpRequest, OrderID: k.order.id, Key: k.key, Method: http.MethodGet, Path: "/v1/requests/" + k.key}, k.token, true)
		}
	})
	for _, o := range orders {
		w.read(nemClients, r, o, true)
	}
}

// world is what the checker is given: the history, the provider's books
// (the sandbox's charges and their refunds) and payd's final view of each
// order with its money (GET /v1/admin/orders/{id}).
func (w *nemWorkload) world(setup string, seed int64) nemesis.World {
	t := w.t
	wd := nemesis.World{Setup: setup, Seed: seed, Ops: w.hist.Ops(), Orders: map[string]nemesis.OrderState{}}
	if w.s.stripe != nil {
		wd.Charges = w.s.stripe.books(t)
	} else {
		charges, err := w.s.prov.sb.Charges(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range charges {
			wd.Charges = append(wd.Charges, nemesis.Charge{ID: c.ID, OrderID: c.OrderID, Key: c.IdempotencyKey, Amount: c.Amount,
				Succeeded: c.Status == domain.ChargeSucceeded, Refunded: c.RefundedAmount, Created: c.CreatedAt})
		}
	}
	for _, ch := range wd.Charges {
		if ch.Succeeded {
			wd.Provider.Charged = wd.Provider.Charged.Add(ch.Amount)
			wd.Provider.Refunded = wd.Provider.Refunded.Add(ch.Refunded)
		}
	}
	ids := w.orderIDs()
	tls := make([]client.Timeline, len(ids))
	forEach(nemClients, len(ids), func(i int) { tls[i] = w.s.reps[i%len(w.s.reps)].current().timeline(ids[i]) })
	for i, id := range ids {
		tl := tls[i]
		st := nemesis.OrderState{ID: id, Status: domain.OrderStatus(tl.Order.Status),
			Amount: nemDecimal(t, string(tl.Order.Amount)), Refunded: nemDecimal(t, string(tl.Order.RefundedAmount))}
		if tl.Order.PayRequestId != nil {
			for _, a := range tl.Attempts {
				if a.RequestId == *tl.Order.PayRequestId && a.Status == "succeeded" && a.ProviderChargeId != nil {
					st.ChargeID = *a.ProviderChargeId
				}
			}
		}
		// The order's outbox events, and what they must tell
		// (nemesis.InvOneEvent).
		for _, e := range tl.Events {
			st.Told = append(st.Told, nemesis.Told{ID: e.Id, Type: domain.NotifyType(e.Type), Seq: e.Seq, Status: domain.OrderStatus(e.OrderStatus)})
		}
		for _, e := range tl.Ledger {
			if e.Kind == client.LedgerEntryKindRefund || e.Kind == client.LedgerEntryKindOutsideRefund {
				st.RefundsBooked++
			}
		}
		st.Attempts = len(tl.Attempts)
		wd.Orders[id] = st
		wd.Payd.Charged = wd.Payd.Charged.Add(nemDecimal(t, tl.Order.Money.Charged))
		wd.Payd.Refunded = wd.Payd.Refunded.Add(nemDecimal(t, tl.Order.Money.Refunded))
	}
	return wd
}

func nemDecimal(t *testing.T, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatalf("%q is not an amount: %v", s, err)
	}
	return d
}

// dump logs, for the orders the violations name (at most five), what the
// provider holds, what payd recorded and what the clients heard: what a
// reader of the failure needs beside the checker's slices.
func (w *nemWorkload) dump(rep nemesis.Report, wd nemesis.World) {
	named := map[string]bool{}
	var order []string
	note := func(id string) {
		if _, ok := wd.Orders[id]; ok && !named[id] && len(order) < 5 {
			named[id] = true
			order = append(order, id)
		}
	}
	for _, v := range rep.Violations {
		for _, op := range v.Slice {
			note(op.OrderID)
		}
		for id := range wd.Orders {
			if strings.Contains(v.Detail, id) {
				note(id)
			}
		}
	}
	for _, id := range order {
		var b strings.Builder
		st := wd.Orders[id]
		fmt.Fprintf(&b, "order %s: payd says %s, amount %s, refunded %s, paid by charge %q\n", id, st.Status, st.Amount, st.Refunded, st.ChargeID)
		for _, c := range wd.Charges {
			if c.OrderID == id {
				fmt.Fprintf(&b, "  provider charge %s (attempt %s): succeeded=%v amount %s refunded %s at %s\n", c.ID, c.Key, c.Succeeded, c.Amount, c.Refunded, c.Created.Format("15:04:05.000"))
			}
		}
		tl := w.s.reps[0].current().timeline(id)
		for _, a := range tl.Attempts {
			fmt.Fprintf(&b, "  payd attempt %s: request %s %s charge %s\n", a.Id, a.RequestId, a.Status, deref(a.ProviderChargeId))
		}
		var rows []struct{ ID, RequestID, Status, FailureCode, CreatedAt, UpdatedAt string }
		if err := w.s.db.Gorm().Raw(`SELECT id, request_id, status, COALESCE(failure_code, '') AS failure_code, created_at, updated_at
			FROM payment_attempts WHERE order_id = ? ORDER BY created_at`, id).Scan(&rows).Error; err != nil {
			fmt.Fprintf(&b, "  payd attempts: %v\n", err)
		}
		for _, a := range rows {
			fmt.Fprintf(&b, "  payd attempt row %+v\n", a)
		}
		var recs []struct {
			IdemKey, Status, CompletedBy, UpdatedAt string
			ResponseStatus                          int
		}
		if err := w.s.db.Gorm().Raw(`SELECT idem_key, status, COALESCE(completed_by, '') AS completed_by, response_status, updated_at
			FROM idempotency_records WHERE order_id = ?`, id).Scan(&recs).Error; err != nil {
			fmt.Fprintf(&b, "  payd records: %v\n", err)
		}
		for _, rc := range recs {
			fmt.Fprintf(&b, "  payd record %+v\n", rc)
		}
		for _, rf := range tl.Refunds {
			fmt.Fprintf(&b, "  payd refund %+v\n", rf)
		}
		for _, op := range wd.Ops {
			if op.OrderID == id {
				fmt.Fprintf(&b, "  %s–%s client %d %s %s key=%s settled=%v -> %d %s %s\n", op.Start.Format("15:04:05.000"), op.End.Format("15:04:05.000"),
					op.Client, op.Kind, op.Path, op.Key, op.Settled, op.Status, truncate(op.Body), op.Err)
			}
		}
		w.t.Log(b.String())
	}
	for _, line := range w.s.errorLines(30) {
		w.t.Log(line)
	}
}

// soakReport prints a soak's per-minute figures, charts them (an SVG
// under the system's temporary directory; PAYD_NEMESIS_SVG names another
// file) and fails on growth: a reading taken once the load stopped and
// drained, against the first minute after warm-up.
func (w *nemWorkload) soakReport(sampler *nemesis.Sampler) {
	t := w.t
	w.http.CloseIdleConnections() // each idle keep-alive holds a goroutine and a socket of payd's
	time.Sleep(5 * time.Second)
	after := sampler.Sample(context.Background())
	minutes := sampler.Minutes()
	for _, m := range minutes {
		line := fmt.Sprintf("minute %3d: ops %6d p99 %8v", m.Minute, m.Ops, m.P99.Round(time.Millisecond))
		for _, r := range w.s.reps {
			line += fmt.Sprintf(" | %s rss %.1fMiB goroutines %d files %d pools %v", r.name, float64(m.RSS[r.name])/(1<<20), m.Goroutines[r.name], m.OpenFiles[r.name], m.Pools[r.name])
		}
		t.Log(line)
		fmt.Println(line)
	}
	path := os.Getenv("PAYD_NEMESIS_SVG")
	if path == "" {
		path = filepath.Join(os.TempDir(), "payd-nemesis-"+w.s.name+".svg")
	}
	var svg bytes.Buffer
	if err := nemesis.WriteSVG(&svg, minutes[:len(minutes)-1]); err != nil {
		t.Errorf("soak chart: %v", err)
	} else if err := os.WriteFile(path, svg.Bytes(), 0o644); err != nil {
		t.Errorf("soak chart: %v", err)
	} else {
		t.Logf("soak chart: %s", path)
	}
	if len(minutes) < 3 {
		t.Errorf("soak: %d readings, too few to compare", len(minutes))
		return
	}
	for _, g := range nemesis.Growth(minutes[1], after) {
		t.Errorf("soak %s: grew and did not come back: %s", w.s.name, g)
	}
}

// stuck logs, for the orders still processing (at most five), payd's
// attempts as stored, what the provider was asked about each and holds,
// and what payd logged about them: what a reader of a run that did not
// settle needs.
func (w *nemWorkload) stuck() {
	var ids []string
	if err := w.s.db.Gorm().Raw(`SELECT id FROM orders WHERE status = 'processing' AND id IN ? LIMIT 5`, w.orderIDs()).Scan(&ids).Error; err != nil {
		w.t.Logf("stuck orders: %v", err)
		return
	}
	for _, id := range ids {
		var b strings.Builder
		fmt.Fprintf(&b, "order %s still processing\n", id)
		var rows []map[string]any
		if err := w.s.db.Gorm().Raw(`SELECT * FROM payment_attempts WHERE order_id = ? ORDER BY created_at`, id).Scan(&rows).Error; err != nil {
			fmt.Fprintf(&b, "  attempts: %v\n", err)
		}
		for _, a := range rows {
			fmt.Fprintf(&b, "  attempt %v\n", a)
			aid, _ := a["id"].(string)
			if w.s.stripe != nil {
				fmt.Fprintf(&b, "    asked at Stripe: %v\n", w.s.stripe.fake.CallsFor(aid))
			}
			for _, r := range w.s.reps {
				r.mu.Lock()
				procs := append([]*paydProc(nil), r.procs...)
				r.mu.Unlock()
				for _, p := range procs {
					for line := range strings.SplitSeq(p.logs.String(), "\n") {
						if strings.Contains(line, aid) {
							fmt.Fprintf(&b, "    %s: %s\n", r.name, truncate([]byte(line)))
						}
					}
				}
			}
		}
		if w.s.stripe != nil {
			for _, pi := range w.s.stripe.fake.PaymentIntents() {
				if pi.OrderID == id {
					fmt.Fprintf(&b, "  stripe %+v\n", pi)
				}
			}
		}
		w.t.Log(b.String())
	}
}
