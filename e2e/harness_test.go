// Package e2e holds payd's end-to-end tests. This file is their harness:
// the driver that speaks HTTP to a running payd (in this process, or an OS
// process: process_test.go), built on the generated client where it makes
// well-formed calls; start, the one way to boot an in-process stack, with
// its options; and the readers and waits the tests share.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"github.com/payd/payd/client"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/shopspring/decimal"
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/app"
	"github.com/payd/payd/cli"
	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

const (
	testAdminToken    = "adm_test_0123456789abcdef0123456789"
	testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecretKey     = "test-secret-key-0123456789abcdef"
	testMerchantKey   = "sk_test_merchant_0123456789abcdef01"
)

// repoRoot is the repository, from this package.
const repoRoot = ".."

// env is a test's PAYD_* settings.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// paydEnv is the settings of a payd on dbURL that charges through
// providerURL, with extra on top.
func paydEnv(dbURL, providerURL string, extra env) env {
	e := env{
		"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL, "PAYD_PROVIDER_URL": providerURL,
		"PAYD_ADMIN_TOKEN": testAdminToken, "PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": testSecretKey,
		"PAYD_MERCHANT_KEY": testMerchantKey, "PAYD_LOG_LEVEL": "info",
		// The tests fire hundreds of requests a second from one address
		// with one token: limits are off unless a test is about them.
		"PAYD_RATE_LIMIT": "0", "PAYD_WEBHOOK_RATE_LIMIT": "0",
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// ---- the driver ----

// driver speaks HTTP to one running payd, in-process or an OS process,
// and holds every answer to openapi.yaml.
type driver struct {
	t      *testing.T
	name   string // names payd in failure messages
	base   string // http://127.0.0.1:port
	client *http.Client

	catalogue   *sync.Map // the SKUs priced has made sure of
	merchantKey string    // priced's key; "" for testMerchantKey
}

// newDriver is a driver for the payd listening at base.
func newDriver(t *testing.T, name, base string) *driver {
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(c.CloseIdleConnections)
	return &driver{t: t, name: name, base: base, client: c, catalogue: &sync.Map{}}
}

// request is one call to payd.
type request struct {
	method, path, token, key, contentType string
	header                                http.Header // sent as given (a webhook's signature headers)
	body                                  any         // string, []byte or a value to marshal
}

// reply is one HTTP answer, read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("reply %d is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// code is the problem code of an error reply.
func (r reply) code(t *testing.T) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.Status, r.Body)
	}
	c, _ := r.json(t)["code"].(string)
	return c
}

// problemCode is the code of a problem+json reply, "" for anything else.
func (r reply) problemCode() string {
	var pr client.Problem
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") || json.Unmarshal(r.Body, &pr) != nil {
		return ""
	}
	return string(pr.Code)
}

// decode unmarshals a reply into v or fails the test.
func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("reply %d does not decode into %T: %v\n%s", r.Status, v, err, r.Body)
	}
	return v
}

// send makes one call; an error means no answer came (payd died, or cut
// the connection).
func (d *driver) send(r request) (reply, error) {
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(r.method, d.base+r.path, body)
	if err != nil {
		return reply{}, err
	}
	return d.roundTrip(r, req, body != nil)
}

// as sends a request the generated client built (its builder's results
// passed straight in), with token as the bearer when set, and wants an
// answer.
func (d *driver) as(token string) func(*http.Request, error) reply {
	return func(req *http.Request, err error) reply {
		d.t.Helper()
		if err != nil {
			d.t.Fatalf("build request: %v", err)
		}
		rep, err := d.roundTrip(request{token: token}, req, req.Body != nil)
		if err != nil {
			d.t.Fatalf("%s %s on %s: %v", req.Method, req.URL.Path, d.name, err)
		}
		return rep
	}
}

// server is the base the generated client's request builders resolve
// paths beneath.
func (d *driver) server() string { return d.base + "/" }

// roundTrip adds r's headers to req, sends it and reads the answer, which
// is held to openapi.yaml.
func (d *driver) roundTrip(r request, req *http.Request, hasBody bool) (reply, error) {
	if r.header != nil {
		req.Header = r.header.Clone()
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		checkContract(d.t, req, resp.StatusCode, resp.Header, b) // every answer is held to openapi.yaml
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// do makes one call that must be answered.
func (d *driver) do(r request) reply {
	d.t.Helper()
	rep, err := d.send(r)
	if err != nil {
		d.t.Fatalf("%s %s on %s: %v", r.method, r.path, d.name, err)
	}
	return rep
}

// register creates a customer and returns its ID and token.
func (d *driver) register(email string) (string, string) {
	d.t.Helper()
	r := d.as("")(client.NewRegisterCustomerRequest(d.server(), &client.RegisterCustomerParams{IdempotencyKey: new(uuid.NewString())},
		client.RegisterRequest{Email: openapi_types.Email(email), Name: "Test Customer"}))
	if r.Status != http.StatusCreated {
		d.t.Fatalf("register(%s) = %d %s, want 201", email, r.Status, r.Body)
	}
	reg := decode[client.Registration](d.t, r)
	return reg.Customer.Id, reg.Token
}

// newEmail is an address no other customer has.
func newEmail() string { return uuid.NewString() + "@example.com" }

// order creates a USD order of amount and returns its ID: the buyer
// orders one unit of the catalogue's product at that price (priced).
func (d *driver) order(token, amount string) string {
	d.t.Helper()
	sku := d.priced(amount)
	r := d.as(token)(client.NewCreateOrderRequest(d.server(), &client.CreateOrderParams{}, client.CreateOrderRequest{
		Items: []client.ItemRequest{{Sku: &sku, Quantity: 1}},
	}))
	if r.Status != http.StatusCreated {
		d.t.Fatalf("create order = %d %s, want 201", r.Status, r.Body)
	}
	return decode[client.Order](d.t, r).Id
}

// priced returns the SKU of a catalogue product that costs amount USD
// (unlimited stock), created by the test's merchant key the first time a
// test asks for that price: only the merchant sets a price. The key is the
// SKU's, so replicas and concurrent callers creating it get one product.
func (d *driver) priced(amount string) string {
	d.t.Helper()
	sku := "usd-" + amount
	if _, ok := d.catalogue.Load(sku); ok {
		return sku
	}
	key := cmp.Or(d.merchantKey, testMerchantKey)
	for range 50 {
		r := d.do(request{method: "POST", path: "/v1/products", token: key, key: "catalogue-" + sku,
			body: map[string]any{"sku": sku, "name": "Thing at " + amount, "unit_price": amount, "currency": "USD"}})
		switch {
		case r.Status == http.StatusCreated, r.problemCode() == "sku_taken":
			d.catalogue.Store(sku, true)
			return sku
		case r.Status == http.StatusConflict: // the same creation in flight elsewhere
			time.Sleep(20 * time.Millisecond)
		default:
			d.t.Fatalf("create product %s = %d %s, want 201", sku, r.Status, r.Body)
		}
	}
	d.t.Fatalf("create product %s: still in flight", sku)
	return ""
}

// item is a buyer's order line: one unit of sku.
func item(sku string) client.ItemRequest { return client.ItemRequest{Sku: &sku, Quantity: 1} }

// payRequest is the customer's pay call.
func payRequest(token, orderID, key, method string) request {
	return request{method: "POST", path: "/v1/orders/" + orderID + "/pay", token: token, key: key, body: client.PayRequest{PaymentMethod: method}}
}

// pay sends one pay request that must be answered.
func (d *driver) pay(token, orderID, key, method string) reply {
	d.t.Helper()
	return d.do(payRequest(token, orderID, key, method))
}

// tryPay sends one pay request; an error means the connection died.
func (d *driver) tryPay(token, orderID, key, method string) (reply, error) {
	return d.send(payRequest(token, orderID, key, method))
}

// paidOrder creates an order of amount and pays it with pm_ok.
func (d *driver) paidOrder(token, amount string) string {
	d.t.Helper()
	id := d.order(token, amount)
	if r := d.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		d.t.Fatalf("pay(%s) = %d %s, want 200", id, r.Status, r.Body)
	}
	return id
}

// admin is one call with the admin token.
func (d *driver) admin(method, path, key string, body any) reply {
	d.t.Helper()
	return d.do(request{method: method, path: path, token: testAdminToken, key: key, body: body})
}

// refund asks payd to refund amount ("" = the rest) of an order.
func (d *driver) refund(orderID, key, amount string) reply {
	d.t.Helper()
	body := client.RefundRequest{Reason: "customer asked"}
	if amount != "" {
		body.Amount = &amount
	}
	return d.as(testAdminToken)(client.NewRefundOrderRequest(d.server(), orderID, &client.RefundOrderParams{IdempotencyKey: &key}, body))
}

// timeline reads GET /v1/admin/orders/{id}.
func (d *driver) timeline(orderID string) client.Timeline {
	d.t.Helper()
	r := d.as(testAdminToken)(client.NewOrderTimelineRequest(d.server(), orderID))
	if r.Status != http.StatusOK {
		d.t.Fatalf("GET /v1/admin/orders/%s = %d %s, want 200", orderID, r.Status, r.Body)
	}
	return decode[client.Timeline](d.t, r)
}

// record is GET /v1/requests/{key} as the customer sees it.
func (d *driver) record(token, key string) (status string, respStatus int, body map[string]any) {
	d.t.Helper()
	r := d.as(token)(client.NewGetRequestRequest(d.server(), key))
	if r.Status != http.StatusOK {
		d.t.Fatalf("GET /v1/requests/%s = %d %s, want 200", key, r.Status, r.Body)
	}
	rec := decode[client.Record](d.t, r)
	if rec.Response == nil {
		return string(rec.Status), 0, nil
	}
	body, ok := rec.Response.Body.(map[string]any)
	if !ok && rec.Response.Body != nil {
		d.t.Fatalf("GET /v1/requests/%s: the stored body is not a JSON object: %s", key, r.Body)
	}
	return string(rec.Status), rec.Response.Status, body
}

// postWebhook sends body to payd's webhook endpoint with the given headers.
func (d *driver) postWebhook(body []byte, h http.Header) reply {
	d.t.Helper()
	return d.do(request{method: http.MethodPost, path: "/v1/webhooks/provider", header: h, body: body})
}

// sendEvent signs a payment event now and delivers it once.
func (d *driver) sendEvent(id, typ string, p payment) reply {
	d.t.Helper()
	body := eventBody(d.t, id, typ, p)
	return d.postWebhook(body, signedWebhook(d.t, id, time.Now(), body))
}

// ---- the in-process stack ----

// stack is payd started in-process on port 0 (through the command line,
// as `go run ./cmd/payd` does, or through app.Build when a test hands it a
// tracer), with its own sandbox provider (so the test can count what was
// really charged) and a handle on payd's database to check what was
// written. What start's options added is kept beside it.
type stack struct {
	*inproc
	sandbox  *sandbox.Server // nil in Stripe mode
	db       *repository.DB
	dialect  string
	dbURL    string
	sandboxL net.Listener

	hostile *hostile         // throughHostile: the proxy between payd and the sandbox
	gate    *gate            // gatedWebhooks: the gate the sandbox's webhooks pass
	fake    *stripefake.Fake // stripeMode: the Stripe payd charges
	seen    *traceparents    // tracedBy: the traceparent headers the sandbox was sent
}

// stackOptions are what the starters' options set (see The starters).
type stackOptions struct {
	dialect string
	env     env
	tunes   []func(*sandbox.Config)
	hostile bool
	gated   bool
	stripe  bool
	traced  bool
	tracer  trace.TracerProvider
	exact   env    // asConfigured
	peer    *stack // peerOf
	provURL string // providerAt

	nodes       *[galeratest.Nodes]string // onNodes: startTrio's and startJobTrio's databases
	premigrated bool                      // premigrated: startReplicas migrates first
}

// options are opts applied in turn, over nothing set.
func options(opts []option) stackOptions {
	o := stackOptions{env: env{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// stackOnly reports whether o sets an option only start takes: its
// sandbox, proxies and modes.
func (o stackOptions) stackOnly() bool {
	return len(o.tunes) > 0 || o.hostile || o.gated || o.stripe || o.traced || o.exact != nil || o.peer != nil || o.provURL != ""
}

// option sets up the stack start boots.
type option func(*stackOptions)

// on runs payd on a fresh database of dialect (default: SQLite).
func on(dialect string) option { return func(o *stackOptions) { o.dialect = dialect } }

// withEnv adds PAYD_* settings on top of the stack's own.
func withEnv(e env) option {
	return func(o *stackOptions) {
		for k, v := range e {
			o.env[k] = v
		}
	}
}

// tuned adjusts the test sandbox's configuration by each tune (no
// webhooks, duplicates, reordering, delays).
func tuned(tunes ...func(*sandbox.Config)) option {
	return func(o *stackOptions) { o.tunes = append(o.tunes, tunes...) }
}

// throughHostile puts a hostile provider between payd and the sandbox
// (stack.hostile).
func throughHostile() option { return func(o *stackOptions) { o.hostile = true } }

// gatedWebhooks passes the sandbox's webhooks through a gate the test can
// hold shut (stack.gate), so "the payment is still pending" lasts exactly
// as long as the test needs it, whatever the machine's speed.
func gatedWebhooks() option { return func(o *stackOptions) { o.gated = true } }

// stripeMode runs payd in Stripe mode against a fake Stripe (stack.fake),
// with no sandbox.
func stripeMode() option { return func(o *stackOptions) { o.stripe = true } }

// tracedBy builds payd with spans recorded in tp instead of exported (nil
// leaves tracing off), charging through a sandbox that records the
// traceparent headers it is sent (stack.seen) and delivers no webhooks.
func tracedBy(tp trace.TracerProvider) option {
	return func(o *stackOptions) { o.traced, o.tracer = true, tp }
}

// asConfigured runs payd with exactly e and nothing of the test's around
// it: its own database, secrets and in-process sandbox, as e says.
func asConfigured(e env) option { return func(o *stackOptions) { o.exact = e } }

// peerOf starts another payd on s's database and sandbox: another process
// as far as payd can tell (its own change notifications, its own jobs),
// sharing only what replicas share.
func peerOf(s *stack) option { return func(o *stackOptions) { o.peer = s } }

// providerAt has a peer charge through url instead of the sandbox.
func providerAt(url string) option { return func(o *stackOptions) { o.provURL = url } }

// onNodes puts replica i of a trio on urls[i]: three nodes of a Galera
// cluster, or one database named three times (startTrio, startJobTrio).
func onNodes(urls [galeratest.Nodes]string) option {
	return func(o *stackOptions) { o.nodes = &urls }
}

// premigrated has startReplicas run `payd migrate up` before the replicas
// start, so they start within moments of each other and their background
// jobs tick nearly together; without it they also migrate the database at
// once.
func premigrated() option { return func(o *stackOptions) { o.premigrated = true } }

// The starters. start is the one way to start payd; the others start
// several payds, or one as an OS process, and take start's options where
// they apply (a starter handed one it does not take fails the test):
//
//   - start(t, opts...): one payd in this process, with its own sandbox, on
//     a fresh database (on), or another payd on a stack's database and
//     sandbox (peerOf).
//   - startTrio(t, onNodes(urls), withEnv(e)) and startGalera(t, withEnv(e))
//     (galera_harness_test.go): three payds, each started by start, one per
//     node of a Galera cluster or one database thrice, behind a round-robin
//     webhook front.
//   - startPaydProc(t, name, e) (process_test.go): one payd as an OS
//     process, for the tests that kill it with SIGKILL, restart it on the
//     same database or need a process boundary. It is not an option of
//     start because those tests hold the process (the *paydProc, with its
//     exit status), not a stack, and compose its settings around fixtures
//     that outlive it (procProvider, hookRelay, chargeGate), where start's
//     stack owns a sandbox whose webhooks point at one payd's address.
//   - startReplicas(t, n, on(d), premigrated(), withEnv(e)) (replicas_test.go):
//     startPaydProc n times at once on one fresh database.
//   - startJobTrio(t, onNodes(urls)) (jobs_once_test.go): three payds wired
//     by app.Wire but not served, so the test runs their jobs by hand.
//
// startInproc, startBuilt and launch below are start's own helpers, not
// starters: only start (and startTrio through it) calls them.

// start boots a sandbox and payd on a fresh database, as the options say,
// and stops both when the test ends. It is the one way the end-to-end
// tests start an in-process stack.
func start(t *testing.T, opts ...option) *stack {
	t.Helper()
	o := options(opts)
	if o.dialect == "" {
		o.dialect = "sqlite"
	}
	if o.nodes != nil || o.premigrated {
		t.Fatal("start takes one database: onNodes is startTrio's, premigrated is startReplicas'")
	}
	if o.exact != nil {
		return &stack{inproc: startInproc(t, o.exact)}
	}
	if p := o.peer; p != nil {
		url := o.provURL
		if url == "" {
			url = p.providerURL()
		}
		return &stack{inproc: startInproc(t, paydEnv(p.dbURL, url, o.env)),
			sandbox: p.sandbox, db: p.db, dialect: p.dialect, dbURL: p.dbURL, sandboxL: p.sandboxL}
	}
	s := &stack{dialect: o.dialect, dbURL: dbtest.NewURL(t, migrations.Dialect(o.dialect))}
	if o.stripe {
		s.fake = stripefake.New(t.Cleanup)
		s.inproc = startInproc(t, stripeEnv(s.dbURL, s.fake, o.env))
		s.db = openDB(t, s.dbURL)
		return s
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.sandboxL = ln
	e := env{}
	if o.hostile {
		s.hostile = newHostile(t)
		e["PAYD_PROVIDER_URL"] = s.hostile.url
	}
	for k, v := range o.env {
		e[k] = v
	}
	if o.gated {
		s.gate = &gate{}
		o.tunes = append(o.tunes, s.gate.tune(t))
	}
	e = paydEnv(s.dbURL, s.providerURL(), e)
	if o.traced {
		s.inproc = startBuilt(t, e, app.TracerProvider(o.tracer))
	} else {
		s.inproc = startInproc(t, e)
	}
	cfg := sandbox.Config{
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db"), WebhookURL: s.base + "/v1/webhooks/provider",
		WebhookSecret: testWebhookSecret, AsyncDelay: 100 * time.Millisecond, RetryBase: 50 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	for _, tune := range o.tunes {
		tune(&cfg)
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox = sb
	sbDone := make(chan struct{})
	if o.traced { // the provider's API alone, each request's traceparent noted
		s.seen = &traceparents{next: sb.Handler()}
		hs := &http.Server{Handler: s.seen, ReadHeaderTimeout: time.Second}
		go func() { defer close(sbDone); _ = hs.Serve(ln) }()
		t.Cleanup(func() { _ = hs.Close(); <-sbDone; sb.Close() })
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { defer close(sbDone); _ = sb.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-sbDone; sb.Close() })
	}
	if o.hostile {
		s.hostile.setTarget(s.providerURL())
	}
	s.db = openDB(t, s.dbURL)
	return s
}

// silentSandbox keeps the sandbox's own webhooks in its outbox, undelivered:
// payd then learns about charges only from its own calls, from
// reconciliation and from the events a test sends.
func silentSandbox(c *sandbox.Config) { c.WebhookURL = "" }

// withDuplicates makes the sandbox deliver every webhook n times.
func withDuplicates(n int) func(*sandbox.Config) {
	return func(c *sandbox.Config) { c.Duplicates = n }
}

// inproc is payd started through run in the test process, as `go run
// ./cmd/payd` starts it, on port 0.
type inproc struct {
	*driver
	stdout *listenWatch // the banner
	logs   *syncBuffer  // the JSON log
	cancel context.CancelFunc
	done   chan error
}

// startInproc runs `payd serve` through the command line with the settings
// e, waits until it listens and stops it when the test ends. It is start's
// helper; tests call start.
func startInproc(t *testing.T, e env) *inproc {
	t.Helper()
	e = undelayed(e)
	return launch(t, func(ctx context.Context, stdout, stderr io.Writer) error {
		return run(ctx, nil, e.get, stdout, stderr)
	})
}

// undelayed is e with PAYD_SHUTDOWN_DELAY=0 unless e sets it: the tests
// stop payd hundreds of times, and only those about the shutdown delay
// wait for it. Every starter, in-process or OS process, goes through it.
func undelayed(e env) env {
	if _, ok := e["PAYD_SHUTDOWN_DELAY"]; ok {
		return e
	}
	out := env{"PAYD_SHUTDOWN_DELAY": "0"}
	for k, v := range e {
		out[k] = v
	}
	return out
}

// launch runs payd's main until ctx ends, waits until it listens and
// stops it when the test ends: the common part of startInproc and
// startBuilt.
func launch(t *testing.T, main func(ctx context.Context, stdout, stderr io.Writer) error) *inproc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inproc{stdout: newListenWatch(), logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- main(ctx, p.stdout, p.logs) }()
	select {
	case base := <-p.stdout.found:
		p.driver = newDriver(t, "payd", base)
	case err := <-p.done:
		cancel()
		t.Fatalf("payd did not start: %v\nlogs:\n%s", err, p.logs.String())
	}
	t.Cleanup(p.stop)
	return p
}

// startBuilt builds payd from e with app.Build and opts and serves it, as
// `payd serve` does, waits until it listens and stops it when the test
// ends. It is start's helper for tracedBy; tests call start.
func startBuilt(t *testing.T, e env, opts ...app.Option) *inproc {
	t.Helper()
	cfg, err := loadConfig("serve", nil, undelayed(e).get, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return launch(t, func(ctx context.Context, stdout, stderr io.Writer) error {
		a, err := app.Build(ctx, cfg, append(opts, app.Logs(stderr), app.Banner(stdout))...)
		if err != nil {
			return err
		}
		defer a.Close()
		return a.Serve(ctx)
	})
}

// stop shuts payd down gracefully and reports an unclean exit.
func (p *inproc) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	if err := <-p.done; err != nil {
		p.t.Errorf("run() = %v, want nil after shutdown", err)
	}
}

// providerURL is the stack's sandbox.
func (s *stack) providerURL() string { return "http://" + s.sandboxL.Addr().String() }

// directProvider is a client of the stack's sandbox, for charging behind
// payd's back.
func (s *stack) directProvider() *provider.Client { return provider.NewClient(s.providerURL()) }

// chargeDirectly makes a real, succeeded charge at the sandbox (pm_ok,
// USD) under a key payd never used: money the provider took that payd did
// not ask for.
func (s *stack) chargeDirectly(key, orderID, amount string) domain.Charge {
	s.t.Helper()
	ch, err := s.directProvider().Charge(s.t.Context(), domain.ChargeRequest{
		IdempotencyKey: key, OrderID: orderID, Amount: decimal.RequireFromString(amount), Currency: "USD", PaymentMethod: "pm_ok",
	})
	if err != nil || ch.Status != domain.ChargeSucceeded {
		s.t.Fatalf("Charge(%s, %s) = %+v, %v; want succeeded", key, amount, ch, err)
	}
	return ch
}

// sandboxCharges is every charge the sandbox holds for an order, in
// status when status is not empty.
func (s *stack) sandboxCharges(orderID string, status domain.ChargeStatus) []domain.Charge {
	s.t.Helper()
	return chargesAt(s.t, s.sandbox, orderID, status)
}

// chargesAt is every charge sb holds for an order, in status when status
// is not empty.
func chargesAt(t *testing.T, sb *sandbox.Server, orderID string, status domain.ChargeStatus) []domain.Charge {
	t.Helper()
	all, err := sb.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.Charge
	for _, c := range all {
		if c.OrderID == orderID && (status == "" || c.Status == status) {
			out = append(out, c)
		}
	}
	return out
}

// charges counts what the provider really charged (succeeded charges).
func (s *stack) charges(orderID string) int {
	s.t.Helper()
	return len(s.sandboxCharges(orderID, domain.ChargeSucceeded))
}

// providerCharge is the sandbox's record of the charge with this ID.
func (s *stack) providerCharge(id string) domain.Charge {
	s.t.Helper()
	all, err := s.sandbox.Charges(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, c := range all {
		if c.ID == id {
			return c
		}
	}
	s.t.Fatalf("sandbox has no charge %s", id)
	return domain.Charge{}
}

// ---- payd's database ----

// openDB opens a handle on payd's database for the test's own reads.
func openDB(t *testing.T, dbURL string) *repository.DB {
	t.Helper()
	db, err := repository.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// countRows runs SELECT COUNT(*) FROM query on db.
func countRows(t *testing.T, db *repository.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM "+query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("count %s: %v", query, err)
	}
	return n
}

// scanRows runs query on db into dst.
func scanRows(t *testing.T, db *repository.DB, dst any, query string, args ...any) {
	t.Helper()
	if err := db.Gorm().Raw(query, args...).Scan(dst).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count runs SELECT COUNT(*) on payd's database.
func (s *stack) count(query string, args ...any) int64 {
	s.t.Helper()
	return countRows(s.t, s.db, query, args...)
}

// exec runs one statement on payd's database that must change one row.
func (s *stack) exec(query string, args ...any) {
	s.t.Helper()
	res := s.db.Gorm().Exec(query, args...)
	if res.Error != nil || res.RowsAffected != 1 {
		s.t.Fatalf("%s: %v, %d rows; want 1 row", query, res.Error, res.RowsAffected)
	}
}

// auditRows counts audit_log rows of an action with a request ID and result.
func (s *stack) auditRows(action, key string, result int) int64 {
	s.t.Helper()
	return s.count("audit_log WHERE actor = 'admin' AND action = ? AND request_id = ? AND result = ?", action, key, result)
}

// ---- waiting and plumbing ----

// eventually polls cond until it holds, failing the test with what once
// timeout passes; the wait is generous because the machine is shared, the
// poll keeps it quick.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !within(timeout, cond) {
		t.Fatalf("after %v: %s", timeout, what)
	}
}

// within polls cond until it holds (true) or timeout passes (false), for
// callers that report the failure themselves.
func within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := 10 * time.Millisecond; !cond(); pause = min(pause*2, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// listenWatch is payd's stdout: it reports the address of the
// "payd listening on http://..." line and keeps everything written.
type listenWatch struct {
	mu    sync.Mutex
	out   bytes.Buffer
	next  int // where the first unread line starts
	done  bool
	found chan string
}

func newListenWatch() *listenWatch { return &listenWatch{found: make(chan string, 1)} }

func (w *listenWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(b)
	for !w.done {
		line, _, ok := bytes.Cut(w.out.Bytes()[w.next:], []byte("\n"))
		if !ok {
			break
		}
		w.next += len(line) + 1
		if addr, ok := strings.CutPrefix(string(line), "payd listening on "); ok {
			w.done = true
			w.found <- addr
		}
	}
	return len(b), nil
}

// String is everything payd wrote to stdout so far.
func (w *listenWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// forEach runs fn(0..n-1) on at most workers goroutines.
func forEach(workers, n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func dialects() []string { return []string{"sqlite", "mysql"} }

func eachDialect(t *testing.T, fn func(t *testing.T, dialect string)) {
	for _, d := range dialects() {
		t.Run(d, func(t *testing.T) { fn(t, d) })
	}
}

// stamp is a time as payd writes it: RFC 3339 in UTC with microseconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// money is an order's books by their JSON names.
func money(b client.Books) map[string]string {
	return map[string]string{"charged": b.Charged, "refunded": b.Refunded, "disputed": b.Disputed, "lost": b.Lost, "net": string(b.Net)}
}

// now is payd's clock as app keeps it: UTC, at the microsecond precision
// both databases store.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// run is payd's command line, as main runs it.
var run = cli.Main

// deref is *p, or "-" for nil, as the admin CLI prints an absent field.
func deref[T ~string](p *T) string {
	if p == nil {
		return "-"
	}
	return string(*p)
}

// loadConfig is payd's settings from getenv and args, as the command line
// reads them for subcommand sub.
func loadConfig(sub string, args []string, getenv func(string) string, _ io.Writer) (app.Config, error) {
	return app.LoadConfig(sub, getenv, func(fs *flag.FlagSet) error {
		fs.SetOutput(io.Discard)
		return fs.Parse(args)
	})
}
