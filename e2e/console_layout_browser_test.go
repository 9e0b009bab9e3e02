package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"
)

// consoleFor boots payd (SQLite unless dialect says otherwise), a tap in
// front of it and a browser of width × 900 px, opens the console and
// signs in with the admin token unless signIn is false.
func consoleFor(t *testing.T, s *stack, p *tap, width int64, signIn bool) *shopper {
	t.Helper()
	b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
	b.do("size the window", chromedp.EmulateViewport(width, 900))
	b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
	b.waitState("signed-out")
	if signIn {
		b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
		b.waitState("ready")
	}
	// A mark only this page load carries: still there later, the page was never reloaded.
	if _, err := eval[int](b, `window.stayedOnPage = 1`); err != nil {
		t.Fatal(err)
	}
	return b
}

// stayed reports whether the page is the one consoleFor loaded.
func (b *shopper) stayed() bool {
	v, err := eval[bool](b, `window.stayedOnPage === 1`)
	return err == nil && v
}

// box is an element's bounding box in CSS pixels.
type box struct{ X, Y, W, H float64 }

func (b *shopper) box(sel string) box {
	b.t.Helper()
	v, err := eval[[]float64](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()`, sel))
	if err != nil || len(v) != 4 {
		b.t.Fatalf("bounding box of %s: %v %v", sel, v, err)
	}
	return box{v[0], v[1], v[2], v[3]}
}

// shot saves a PNG of the element sel, as screenshot does for the page:
// under PAYD_TEST_SCREENSHOT_DIR when set, else in the test's folder.
func (b *shopper) shot(name, sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(sel)); err != nil {
		b.t.Fatalf("scroll to %s: %v", sel, err)
	}
	png, err := chromedp.Run(ctx, chromedp.Screenshot(sel))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", sel, err)
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

// signedOutView is what a signed-out page shows, read through computed
// style: the panels whose own display is none, the sections that show
// (none of their ancestors' display is none), and whether the sign-in
// card is laid out and visible.
type signedOutView struct {
	Hidden  map[string]bool `json:"hidden"`  // the top-level panels: their own computed display is none
	Shown   []string        `json:"shown"`   // every section displayed, by id
	SignIn  bool            `json:"signIn"`  // the sign-in card: displayed, visible, with a size
	Console string          `json:"console"` // #console's computed display
}

const signedOutJS = `(() => {
  const none = (el) => getComputedStyle(el).display === 'none';
  const displayed = (el) => { for (let e = el; e; e = e.parentElement) if (none(e)) return false; return true; };
  const hidden = {};
  for (const id of ['console', 'signed-in', 'status', 'overview', 'order', 'orders', 'discrepancies', 'reconcile']) {
    const el = document.getElementById(id);
    hidden[id] = !!el && !displayed(el);
  }
  for (const id of ['console', 'signed-in', 'status']) hidden[id + ':own'] = getComputedStyle(document.getElementById(id)).display === 'none';
  const card = document.getElementById('sign-in');
  const r = card.getBoundingClientRect();
  return {
    hidden,
    shown: [...document.querySelectorAll('section')].filter(displayed).map((s) => s.id),
    signIn: displayed(card) && getComputedStyle(card).visibility === 'visible' && r.width > 0 && r.height > 0,
    console: getComputedStyle(document.getElementById('console')).display,
  };
})()`

func (b *shopper) signedOutView() signedOutView {
	b.t.Helper()
	v, err := eval[signedOutView](b, signedOutJS)
	if err != nil {
		b.t.Fatalf("read the signed-out page: %v", err)
	}
	return v
}

func (b *shopper) checkSignedOut(when string) {
	b.t.Helper()
	v := b.signedOutView()
	for id, hidden := range v.Hidden {
		if !hidden {
			b.t.Errorf("%s: %s is displayed (computed style), want display: none", when, id)
		}
	}
	if !v.SignIn {
		b.t.Errorf("%s: the sign-in card is not displayed", when)
	}
	if len(v.Shown) != 1 || v.Shown[0] != "sign-in" {
		b.t.Errorf("%s: sections displayed = %v, want only sign-in", when, v.Shown)
	}
}

// TestConsoleSignedOutShowsOnlySignIn: signed out, the console shows its
// sign-in card and nothing else, read through computed style (#console is
// a grid, which the [hidden] attribute alone does not override): before
// signing in, and again after signing out. Signed in, the panels show,
// and once signed out the console stops asking payd for anything.
func TestConsoleSignedOutShowsOnlySignIn(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"))
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, false)
	b.checkSignedOut("before signing in")
	if b.signedOutView().Console != "none" {
		t.Errorf("#console's computed display = %q, want none", b.signedOutView().Console)
	}

	b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
	b.waitState("ready")
	v := b.signedOutView()
	if v.Console != "grid" || v.SignIn {
		t.Errorf("signed in: #console display = %q, sign-in card shown = %v; want grid and not shown", v.Console, v.SignIn)
	}
	for _, id := range []string{"overview", "orders", "discrepancies", "reconcile"} {
		if v.Hidden[id] {
			t.Errorf("signed in: %s is not displayed", id)
		}
	}

	b.do("sign out", chromedp.Click("#sign-out"))
	b.waitState("signed-out")
	b.checkSignedOut("after signing out")
	time.Sleep(time.Second) // a poll sent just before has reached the tap
	before := len(p.exchanges(nil))
	time.Sleep(6 * time.Second) // more than one poll period
	if after := p.exchanges(nil); len(after) != before {
		t.Errorf("signed out, the console still asks payd: %d requests after signing out, e.g. %s %s", len(after)-before, after[before].Method, after[before].URI)
	}
}

// TestConsoleLayoutUsesTheScreen: at 1280 px the orders list and the open
// order stand side by side; at 900 px they are one column. The list shows
// IDs shortened (whole in the title) with a copy button, the refunded part
// of each order, opens an order from the keyboard (Enter on its row), and
// the order shows its amount, refunded and net, and a refund made
// elsewhere while it is open, without a reload; a refund from the page is
// one request however often it is clicked. Nothing is wider than the
// window.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshot the README shows.
func TestConsoleLayoutUsesTheScreen(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"), withEnv(env{"PAYD_LEASE": "10m"}))
	_, tok := s.register("layout-console@example.com")
	s.paidOrder(tok, "12.50")
	order := s.paidOrder(tok, "20.00")
	if r := s.refund(order, uuid.NewString(), "5.00"); r.Status != http.StatusOK {
		t.Fatalf("refund 5.00 = %d %s, want 200", r.Status, r.Body)
	}
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)

	row := fmt.Sprintf(`#orders-rows tr[data-id="%s"]`, order)
	b.waitFor("the order in the list", func() bool { return b.count(row) == 1 })
	shown, err := eval[[]string](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return [e.innerText, e.title]; })()`, row+" .id"))
	if err != nil || len(shown) != 2 || shown[1] != order || len([]rune(shown[0])) > 14 || !strings.HasPrefix(order, strings.TrimSuffix(strings.Split(shown[0], "…")[0], "…")) {
		t.Errorf("the order's ID in the list reads %q (%v), want it shortened with the whole ID %s in its title", shown, err, order)
	}
	// The copy button puts the whole ID on the clipboard (the Clipboard
	// API stands in for the system's, to read back) and opens nothing.
	if _, err := eval[bool](b, `(navigator.clipboard.writeText = async (text) => { window.copied = text; }, true)`); err != nil {
		t.Fatal(err)
	}
	b.do("copy the order's ID", chromedp.Click(row+" button.copy"))
	b.waitFor("the copy", func() bool { return b.attr(row+" button.copy", "copied") == "yes" })
	if got, err := eval[string](b, `window.copied ?? ''`); err != nil || got != order {
		t.Errorf("copied %q (%v), want the whole ID %s", got, err, order)
	}
	if b.displayed("#order") {
		t.Error("copying an ID opened the order")
	}
	b.waitFor("the copy button back", func() bool { return b.attr(row+" button.copy", "copied") == "" })
	if got := b.text(row + " td:nth-child(4)"); got != "5.00 USD" {
		t.Errorf("the refunded column reads %q, want 5.00 USD", got)
	}

	b.do("open the order with the keyboard", chromedp.Focus(row), chromedp.KeyEvent(kb.Enter))
	b.waitFor("the order open", func() bool { return strings.HasPrefix(b.attr("#order", "loaded"), order+" ") })
	if b.attr(row, "id") != order || b.count(row+`[aria-current="true"]`) != 1 {
		t.Error("the open order's row is not marked current")
	}
	if got := b.text("#order-amount"); got != "20.00 USD" {
		t.Errorf("the order's amount reads %q, want 20.00 USD", got)
	}
	if got := b.text("#order-summary"); !strings.Contains(got, "refunded 5.00 USD") || !strings.Contains(got, "net 15.00 USD") {
		t.Errorf("the order's summary reads %q, want refunded 5.00 USD and net 15.00 USD", got)
	}

	list, detail := b.box("#orders"), b.box("#order")
	if detail.X < list.X+list.W || detail.Y > list.Y+list.H || list.W < 450 || detail.W < 450 {
		t.Errorf("at 1280 px the list is %+v and the order %+v, want them side by side, each at least 450 px wide", list, detail)
	}
	if wide, _ := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); wide {
		t.Error("at 1280 px the page is wider than the window")
	}
	// Nothing runs out of its card: every table and list fits inside its section.
	if over, _ := eval[[]string](b, `[...document.querySelectorAll('#console section')].flatMap((sec) => {
  const edge = sec.getBoundingClientRect().right;
  return [...sec.querySelectorAll('table, ul, ol')].filter((e) => e.getClientRects().length && e.getBoundingClientRect().right > edge + 0.5)
    .map((e) => sec.id + ' ' + (e.id || e.tagName));
})`); len(over) != 0 {
		t.Errorf("at 1280 px these run out of their section's card: %v", over)
	}
	// No shortened ID wraps: each is one line.
	if n, _ := eval[int](b, `[...document.querySelectorAll('.idref')].filter((e) => e.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(e).fontSize) * 1.2).length`); n != 0 {
		t.Errorf("%d IDs are broken over lines", n)
	}
	if _, err := eval[bool](b, `(document.activeElement?.blur(), true)`); err != nil {
		t.Fatal(err)
	}
	b.shot("console-order", ".columns")

	// Live: a refund made elsewhere shows on the open order without a reload.
	if r := s.refund(order, uuid.NewString(), "2.00"); r.Status != http.StatusOK {
		t.Fatalf("refund 2.00 = %d %s, want 200", r.Status, r.Body)
	}
	b.waitFor("the refund on the open order", func() bool {
		return b.attr(`#money [data-sum="refunded"]`, "value") == "7.00" && b.count(`#timeline li.new[data-kind="refund"]`) == 1
	})

	// A refund from the page: a double click is one request, with a key,
	// and the order and its timeline follow at once.
	b.do("fill the refund", chromedp.SendKeys("#refund-amount", "1.00"), chromedp.SendKeys("#refund-reason", "late delivery"))
	b.doubleClick("#refund")
	b.waitFor("the page's refund", func() bool {
		return strings.Contains(b.text("#refund-result"), "Refund 1.00 USD: succeeded") && b.attr(`#money [data-sum="refunded"]`, "value") == "8.00"
	})
	refunds := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/refund") })
	if len(refunds) != 1 || refunds[0].Key == "" || refunds[0].Status != http.StatusOK {
		t.Errorf("refund requests from the page = %+v, want one with a key, answered 200", refunds)
	}
	if n := b.count(`#timeline li[data-kind="refund"]`); n != 3 {
		t.Errorf("refunds on the timeline = %d, want 3", n)
	}
	if n := s.count("refunds WHERE order_id = ?", order); n != 3 {
		t.Errorf("refunds of the order = %d, want 3", n)
	}

	b.do("narrow the window", chromedp.EmulateViewport(900, 900))
	b.waitFor("one column", func() bool {
		list, detail := b.box("#orders"), b.box("#order")
		return detail.Y >= list.Y+list.H && abs(detail.X-list.X) < 1
	})
	if wide, _ := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); wide {
		t.Error("at 900 px the page is wider than the window")
	}
	if !b.stayed() {
		t.Error("the page was reloaded")
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
