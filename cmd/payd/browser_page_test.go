package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

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
}

// startShopper boots payd, the tap in front of it and a browser.
func startShopper(t *testing.T, dialect string, o checkoutOptions) *shopper {
	t.Helper()
	s, g := startGatedStack(t, dialect, o.env)
	g.open.Store(!o.holdWebhooks)
	p := newTap(t, s.base)
	p.cuts.Store(int32(o.cutPays))
	// The browser last: its cleanup runs first, so no stream holds the tap open.
	return &shopper{t: t, s: s, tap: p, webhook: g, ctx: newBrowser(t)}
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
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s := b.state(); slices.Contains(states, s) {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.t.Fatalf("page state = %q, want one of %v\n%s", b.state(), states, b.describe())
	return ""
}

// waitFor polls cond, generously, until it holds; else the test fails.
func (b *shopper) waitFor(what string, cond func() bool) {
	b.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	b.t.Fatalf("gave up waiting for %s\n%s", what, b.describe())
}

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

// orderReady registers a new customer through the page, fills the cart,
// places the order and returns its ID as the page shows it.
func (b *shopper) orderReady(email string) string {
	b.t.Helper()
	b.do("open the checkout page", chromedp.Navigate(b.tap.srv.URL+"/checkout"))
	b.waitState("signed-out")
	b.do("register",
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#name"), "Ada Lovelace"),
		chromedp.Click(chromedp.CSS("#register")),
	)
	b.waitState("cart")
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
	steps := make([]chromedp.Action[chromedp.Void], n)
	for i := range steps {
		steps[i] = chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(i+1))
	}
	b.do(fmt.Sprintf("click %s %d times", sel, n), steps...)
	// Every press must have landed on the element: had the page moved it
	// away, a "double click" test would prove nothing.
	hit, err := eval[bool](b, fmt.Sprintf(`document.querySelector('%s').contains(document.elementFromPoint(%f, %f))`, sel, xy[0], xy[1]))
	if err != nil || !hit {
		b.t.Fatalf("after clicking, %s is no longer under the mouse (%v): the page moved it", sel, err)
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
