package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"
)

// The console never misleads (issue 42): a bar leads to every section,
// every time reads one way, a currency with nothing to say is not listed,
// and stored text keeps its direction to itself.

// shownTime is the one way the console writes a time.
var shownTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$`)

// navView is the section bar as the page has it.
type navView struct {
	Links   []string `json:"links"`   // the sections its buttons lead to, in order
	Current []string `json:"current"` // those marked aria-current
	Sticky  string   `json:"sticky"`  // the bar's computed position
	Top     float64  `json:"top"`     // the bar's top and bottom in the window
	Bottom  float64  `json:"bottom"`
	ScrollY float64  `json:"scrollY"`
	Focus   string   `json:"focus"` // the id of the element with the focus
}

func (b *shopper) nav() navView {
	b.t.Helper()
	v, err := eval[navView](b, `(() => {
  const nav = document.getElementById('sections-nav');
  if (!nav) return { links: [], current: [], sticky: '', top: 0, bottom: 0, scrollY: window.scrollY, focus: '' };
  const links = [...nav.querySelectorAll('button')];
  const r = nav.getBoundingClientRect();
  return {
    links: links.map((a) => a.dataset.section),
    current: links.filter((a) => a.hasAttribute('aria-current')).map((a) => a.dataset.section),
    sticky: getComputedStyle(nav).position, top: r.top, bottom: r.bottom, scrollY: window.scrollY,
    focus: document.activeElement?.id ?? '',
  };
})()`)
	if err != nil {
		b.t.Fatalf("read the section bar: %v", err)
	}
	return v
}

// underBar reports whether the section id starts just below the bar, or,
// when the page cannot scroll that far, on screen below it with the page
// scrolled to its end.
func (b *shopper) underBar(id string) bool {
	nav := b.nav()
	top := b.box("#" + id).Y
	end, err := eval[bool](b, `window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1`)
	if err != nil {
		return false
	}
	return top >= nav.Bottom-1 && (top < nav.Bottom+80 || end && top < 600)
}

// viewShot saves a PNG of what the window shows, the bar at its top (the
// screenshot helper takes the whole page): under PAYD_TEST_SCREENSHOT_DIR
// when set, else in the test's folder.
func (b *shopper) viewShot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := cmp.Or(os.Getenv("PAYD_TEST_SCREENSHOT_DIR"), b.t.TempDir())
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, b.s.dialect))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// TestConsoleNavigation: signed in, a bar of buttons leads to every
// section (the overview, orders, reconciliation, the open order with its
// books, discrepancies, endpoints, the catalogue) and stays at the top of
// the window however far the page is scrolled. A click on a button brings
// its section just under the bar (or as far as the page scrolls) and marks
// the button (aria-current), only that one; Enter on a focused button does
// the same and gives the focus to the section's heading. Scrolled by hand, the bar marks the section whose top
// passed under it.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshot docs/console.md shows.
func TestConsoleNavigation(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"), withEnv(env{"PAYD_LEASE": "10m"}))
	_, tok := s.register("navigation-console@example.com")
	for _, amount := range []string{"12.50", "20.00", "7.00"} {
		s.paidOrder(tok, amount)
	}
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)

	nav := b.nav()
	want := []string{"overview", "orders", "reconcile", "order order-none", "discrepancies", "disputes-section", "endpoints", "catalogue"}
	if strings.Join(nav.Links, " ") != strings.Join(want, " ") {
		t.Fatalf("the section bar leads to %v, want %v", nav.Links, want)
	}
	if nav.Sticky != "sticky" {
		t.Errorf("the bar's position = %q, want sticky", nav.Sticky)
	}
	if len(nav.Current) != 1 || nav.Current[0] != "overview" {
		t.Errorf("at the top the bar marks %v, want the overview", nav.Current)
	}

	b.do("press the catalogue button", chromedp.Click(chromedp.CSS(`#sections-nav [data-section="catalogue"]`)))
	b.waitFor("the catalogue under the bar", func() bool { return b.underBar("catalogue") })
	if nav := b.nav(); len(nav.Current) != 1 || nav.Current[0] != "catalogue" || nav.ScrollY < 100 || nav.Top < -0.5 || nav.Top > 0.5 {
		t.Errorf("after the catalogue button the bar is %+v, want it at the window's top marking only the catalogue, the page scrolled", nav)
	}

	b.do("press the orders button from the keyboard", chromedp.Focus(chromedp.CSS(`#sections-nav [data-section="orders"]`)), chromedp.KeyEvent(kb.Enter))
	b.waitFor("the orders under the bar", func() bool { return b.underBar("orders") })
	if nav := b.nav(); len(nav.Current) != 1 || nav.Current[0] != "orders" || nav.Focus != "orders-h" {
		t.Errorf("after Enter on the orders button the bar is %+v, want the orders marked and their heading focused", nav)
	}
	if _, err := eval[bool](b, `(document.activeElement?.blur(), true)`); err != nil {
		t.Fatal(err)
	}
	b.viewShot("console-navigation")

	b.do("press the open order's button", chromedp.Click(chromedp.CSS(`#sections-nav [data-section="order order-none"]`)))
	b.waitFor("the placeholder of the open order under the bar", func() bool { return b.underBar("order-none") })
	if nav := b.nav(); len(nav.Current) != 1 || nav.Current[0] != "order order-none" {
		t.Errorf("with no order open the open order's button leads to its placeholder and marks %v, want it", nav.Current)
	}

	b.do("press the reconcile button", chromedp.Click(chromedp.CSS(`#sections-nav [data-section="reconcile"]`)))
	b.waitFor("reconcile under the bar", func() bool { return b.underBar("reconcile") })
	if nav := b.nav(); len(nav.Current) != 1 || nav.Current[0] != "reconcile" {
		t.Errorf("after the reconcile button the bar marks %v, want reconcile", nav.Current)
	}

	// Scrolled by hand, in one column: the section under the bar is marked.
	b.do("narrow the window", chromedp.EmulateViewport(900, 900))
	for _, id := range []string{"reconcile", "orders"} {
		if _, err := eval[bool](b, fmt.Sprintf(`(() => { const bar = document.getElementById('sections-nav').getBoundingClientRect().bottom;
			window.scrollBy(0, document.getElementById(%q).getBoundingClientRect().top - bar - 4); return true; })()`, id)); err != nil {
			t.Fatal(err)
		}
		b.waitFor("the bar to mark "+id, func() bool { c := b.nav().Current; return len(c) == 1 && c[0] == id })
		if top := b.nav().Top; top < -0.5 || top > 0.5 {
			t.Errorf("scrolled to %s, the bar's top is at %v, want it at the window's top", id, top)
		}
	}
	if wide, _ := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); wide {
		t.Error("at 900 px the page is wider than the window")
	}
	if !b.stayed() {
		t.Error("pressing the buttons reloaded the page")
	}
}

// clear empties the field sel, as selecting all and deleting does.
func (b *shopper) clear(sel string) {
	b.t.Helper()
	if _, err := eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = '';
		e.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`, sel)); err != nil {
		b.t.Fatalf("clear %s: %v", sel, err)
	}
}

// TestConsoleTimesReadOneWay: every time on the page and in its fields
// reads "2026-12-03 12:33:03 UTC": the fields are text, never the
// browser's date-time control with its locale format (12/03/2026,
// 12:33:03 PM). A time typed another way is refused with a message that
// says how to write it, and nothing is sent; one typed without seconds is
// written back the page's way; and payd gets RFC 3339 in UTC as before.
func TestConsoleTimesReadOneWay(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"), withEnv(env{"PAYD_LEASE": "10m"}))
	_, tok := s.register("times-console@example.com")
	order := s.paidOrder(tok, "12.00")
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)
	b.waitFor("the order in the list", func() bool { return b.count(fmt.Sprintf(`#orders-rows tr[data-id="%s"]`, order)) == 1 })
	b.do("open it", chromedp.Click(fmt.Sprintf(`#orders-rows tr[data-id="%s"] .open-order`, order)))
	b.waitFor("its timeline", func() bool { return strings.HasPrefix(b.attr("#order", "loaded"), order+" ") })

	type field struct{ ID, Type, Value, Placeholder string }
	fields, err := eval[[]field](b, `['q-from', 'q-to', 'r-from', 'r-to'].map((id) => { const e = document.getElementById(id);
		return { ID: id, Type: e.type, Value: e.value, Placeholder: e.placeholder }; })`)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f.Type != "text" || !shownTime.MatchString(f.Placeholder) {
			t.Errorf("field %s is of type %q with placeholder %q, want text showing the format", f.ID, f.Type, f.Placeholder)
		}
		if strings.HasPrefix(f.ID, "r-") && !shownTime.MatchString(f.Value) {
			t.Errorf("field %s holds %q, want a time as 2026-12-03 12:33:03 UTC", f.ID, f.Value)
		}
	}
	if n := b.count(`input[type="datetime-local"], input[type="date"], input[type="time"], input[type="month"], input[type="week"]`); n != 0 {
		t.Errorf("%d fields are the browser's date-time controls, which show the locale's format", n)
	}
	shown, err := eval[[]string](b, `[...document.querySelectorAll('#console time, #console td.when')].map((e) => e.innerText.trim())`)
	if err != nil || len(shown) < 2 {
		t.Fatalf("times on the page = %q (%v), want the order's row and timeline", shown, err)
	}
	for _, v := range shown {
		if !shownTime.MatchString(v) {
			t.Errorf("a time on the page reads %q, want 2026-12-03 12:33:03 UTC", v)
		}
	}
	if text := b.text("#console"); regexp.MustCompile(`\b\d{1,2}/\d{1,2}/\d{4}\b|\b\d{1,2}:\d{2}(:\d{2})? ?[AP]M\b`).MatchString(text) {
		t.Errorf("the console shows a locale time: %q", text)
	}

	searches := func() []string {
		var out []string
		for _, x := range p.exchanges(func(x exchange) bool { return strings.HasPrefix(x.URI, "/v1/admin/orders?") }) {
			if u, err := url.Parse(x.URI); err == nil && u.Query().Has("from") {
				out = append(out, u.Query().Get("from"))
			}
		}
		return out
	}
	for _, typed := range []string{"12/02/2026, 12:34:29 PM", "2026-02-30 10:00:00 UTC"} {
		b.clear("#q-from")
		b.do("type "+typed, chromedp.SendKeys("#q-from", typed), chromedp.Click("#search"))
		b.waitFor("the field to say how to write a time", func() bool {
			return strings.Contains(b.text("#q-from-error"), "YYYY-MM-DD HH:MM:SS UTC")
		})
		if valid, _ := eval[bool](b, `document.getElementById('q-from').validity.valid`); valid {
			t.Errorf("%q is taken as a time", typed)
		}
	}
	if got := searches(); len(got) != 0 {
		t.Errorf("searches sent with a time the field refused: from=%q", got)
	}

	b.clear("#q-from")
	b.do("type a time the page's way", chromedp.SendKeys("#q-from", "2000-01-02 03:04:05 UTC"), chromedp.Click("#search"))
	b.waitFor("the search from that time", func() bool { return len(searches()) == 1 })
	if got := searches()[0]; got != "2000-01-02T03:04:05Z" {
		t.Errorf("search sent from=%q, want 2000-01-02T03:04:05Z", got)
	}
	if got := b.text("#q-from-error"); got != "" {
		t.Errorf("a good time still shows %q", got)
	}
	b.clear("#q-to")
	b.do("type a time without seconds", chromedp.SendKeys("#q-to", "2099-01-02 03:04"), chromedp.Focus("#q-customer"))
	if got, _ := eval[string](b, `document.getElementById('q-to').value`); got != "2099-01-02 03:04:00 UTC" {
		t.Errorf("a time typed without seconds reads %q once left, want 2099-01-02 03:04:00 UTC", got)
	}

	b.do("reconcile the default window", chromedp.Click("#run"))
	b.waitFor("the run", func() bool { return strings.Contains(b.text("#run-summary"), "matched") })
	runs := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && x.URI == "/v1/admin/reconciliations" })
	if len(runs) != 1 || runs[0].Status != http.StatusCreated {
		t.Errorf("reconciliations sent = %+v, want one answered 201", runs)
	}
	if got := b.text("#run-summary"); !regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC to \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC`).MatchString(got) {
		t.Errorf("the run's window reads %q, want both ends as 2026-12-03 12:33:03 UTC", got)
	}
}

// TestConsoleOmitsZeroCurrencies: 500 JPY paid and never refunded, 10.00
// USD paid and 4.00 of it refunded. The paid tile lists both currencies;
// the refunds tile only USD, never "0 JPY".
func TestConsoleOmitsZeroCurrencies(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"), withEnv(env{"PAYD_LEASE": "10m"}))
	if r := s.merchant(testMerchantKey, "POST", "/v1/products", uuid.NewString(),
		map[string]any{"sku": "tea-jpy", "name": "Sencha", "unit_price": "500", "currency": "JPY"}); r.Status != http.StatusCreated {
		t.Fatalf("create a JPY product = %d %s, want 201", r.Status, r.Body)
	}
	_, tok := s.register("currencies-console@example.com")
	r := s.do(request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(),
		body: map[string]any{"currency": "JPY", "items": []map[string]any{{"sku": "tea-jpy", "quantity": 1}}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("order 500 JPY = %d %s, want 201", r.Status, r.Body)
	}
	jpy := r.json(t)["id"].(string)
	if r := s.pay(tok, jpy, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("pay the JPY order = %d %s, want 200", r.Status, r.Body)
	}
	usd := s.paidOrder(tok, "10.00")
	if r := s.refund(usd, uuid.NewString(), "4.00"); r.Status != http.StatusOK {
		t.Fatalf("refund 4.00 = %d %s, want 200", r.Status, r.Body)
	}
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)
	b.waitFor("the overview with both payments", func() bool { return b.tileValue("paid") == "2" && b.tileValue("refunds") == "1" })

	sums := func(tile string) []string {
		v, err := eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll('#tiles [data-tile="%s"] .sum')].map((e) => e.innerText.trim())`, tile))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := strings.Join(sums("paid"), ", "); got != "500 JPY, 10.00 USD" && got != "10.00 USD, 500 JPY" {
		t.Errorf("the paid tile lists %q, want 500 JPY and 10.00 USD", got)
	}
	if got := sums("refunds"); len(got) != 1 || got[0] != "4.00 USD" {
		t.Errorf("the refunds tile lists %q, want only 4.00 USD", got)
	}
	zero := regexp.MustCompile(`(^|\s)0(\.0+)? [A-Z]{3}\b`)
	if text := b.text("#tiles"); zero.MatchString(text) || strings.Contains(b.text(`#tiles [data-tile="refunds"]`), "JPY") {
		t.Errorf("the tiles list a currency with nothing in it: %q", text)
	}
}

// bidiView is how the page drew one piece of stored text.
type bidiView struct {
	Found    bool    `json:"found"`    // a text node holding the needle is on the page
	Isolated bool    `json:"isolated"` // an inline element around it isolates it (bdi, unicode-bidi isolate)
	Right    float64 `json:"right"`    // the right edge of the text's element
	Overflow bool    `json:"overflow"` // the box is wider inside than it is (scrollWidth > clientWidth)
}

// bidiOf finds the text node holding needle inside the element box
// selects and tells how it is drawn.
func (b *shopper) bidiOf(box, needle string) bidiView {
	b.t.Helper()
	v, err := eval[bidiView](b, fmt.Sprintf(`(() => {
  const box = document.querySelector(%q);
  if (!box) return { found: false, isolated: false, right: 0, overflow: false };
  const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  let node = null;
  while (walk.nextNode()) if (walk.currentNode.data.includes(%q)) { node = walk.currentNode; break; }
  if (!node) return { found: false, isolated: false, right: 0, overflow: box.scrollWidth > box.clientWidth };
  // Only an inline element isolates text from what stands beside it in the
  // line (a block is isolate in the browser's own style sheet, which
  // isolates nothing within it).
  let isolated = false;
  for (let e = node.parentElement; e && e !== box.parentElement && getComputedStyle(e).display === 'inline'; e = e.parentElement) {
    const ub = getComputedStyle(e).unicodeBidi;
    if (e.tagName === 'BDI' || ub === 'isolate' || ub === 'isolate-override' || ub === 'plaintext') { isolated = true; break; }
  }
  return { found: true, isolated, right: node.parentElement.getBoundingClientRect().right, overflow: box.scrollWidth > box.clientWidth };
})()`, box, needle))
	if err != nil {
		b.t.Fatalf("read %s: %v", box, err)
	}
	return v
}

// TestConsoleIsolatesStoredText: text someone stored with a right-to-left
// override (U+202E) in it — an endpoint's URL (written to the database
// directly: payd's API takes no such URL), its description, a product's
// name — is drawn in an element that isolates its direction, so the
// endpoint's status badge stays after its URL. A 300-character URL and a
// 180-character name without a space wrap inside their card and table.
func TestConsoleIsolatesStoredText(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"))
	const rlo = "\u202e"
	create := func(u, description string) string {
		r := s.admin("POST", "/v1/admin/endpoints", uuid.NewString(), map[string]any{"url": u, "events": []string{"order.paid"}, "description": description})
		if r.Status != http.StatusCreated {
			t.Fatalf("create endpoint %s = %d %s, want 201", u, r.Status, r.Body)
		}
		return r.json(t)["id"].(string)
	}
	spoofed := create("https://shop.example/hooks/spoof", "hooks for "+rlo+"gpj.exe")
	s.exec("UPDATE notify_endpoints SET url = ? WHERE id = ?", "https://shop.example/hooks/"+rlo+"gpj.exe", spoofed)
	long := create("https://shop.example/"+strings.Repeat("a", 279), "long")
	stockShop(s.driver, []shopItem{
		{"tea-rlo", "Tea " + rlo + "eert", "4.95", nil},
		{"tea-long", strings.Repeat("t", 180), "5.95", nil},
	})
	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)
	b.waitFor("the endpoints", func() bool { return b.count(`#ep-list li`) == 2 })
	b.waitFor("the catalogue", func() bool { return b.attr("#cat-rows", "loaded") == "2" })

	card := fmt.Sprintf(`#ep-list li[data-id="%s"]`, spoofed)
	for _, c := range []struct{ what, box, needle string }{
		{"the endpoint's URL", card + " .head", "gpj.exe"},
		{"the endpoint's description", card, "hooks for"},
		{"the product's name", `#cat-rows tr[data-sku="tea-rlo"]`, "eert"},
	} {
		if v := b.bidiOf(c.box, c.needle); !v.Found || !v.Isolated {
			t.Errorf("%s with U+202E: %+v, want it drawn in an element that isolates its direction", c.what, v)
		}
	}
	url, badge := b.bidiOf(card+" .head", "gpj.exe"), b.box(card+" .head .badge")
	if head := b.box(card + " .head strong"); badge.X < head.X+head.W-0.5 || url.Right > badge.X+0.5 {
		t.Errorf("the status badge is at x=%v, the URL spans %v to %v: the override pulled the badge into the URL", badge.X, head.X, head.X+head.W)
	}

	longCard := fmt.Sprintf(`#ep-list li[data-id="%s"]`, long)
	if v := b.bidiOf(longCard, "aaaa"); !v.Found || v.Overflow || v.Right > b.box(longCard).X+b.box(longCard).W+0.5 {
		t.Errorf("the 300-character URL: %+v, card %+v; want it wrapped inside its card", v, b.box(longCard))
	}
	if v := b.bidiOf("#catalogue", "tttt"); !v.Found || v.Overflow {
		t.Errorf("the 180-character name: %+v, want it wrapped inside the catalogue", v)
	}
	if wide, _ := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); wide {
		t.Error("the page is wider than the window")
	}
	b.shot("console-stored-text", "#endpoints")
}
