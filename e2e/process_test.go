package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/sandbox"
)

// The crash, replica and database-restart tests run payd as separate OS
// processes, built from this package by `go build`: only a real process
// can be killed with SIGKILL mid-payment, restarted on the same database,
// or run three times side by side. Each process is driven like the
// in-process stack, through a driver (harness_test.go); the provider runs
// in the test process (procProvider), so it outlives every payd the test
// kills, reached through a webhook relay and a charge gate where a test
// needs them.

// paydBinary is the payd executable, built once per test binary.
var paydBinary struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	err  error
	skip string
}

// TestMain removes the payd binaries the tests built, if any.
func TestMain(m *testing.M) {
	code := testdeps.Run(m) // runs the tests, then says what they skipped for want of a dependency
	if paydBinary.dir != "" {
		_ = os.RemoveAll(paydBinary.dir)
	}
	if shippedBinary.path != "" {
		_ = os.RemoveAll(filepath.Dir(shippedBinary.path))
	}
	os.Exit(code)
}

// ownSwitch holds the top-level tests that a switch of their own asked
// for (PAYD_TEST_NEMESIS, PAYD_TEST_DB_RESTART): heavy, but wanted, they
// build payd without PAYD_TEST_FULL=1 too.
var ownSwitch sync.Map

// askedFor says t's top-level test was asked for by a switch of its own.
func askedFor(t *testing.T) {
	root, _, _ := strings.Cut(t.Name(), "/")
	ownSwitch.Store(root, true)
}

// paydExecutable builds payd on first use and returns its path. It skips the
// test without PAYD_TEST_FULL=1 (a build and a process per payd make it
// heavy) unless its own switch asked for it, or when no go command exists
// to build with.
func paydExecutable(t *testing.T) string {
	t.Helper()
	if root, _, _ := strings.Cut(t.Name(), "/"); !isAsked(root) {
		testdeps.RequireFull(t, "builds payd and runs it as processes")
	}
	paydBinary.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			paydBinary.skip = "the go command is not available to build payd: " + err.Error()
			return
		}
		if paydBinary.dir, paydBinary.err = os.MkdirTemp("", "payd-bin-"); paydBinary.err != nil {
			return
		}
		paydBinary.path = filepath.Join(paydBinary.dir, "payd")
		// paydfault: the crash tests kill payd at a payment step (PAYD_TEST_FAULT).
		out, err := exec.Command(goTool, "build", "-tags", "paydfault", "-o", paydBinary.path, "../cmd/payd").CombinedOutput()
		if err != nil {
			paydBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if paydBinary.skip != "" {
		t.Skip(paydBinary.skip)
	}
	if paydBinary.err != nil {
		t.Fatalf("build payd: %v", paydBinary.err)
	}
	return paydBinary.path
}

func isAsked(root string) bool {
	_, ok := ownSwitch.Load(root)
	return ok
}

// paydProc is one payd process (`payd serve`).
type paydProc struct {
	*driver
	cmd    *exec.Cmd
	logs   *syncBuffer // stderr: the JSON log
	exited chan struct{}
	state  *os.ProcessState // set before exited closes
}

// startPaydProc runs payd as an OS process with the PAYD_* settings e (and
// none inherited from the test's environment), waits until it listens and
// stops it when the test ends. It is start's variant for a process
// boundary, not an option of start: the caller holds the process (to kill
// it with SIGKILL, read its exit status, restart it on the same database)
// rather than a stack, and builds e around fixtures that outlive it
// (procProvider, hookRelay, chargeGate), where start's stack owns a sandbox
// whose webhooks point at one payd's address.
func startPaydProc(t *testing.T, name string, e env) *paydProc {
	t.Helper()
	p, err := launchPaydProc(t, paydExecutable(t), name, e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launchPaydProc is startPaydProc reporting failure instead of ending the
// test, so several replicas can start at once from goroutines.
func launchPaydProc(t *testing.T, exe, name string, e env) (*paydProc, error) {
	p := &paydProc{driver: newDriver(t, name, ""), logs: &syncBuffer{}, exited: make(chan struct{})}
	listening := newListenWatch()
	p.cmd = exec.Command(exe, "serve")
	p.cmd.Dir = t.TempDir() // a stray default sqlite file lands here, not in the source tree
	p.cmd.Env = childEnv(e)
	p.cmd.Stdout, p.cmd.Stderr = listening, p.logs
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tail(p.logs.String(), 40))
		}
	})
	select {
	case p.base = <-listening.found:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before listening (%v):\n%s", name, p.state, p.logs.String())
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("%s did not listen within 2 minutes:\n%s", name, p.logs.String())
	}
}

// childEnv is the test's environment without any PAYD_* setting, plus e
// (no shutdown delay unless e sets one: undelayed).
func childEnv(e env) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYD_") {
			out = append(out, kv)
		}
	}
	for k, v := range undelayed(e) {
		out = append(out, k+"="+v)
	}
	return out
}

// stop ends the process gracefully (SIGTERM), as an operator would, and
// expects a clean exit; one that hangs is killed.
func (p *paydProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.state.Success() {
			p.t.Errorf("%s exited with %v after SIGTERM, want a clean exit", p.name, p.state)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// waitKilled waits for the process to die and checks that SIGKILL ended it
// (the fault injector), not a crash of its own.
func (p *paydProc) waitKilled() {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s still runs 30s after its fault should have killed it", p.name)
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s ended with %v, want killed by SIGKILL:\n%s", p.name, p.state, tail(p.logs.String(), 40))
	}
}

// jobRows sums the rows the named background job reported handling in this
// process's log ("background job done" lines).
func (p *paydProc) jobRows(job string) int64 {
	p.t.Helper()
	var n int64
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Job  string `json:"job"`
			Rows int64  `json:"rows"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "background job done" && l.Job == job {
			n += l.Rows
		}
	}
	return n
}

// procProvider is the sandbox provider run inside the test process, so it
// outlives every payd process the test kills, with a log of the calls payd
// made to it: which idempotency keys it charged (POST) and asked about
// (GET), in the order they arrived.
type procProvider struct {
	t   *testing.T
	sb  *sandbox.Server
	url string

	mu      sync.Mutex
	calls   map[string][]string // idempotency key (the attempt ID) → "POST", "GET", ...
	refunds int
	lists   []string // each request for a page of the charge list: its starting_after

	hold atomic.Int64 // holdCharges: how long each charge request waits before the sandbox sees it
}

// holdCharges makes every charge request wait d before the sandbox handles
// it, and then be handled even if payd has gone meanwhile: a slow provider
// that already has the request on the wire.
func (p *procProvider) holdCharges(d time.Duration) { p.hold.Store(int64(d)) }

// startProcProvider runs a sandbox on loopback, its configuration
// adjusted by each tune. webhookURL empty: it records its webhooks but
// delivers none, so whatever payd resolves it resolves by asking.
func startProcProvider(t *testing.T, webhookURL string, tunes ...func(*sandbox.Config)) *procProvider {
	t.Helper()
	cfg := sandbox.Config{
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db"), WebhookURL: webhookURL,
		WebhookSecret: testWebhookSecret, RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	for _, tune := range tunes {
		tune(&cfg)
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &procProvider{t: t, sb: sb, calls: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: p.count(sb.Handler()), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		cancel()
		_ = hs.Close()
		<-served
		_ = sb.Close()
	})
	return p
}

// count notes each charge call before the sandbox handles it.
func (p *procProvider) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/charges":
			key := r.Header.Get("Idempotency-Key")
			p.calls[key] = append(p.calls[key], "POST")
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/charges/"):
			key := strings.TrimPrefix(r.URL.Path, "/v1/charges/")
			p.calls[key] = append(p.calls[key], "GET")
		case r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
			p.refunds++
		case r.Method == http.MethodGet && r.URL.Path == "/v1/charges":
			p.lists = append(p.lists, r.URL.Query().Get("starting_after"))
		}
		p.mu.Unlock()
		if d := time.Duration(p.hold.Load()); d > 0 && r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			time.Sleep(d)
			r = r.WithContext(context.WithoutCancel(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

// callsFor is the calls made under one idempotency key, in order.
func (p *procProvider) callsFor(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls[key]...)
}

// refundCalls is how many refunds payd asked for.
func (p *procProvider) refundCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunds
}

// chargesOf is every charge the sandbox holds for an order.
func (p *procProvider) chargesOf(orderID string) []domain.Charge {
	p.t.Helper()
	return chargesAt(p.t, p.sb, orderID, "")
}

// hookRelay is a stable webhook URL for a payd that changes address with
// every restart: it forwards to the payd of the moment, and answers 502
// while there is none (503 is what payd itself says when its database is
// down), so the sandbox keeps retrying.
type hookRelay struct {
	url    string
	target atomic.Pointer[url.URL]
}

func startHookRelay(t *testing.T) *hookRelay {
	t.Helper()
	h := &hookRelay{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(h.target.Load()) },
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway) // payd is down: the sandbox retries
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String() + "/v1/webhooks/provider"
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.target.Load() == nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("webhook relay: %v", err)
		}
	}()
	t.Cleanup(func() { _ = hs.Close(); <-served })
	return h
}

// point sends webhooks to the payd at base from now on.
func (h *hookRelay) point(base string) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	h.target.Store(u)
}

// chargeGate stands between payd and the provider. Armed for one order, it
// lets that order's charge through to the provider and, once the provider
// has answered, runs a hook before the answer goes back to payd: the hook
// acts at the moment "the provider charged, payd does not know yet". It
// can also hold every charge's answer for a while, which widens that
// moment for payments racing a database restart.
type chargeGate struct {
	url   string
	delay time.Duration // how long each charge's answer is held

	mu    sync.Mutex
	order string       // the armed order; "" when disarmed
	hook  func() error // run once, for the armed order's charge
	done  chan error   // the hook's result
}

// gateHookKey carries the hook from the request to its response.
type gateHookKey struct{}

// startChargeGate proxies to the provider at providerURL, holding each
// charge's answer for delay.
func startChargeGate(t *testing.T, providerURL string, delay time.Duration) *chargeGate {
	t.Helper()
	target, err := url.Parse(providerURL)
	if err != nil {
		t.Fatal(err)
	}
	g := &chargeGate{delay: delay}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		// Runs after the provider answered and before payd reads a byte.
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodPost && resp.Request.URL.Path == "/v1/charges" {
				time.Sleep(g.delay)
			}
			if hook, ok := resp.Request.Context().Value(gateHookKey{}).(func()); ok {
				hook()
			}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			if hook := g.take(r); hook != nil {
				r = r.WithContext(context.WithValue(r.Context(), gateHookKey{}, hook))
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// arm makes the next charge of orderID run hook before payd hears the
// provider's answer. The returned channel delivers the hook's result.
func (g *chargeGate) arm(orderID string, hook func() error) <-chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.order, g.hook, g.done = orderID, hook, make(chan error, 1)
	return g.done
}

// take returns the hook for a charge request of the armed order, once,
// leaving the request's body as it found it.
func (g *chargeGate) take(r *http.Request) func() {
	orderID, ok := chargeOrderID(r)
	if !ok {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.order == "" || orderID != g.order {
		return nil
	}
	hook, done := g.hook, g.done
	g.order, g.hook = "", nil
	return func() { done <- hook() }
}
