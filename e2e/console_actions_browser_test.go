package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// flaky stands between the tap and payd, as a failing load balancer
// would: it answers 502 itself, without asking payd, to the requests
// refuse picks, and passes everything else on.
type flaky struct {
	srv    *httptest.Server
	refuse func(*http.Request) bool
}

func newFlaky(t *testing.T, target string, refuse func(*http.Request) bool) *flaky {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{refuse: refuse}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.refuse(r) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<h1>502 Bad Gateway</h1>"))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

// TestConsoleTimelineFollowsEveryAction: a charge payd missed on an order
// the customer then cancelled, found by reconciliation. Its card offers
// only what fits (refund, ignore; apply would be refused). Refunding it
// meets a load balancer answering 502 (payd never sees those): the
// console tries again with the same key, gives up and says so; clicked
// again, the same intent goes with the same key and payd refunds once;
// the timeline shows the refund and the resolution.
// All of it with the tab hidden, when the console does not poll: each
// change on screen is the one its action asked for. Visible again, the
// console polls again.
func TestConsoleTimelineFollowsEveryAction(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		// The first four resolve requests (the refund and the console's own
		// three retries) meet the 502s.
		var resolves atomic.Int32
		f := newFlaky(t, s.base, func(r *http.Request) bool {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/resolve") {
				return false
			}
			n := resolves.Add(1)
			return n <= 4
		})
		p := newTap(t, f.srv.URL)

		_, tok := s.register("actions-console@example.com")
		order := s.order(tok, "9.90")
		s.loseOutcome(tok, order)
		if r := s.do(request{method: "POST", path: "/v1/orders/" + order + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
			t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
		}
		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]any{
			"from": now().Add(-time.Hour).Format(time.RFC3339), "to": now().Add(time.Minute).Format(time.RFC3339)})
		if r.Status != http.StatusCreated {
			t.Fatalf("reconcile = %d %s, want 201", r.Status, r.Body)
		}

		b := consoleFor(t, s, p, 1280, true)
		b.do("open the order by ID", chromedp.SendKeys("#open-id", order), chromedp.Click("#open"))
		card := `#order-open li.discrepancy` // the charge came after the order was closed
		b.waitFor("its open discrepancy", func() bool { return b.count(card) == 1 })
		did := b.attr(card, "id")
		audits := func(outcome string) int {
			return b.count(fmt.Sprintf(`#timeline li[data-kind="audit"][data-outcome^="%s"]`, outcome))
		}
		if n := audits(""); n != 0 {
			t.Fatalf("operator actions on the timeline before any = %d, want 0", n)
		}

		// The tab hidden: the console stops asking, so whatever the
		// timeline shows from here on is what an action asked for.
		b.setVisibility("hidden")
		b.waitFor("the poll paused", func() bool { return b.attr("#live", "live") == "paused" })
		time.Sleep(time.Second) // a poll sent just before has reached the tap
		before := len(p.exchanges(nil))
		time.Sleep(6 * time.Second) // more than one poll period
		if after := p.exchanges(nil); len(after) != before {
			t.Errorf("with the tab hidden the console still asks payd: %s %s", after[before].Method, after[before].URI)
		}

		// The card offers what fits a charge on a closed order, as payd's
		// actions for it say: refund or ignore, not apply (payd would answer
		// 409 resolution_not_applicable).
		var offered []string
		for _, a := range []string{"apply", "refund", "ignore"} {
			if b.count(card+" button.resolve."+a) == 1 {
				offered = append(offered, a)
			}
		}
		if strings.Join(offered, " ") != "refund ignore" {
			t.Errorf("the card offers %v, want refund and ignore", offered)
		}
		b.do("a note", chromedp.SendKeys(card+" .note", "charge seen at the provider"))

		b.do("refund", chromedp.Click(card+" button.refund"))
		b.waitFor("the console to give up on the 502s", func() bool { return strings.Contains(b.text(card+" .result"), "502") })
		b.clickFresh("refund again", card+" button.refund")
		entry := fmt.Sprintf(`#timeline li[data-kind="discrepancy"][data-id="%s"]`, did)
		b.waitFor("the resolution on the timeline", func() bool { return b.attr(entry, "outcome") == "resolved: refund" })
		b.waitFor("the refund on the timeline", func() bool { return b.count(`#timeline li[data-kind="refund"]`) == 1 && audits("200") == 1 })

		sent := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") })
		if len(sent) != 5 {
			t.Fatalf("resolve requests = %d, want 5 (refund four times through the 502s; refund again)\n%s", len(sent), b.describe())
		}
		refunds := sent
		for i, x := range refunds {
			want := http.StatusBadGateway
			if i == len(refunds)-1 {
				want = http.StatusOK
			}
			if x.Key == "" || x.Key != refunds[0].Key || x.Status != want {
				t.Errorf("refund request %d = key %q status %d, want the refund's one key, status %d", i+1, x.Key, x.Status, want)
			}
		}
		if n := s.count("refunds WHERE order_id = ?", order); n != 1 {
			t.Errorf("refunds of order %s = %d, want 1", order, n)
		}
		if n := s.count("audit_log WHERE action = 'resolve_discrepancy'"); n != 1 {
			t.Errorf("resolve audit rows = %d, want 1 (the refund)", n)
		}
		// The tab visible again: the console asks at once, and goes on.
		polls := func() int {
			return len(p.exchanges(func(x exchange) bool { return strings.HasPrefix(x.URI, "/v1/admin/stats?") }))
		}
		n := polls()
		b.setVisibility("visible")
		b.waitFor("the poll back", func() bool { return b.attr("#live", "live") == "on" && polls() >= n+2 })
		if !b.stayed() {
			t.Error("the page was reloaded")
		}
	})
}

// setVisibility makes the page believe its tab is hidden or visible, as
// switching tabs does: document.visibilityState and its event.
func (b *shopper) setVisibility(state string) {
	b.t.Helper()
	if _, err := eval[bool](b, fmt.Sprintf(`(Object.defineProperty(document, 'visibilityState', { value: %q, configurable: true }),
		document.dispatchEvent(new Event('visibilitychange')), true)`, state)); err != nil {
		b.t.Fatalf("make the tab %s: %v", state, err)
	}
}

// TestConsoleDisputeOffersWhatFits: a paid order the customer disputes
// (pm_dispute) has an open disputed discrepancy, which only ignore
// resolves. Its card offers ignore alone, as the discrepancy's actions
// say, and tells the amounts as they are: the dispute is in payd's books,
// as a dispute of the order, not "none in payd's books".
func TestConsoleDisputeOffersWhatFits(t *testing.T) {
	chromium(t)
	s := start(t)
	p := newTap(t, s.base)
	_, tok := s.register("dispute-console@example.com")
	order := s.order(tok, "10.00")
	if r := s.pay(tok, order, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
		t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
	}
	eventually(t, 10*time.Second, "the disputed discrepancy", func() bool {
		return s.count("discrepancies WHERE type = 'disputed' AND order_id = ?", order) == 1
	})

	b := consoleFor(t, s, p, 1280, true)
	b.do("open the order by ID", chromedp.SendKeys("#open-id", order), chromedp.Click("#open"))
	card := `#order-open li.discrepancy[data-type="disputed"]`
	b.waitFor("its disputed discrepancy", func() bool { return b.count(card) == 1 })
	var offered []string
	for _, a := range []string{"apply", "refund", "ignore"} {
		if b.count(card+" button.resolve."+a) == 1 {
			offered = append(offered, a)
		}
	}
	if strings.Join(offered, " ") != "ignore" {
		t.Errorf("the disputed card offers %v, want ignore alone", offered)
	}
	meta := b.text(card + " .meta")
	if strings.Contains(meta, "none in payd's books") || !strings.Contains(meta, "dispute of its order") {
		t.Errorf("the disputed card says %q, want the dispute in payd's books as a dispute of its order", meta)
	}
}

// TestConsoleReconcileRefreshesTheOpenOrder: with an order open and the
// tab hidden (the console does not poll), a reconciliation run from the
// console finds the charge payd missed on it; the order's timeline shows
// the discrepancy and the overview counts it at once, without a reload.
func TestConsoleReconcileRefreshesTheOpenOrder(t *testing.T) {
	chromium(t)
	s := start(t, withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
	p := newTap(t, s.base)
	_, tok := s.register("reconcile-console@example.com")
	order := s.order(tok, "9.90")
	s.loseOutcome(tok, order)
	if r := s.do(request{method: "POST", path: "/v1/orders/" + order + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
		t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
	}

	b := consoleFor(t, s, p, 1280, true)
	b.do("open the order by ID", chromedp.SendKeys("#open-id", order), chromedp.Click("#open"))
	entry := `#timeline li[data-kind="discrepancy"]`
	b.waitFor("the open order", func() bool { return b.count(`#timeline li`) > 0 })
	if n := b.count(entry); n != 0 {
		t.Fatalf("discrepancies on the timeline before the run = %d, want 0", n)
	}
	b.waitFor("the empty overview", func() bool { return b.tileValue("discrepancies") == "0" })
	b.setVisibility("hidden")
	b.waitFor("the poll paused", func() bool { return b.attr("#live", "live") == "paused" })

	b.do("run a reconciliation", chromedp.Click("#run"))
	b.waitFor("the run's discrepancy on the open order's timeline", func() bool { return b.count(entry) == 1 })
	b.waitFor("the overview counting it", func() bool { return b.tileValue("discrepancies") == "1" })
	if !b.stayed() {
		t.Error("the page was reloaded")
	}
}

// TestConsoleShortensEveryID: an order with a payment, a dispute, its
// ledger entries and its discrepancy shows no whole ID anywhere in the
// order's panel (its timeline, books, disputes and discrepancy cards
// included): each is shortened, whole on hover and in its copy button.
func TestConsoleShortensEveryID(t *testing.T) {
	chromium(t)
	s := start(t)
	p := newTap(t, s.base)
	_, tok := s.register("ids-console@example.com")
	order := s.order(tok, "10.00")
	if r := s.pay(tok, order, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
		t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
	}
	eventually(t, 10*time.Second, "the dispute", func() bool {
		return s.count("discrepancies WHERE type = 'disputed' AND order_id = ?", order) == 1 && s.count("disputes WHERE order_id = ?", order) == 1
	})
	b := consoleFor(t, s, p, 1280, true)
	b.do("open the order by ID", chromedp.SendKeys("#open-id", order), chromedp.Click("#open"))
	b.waitFor("its dispute, ledger and discrepancy", func() bool {
		return b.count(`#order-open li.discrepancy`) == 1 && b.count(`#timeline li[data-kind="dispute"]`) == 1 && b.count(`#timeline li[data-kind="ledger"]`) == 2
	})
	whole, err := eval[[]string](b, `(() => {
		const re = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
		const out = [];
		const walk = document.createTreeWalker(document.querySelector('#order'), NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			if (re.test(n.nodeValue) && n.parentElement.closest('[hidden]') === null) out.push(n.parentElement.className + ': ' + n.nodeValue);
		}
		return out;
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range whole {
		t.Errorf("a whole ID shown in the order's panel: %s", w)
	}
	if n := b.count(`#timeline .idref`); n == 0 {
		t.Error("the timeline shows no shortened ID")
	}
}
