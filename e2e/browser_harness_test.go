package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/sandbox"
)

// chromium finds the browser for the checkout tests. Without one the tests
// skip, loudly, unless PAYD_TEST_REQUIRE_BROWSER=1 (CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PAYD_TEST_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (apt-get install chromium, or set PAYD_TEST_CHROMIUM): checkout browser tests not run"
	if os.Getenv("PAYD_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; PAYD_TEST_REQUIRE_BROWSER=1 requires them")
	}
	testdeps.Skip(t, testdeps.Chromium, msg)
	return ""
}

// newBrowser starts a fresh headless Chromium (its own profile, so its own
// localStorage) that lives until the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(800, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var mu sync.Mutex
	var thrown []string // uncaught exceptions in the page: each one is a bug
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			defer mu.Unlock()
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			thrown = append(thrown, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range thrown {
			t.Errorf("uncaught exception in the checkout page: %s", e)
		}
	})
	// The first call starts the browser; it must not carry a timeout, or
	// the timeout would end the browser too.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// exchange is one request the browser sent through the tap, and its answer.
type exchange struct {
	Method, URI, Key string // URI as sent (path and query); Key is the Idempotency-Key
	Sent             []byte // the request's body, kept for order creations only
	Status           int
	Replayed         bool   // Idempotent-Replayed: true
	RetryAfter       string // the Retry-After header
	Body             []byte // kept for pay answers and cut ones only
	Cut              bool   // payd answered, the browser never got the whole reply
}

func (x exchange) isPay() bool {
	return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/pay")
}

// isCreate reports whether x is an order creation.
func (x exchange) isCreate() bool {
	return x.Method == http.MethodPost && x.URI == "/v1/orders"
}

// tap stands between the browser and payd, as a load balancer would. It
// records every exchange and can cut the replies of the first pay requests
// after payd has answered them: payd did the work, the page hears nothing.
type tap struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy
	cuts  atomic.Int32 // pay replies still to cut
	mu    sync.Mutex
	log   []exchange

	// cutWhich picks the requests whose replies cuts counts down on; nil
	// is the pay requests.
	cutWhich func(exchange) bool
}

type exchangeIndex struct{}

// errCut marks an answer the tap is to cut.
var errCut = errors.New("reply cut by the test")

func newTap(t *testing.T, target string) *tap {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{proxy: httputil.NewSingleHostReverseProxy(u)}
	p.proxy.ErrorLog = log.New(io.Discard, "", 0) // streams cut by a reload are expected
	p.proxy.ModifyResponse = p.answered
	p.proxy.ErrorHandler = p.failed
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	return p
}

func (p *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{Method: r.Method, URI: r.URL.RequestURI(), Key: r.Header.Get("Idempotency-Key")}
	if x.isCreate() {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		x.Sent = body
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	x.Cut = p.cuttable(x) && p.cuts.Add(-1) >= 0
	p.mu.Lock()
	i := len(p.log)
	p.log = append(p.log, x)
	p.mu.Unlock()
	p.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeIndex{}, i)))
}

func (p *tap) cuttable(x exchange) bool {
	if p.cutWhich != nil {
		return p.cutWhich(x)
	}
	return x.isPay()
}

// answered records payd's answer (whole, for pay requests) and marks it
// for cutting when this pay request is one to cut.
func (p *tap) answered(res *http.Response) error {
	i := res.Request.Context().Value(exchangeIndex{}).(int)
	p.mu.Lock()
	defer p.mu.Unlock()
	x := &p.log[i]
	x.Status, x.Replayed = res.StatusCode, res.Header.Get("Idempotent-Replayed") == "true"
	x.RetryAfter = res.Header.Get("Retry-After")
	if !x.isPay() && !x.isCreate() && !x.Cut {
		return nil
	}
	body, err := io.ReadAll(res.Body) // payd has finished with the request
	res.Body.Close()
	if err != nil {
		return err
	}
	x.Body = body
	if x.Cut {
		return errCut
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// failed cuts a marked reply: the status line and headers go out, the body
// never does, so the page's fetch fails after payd has done the work (and
// Chromium, having seen a response, cannot quietly resend the request).
func (p *tap) failed(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, errCut) {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	i := r.Context().Value(exchangeIndex{}).(int)
	p.mu.Lock()
	x := p.log[i]
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(x.Body)))
	w.WriteHeader(x.Status)
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler) // net/http closes the connection, mid-reply
}

// exchanges returns a copy of what passed through, optionally filtered.
func (p *tap) exchanges(keep func(exchange) bool) []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []exchange
	for _, x := range p.log {
		if keep == nil || keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func (p *tap) pays() []exchange { return p.exchanges(exchange.isPay) }

// creates are the order creations that passed through.
func (p *tap) creates() []exchange { return p.exchanges(exchange.isCreate) }

// gate stands between the sandbox and payd's webhook endpoint. Shut, it
// answers 503 and the sandbox keeps retrying; open, it lets them through.
type gate struct {
	open  atomic.Bool
	proxy atomic.Pointer[httputil.ReverseProxy]
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := g.proxy.Load(); p != nil && g.open.Load() {
		p.ServeHTTP(w, r)
		return
	}
	http.Error(w, "webhooks held by the test", http.StatusServiceUnavailable)
}

// tune points the sandbox's webhooks at the gate, which forwards them to
// payd's own endpoint (start's gatedWebhooks).
func (g *gate) tune(t *testing.T) func(*sandbox.Config) {
	hooks := httptest.NewServer(g)
	t.Cleanup(hooks.Close)
	return func(c *sandbox.Config) {
		// c.WebhookURL is payd's own endpoint: the gate forwards there.
		u, err := url.Parse(c.WebhookURL)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = ""
		g.proxy.Store(httputil.NewSingleHostReverseProxy(u))
		c.WebhookURL = hooks.URL + "/v1/webhooks/provider"
		c.AsyncDelay, c.RetryMax = 500*time.Millisecond, 200*time.Millisecond
	}
}

// shopper drives the checkout page in Chromium, against payd behind a tap.
type shopper struct {
	t       *testing.T
	s       *stack
	tap     *tap
	webhook *gate
	ctx     context.Context
}

// checkoutOptions set up one browser test.
type checkoutOptions struct {
	cutPays      int  // cut the replies to this many first pay requests
	holdWebhooks bool // keep the sandbox's webhooks from payd until gate.open is set
	env          env
	catalogue    []shopItem // what the shop sells; nil: demoShop
}

// startShopper boots payd, the tap in front of it and a browser.
func startShopper(t *testing.T, dialect string, o checkoutOptions) *shopper {
	t.Helper()
	s := start(t, on(dialect), withEnv(o.env), gatedWebhooks())
	g := s.gate
	g.open.Store(!o.holdWebhooks)
	p := newTap(t, s.base)
	p.cuts.Store(int32(o.cutPays))
	stockShop(s.driver, o.catalogue)
	// The browser last: its cleanup runs first, so no stream holds the tap open.
	return &shopper{t: t, s: s, tap: p, webhook: g, ctx: newBrowser(t)}
}

// shopItem is a product of the checkout tests' shop.
type shopItem struct {
	SKU, Name, Price string
	Stock            any // a count, or nil: unlimited
}

// demoShop is what the sandbox shop sells: the products payd seeds in
// development with its in-process sandbox (app/democatalogue.go). The
// checkout tests run payd against a sandbox of their own, so they stock
// the shop themselves, with the merchant key.
var demoShop = []shopItem{
	{"tea-green", "Green tea, 100 g", "4.95", nil},
	{"mug-stone", "Stoneware mug", "12.00", 5},
	{"honey-wild", "Wildflower honey", "7.50", nil},
}

// stockShop creates the products of items (demoShop when nil) in payd's
// catalogue with the merchant key.
func stockShop(d *driver, items []shopItem) {
	d.t.Helper()
	if items == nil {
		items = demoShop
	}
	for _, it := range items {
		r := d.merchant(testMerchantKey, "POST", "/v1/products", uuid.NewString(),
			map[string]any{"sku": it.SKU, "name": it.Name, "unit_price": it.Price, "currency": "USD", "stock": it.Stock})
		if r.Status != http.StatusCreated {
			d.t.Fatalf("stock the shop with %s = %d %s, want 201", it.SKU, r.Status, r.Body)
		}
	}
}

// usualCart is what orderReady puts in the cart: 2 × 4.95 + 12.00 = 21.90.
var usualCart = map[string]int{"tea-green": 2, "mug-stone": 1}

// setQuantity types n into the quantity of sku in the cart, as a buyer
// does (the page hears an input event).
func (b *shopper) setQuantity(sku string, n int) {
	b.t.Helper()
	ok, err := eval[bool](b, fmt.Sprintf(`(() => { const q = document.getElementById(%q);
		if (!q || q.disabled) return false;
		q.value = %q; q.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`, "qty-"+sku, strconv.Itoa(n)))
	if err != nil || !ok {
		b.t.Fatalf("set the quantity of %s to %d: not on the page or disabled (%v)\n%s", sku, n, err, b.describe())
	}
}

// fillCart sets the cart's quantities.
func (b *shopper) fillCart(cart map[string]int) {
	b.t.Helper()
	for sku, n := range cart {
		b.setQuantity(sku, n)
	}
}

// do runs steps with a bound, failing the test with the page's state.
func (b *shopper) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.describe())
	}
}

// clickFresh clicks the element sel finds. A page that re-renders (the console
// refreshes a card after each action) may replace the element between
// the query and the click; the click then never reached the page
// ("Could not find node"), so it is tried again on the new element, for
// a few seconds.
func (b *shopper) clickFresh(what, sel string) {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(sel))
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") || time.Now().After(deadline) {
			b.t.Fatalf("%s: %v\n%s", what, err, b.describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eval runs a JavaScript expression in the page and returns its value.
func eval[T any](b *shopper, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// state is the page's main[data-state], or "" while it (re)loads.
func (b *shopper) state() string {
	s, err := eval[string](b, `document.getElementById('app')?.dataset.state ?? ''`)
	if err != nil {
		return ""
	}
	return s
}

// waitState waits, generously and by polling, for the page to reach one of
// the states, and returns it. Anything else after the deadline fails.
func (b *shopper) waitState(states ...string) string {
	b.t.Helper()
	var s string
	if !within(pageWait, func() bool { s = b.state(); return slices.Contains(states, s) }) {
		b.t.Fatalf("page state = %q, want one of %v\n%s", b.state(), states, b.describe())
	}
	return s
}

// waitFor polls cond, generously, until it holds; else the test fails.
func (b *shopper) waitFor(what string, cond func() bool) {
	b.t.Helper()
	if !within(pageWait, cond) {
		b.t.Fatalf("gave up waiting for %s\n%s", what, b.describe())
	}
}

// pageWait is how long the page may take to get somewhere: generous, the
// browser shares the machine.
const pageWait = 60 * time.Second

// describe is what a failure message needs: the page's words and the traffic.
func (b *shopper) describe() string {
	text, _ := eval[string](b, `document.getElementById('status')?.innerText + ' | ' + document.getElementById('progress-text')?.innerText`)
	var sb strings.Builder
	fmt.Fprintf(&sb, "page status: %s\ntraffic:\n", text)
	for _, x := range b.tap.exchanges(nil) {
		fmt.Fprintf(&sb, "  %s %s key=%q -> %d replayed=%v cut=%v retry-after=%q\n", x.Method, x.URI, x.Key, x.Status, x.Replayed, x.Cut, x.RetryAfter)
	}
	return sb.String()
}

// orderReady registers a new customer through the page, fills the cart
// (usualCart), places the order and returns its ID as the page shows it.
func (b *shopper) orderReady(email string) string {
	b.t.Helper()
	b.signUp(email)
	b.fillCart(usualCart)
	return b.placeOrder()
}

// signUp opens the checkout page and registers a new customer through
// it, up to the cart, drawn from the catalogue.
func (b *shopper) signUp(email string) {
	b.t.Helper()
	b.do("open the checkout page", chromedp.Navigate(b.tap.srv.URL+"/checkout"))
	b.waitState("signed-out")
	b.do("register",
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#name"), "Ada Lovelace"),
		chromedp.Click(chromedp.CSS("#register")),
	)
	b.waitState("cart")
}

// placeOrder places the order the cart holds and returns its ID as the
// page shows it.
func (b *shopper) placeOrder() string {
	b.t.Helper()
	b.do("place the order", chromedp.Click(chromedp.CSS("#place-order")))
	b.waitState("ready")
	id, err := eval[string](b, `document.getElementById('app').dataset.orderId`)
	if err != nil || id == "" {
		b.t.Fatalf("order ID on the page = %q, %v; want an ID", id, err)
	}
	return id
}

// choose picks a sandbox payment method.
func (b *shopper) choose(method string) {
	b.t.Helper()
	b.do("choose "+method, chromedp.SetValue(chromedp.CSS("#method"), method))
}

// click clicks an element with the mouse, n times in a row as a person
// would (a double click is two presses, the second with click count 2).
func (b *shopper) click(sel string, n int) {
	b.t.Helper()
	b.do("scroll to "+sel, chromedp.ScrollIntoView(chromedp.CSS(sel)))
	xy, err := eval[[]float64](b, `(() => { const r = document.querySelector('`+sel+`').getBoundingClientRect();
		return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	if err != nil || len(xy) != 2 {
		b.t.Fatalf("locate %s: %v %v", sel, xy, err)
	}
	under := fmt.Sprintf(`document.querySelector('%s').contains(document.elementFromPoint(%f, %f))`, sel, xy[0], xy[1])
	if hit, err := eval[bool](b, under); err != nil || !hit {
		b.t.Fatalf("before clicking, %s is not under the mouse (%v)", sel, err)
	}
	steps := make([]chromedp.Action[chromedp.Void], n)
	for i := range steps {
		steps[i] = chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(i+1))
	}
	b.do(fmt.Sprintf("click %s %d times", sel, n), steps...)
	// Every press of a multiple click must have landed on the element: had
	// the page moved it away between presses, a "double click" test would
	// prove nothing. One press landed if the element was under the mouse
	// before it; what the page does once it has its answer is its business,
	// and a page that already has it may have hidden the element (a paid
	// order's Pay button): that is not the page moving it under the mouse.
	if n > 1 {
		answered := fmt.Sprintf(`document.querySelector('%s').hidden`, sel)
		if hit, err := eval[bool](b, "("+under+") || "+answered); err != nil || !hit {
			b.t.Fatalf("after clicking, %s is no longer under the mouse (%v): the page moved it", sel, err)
		}
	}
}

// text is an element's visible text.
func (b *shopper) text(sel string) string {
	b.t.Helper()
	s, err := eval[string](b, `document.querySelector('`+sel+`').innerText`)
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// screenshot saves the page as PNG: under PAYD_TEST_SCREENSHOT_DIR when
// set (to keep it), else in the test's temporary folder.
func (b *shopper) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	b.toTop(ctx)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("PAYD_TEST_SCREENSHOT_DIR")
	if dir == "" {
		dir = b.t.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, b.s.dialect))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// toTop scrolls the page to its top before a screenshot (which captures
// beyond the window): a bar that sticks to the window's top (the
// console's) then stands where it belongs, not over what the last scroll
// brought under it.
func (b *shopper) toTop(ctx context.Context) {
	b.t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.scrollTo(0, 0), true)`)); err != nil {
		b.t.Fatalf("scroll to the top: %v", err)
	}
}

// token is the customer token the page holds.
func (b *shopper) token() string {
	b.t.Helper()
	tok, err := eval[string](b, `JSON.parse(sessionStorage.getItem('payd.checkout.session')).token`)
	if err != nil || tok == "" {
		b.t.Fatalf("token in sessionStorage = %q, %v", tok, err)
	}
	return tok
}

// checkCounts compares what payd and the provider recorded for the order.
func (b *shopper) checkCounts(orderID string, wantAttempts int64) {
	b.t.Helper()
	if n := b.s.charges(orderID); n != 1 {
		b.t.Errorf("provider charges for order %s = %d, want 1", orderID, n)
	}
	if n := b.s.count("payment_attempts WHERE order_id = ?", orderID); n != wantAttempts {
		b.t.Errorf("payment attempts for order %s = %d, want %d", orderID, n, wantAttempts)
	}
	if n := b.s.count("orders WHERE id = ? AND status = 'paid'", orderID); n != 1 {
		b.t.Errorf("order %s is not paid in payd's database", orderID)
	}
}

// checkTokenStaysSecret proves the token travelled only in headers: no URL
// the browser requested carries it, and payd never logged it.
func (b *shopper) checkTokenStaysSecret(token string) {
	b.t.Helper()
	for _, x := range b.tap.exchanges(nil) {
		if strings.Contains(x.URI, token) {
			b.t.Errorf("request %s %s carries the customer token in its URL", x.Method, x.URI)
		}
	}
	if strings.Contains(b.s.logs.String(), token) {
		b.t.Error("payd's logs contain the customer token")
	}
}
