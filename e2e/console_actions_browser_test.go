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
// the customer then cancelled, found by reconciliation. Applying it does not fit: payd answers 409
// resolution_not_applicable, and without a reload the order's timeline
// shows the refused action and the card the actions that fit. Refunding it
// then meets a load balancer answering 502 (payd never sees those): the
// console tries again with the same key, gives up and says so; clicked
// again, the same intent goes with the same key (apply had another) and
// payd refunds once; the timeline shows the refund and the resolution.
// All of it with the tab hidden, when the console does not poll: each
// change on screen is the one its action asked for. Visible again, the
// console polls again.
func TestConsoleTimelineFollowsEveryAction(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		// The first resolve request (apply) reaches payd; the next four (the
		// refund and the console's own three retries) meet the 502s.
		var resolves atomic.Int32
		f := newFlaky(t, s.base, func(r *http.Request) bool {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/resolve") {
				return false
			}
			n := resolves.Add(1)
			return n >= 2 && n <= 5
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

		b.do("apply, which does not fit", chromedp.SendKeys(card+" .note", "charge seen at the provider"), chromedp.Click(card+" button.apply"))
		b.waitFor("the refusal on the timeline", func() bool { return audits("409") == 1 })
		if !b.displayed(`#timeline li.new[data-kind="audit"]`) {
			t.Error("the refused action is not marked new on the timeline")
		}
		got := b.text(card + " .result")
		if !strings.Contains(got, "resolution_not_applicable") {
			t.Errorf("the card says %q after apply, want resolution_not_applicable", got)
		}
		// payd names the actions that fit in the problem's actions member;
		// without one, the card shows the problem's detail.
		if b.displayed(card + " .fits") {
			if fits := b.text(card + " .fits"); !strings.Contains(fits, "refund") || strings.Contains(fits, "apply") {
				t.Errorf("the card lists %q as fitting, want refund and not apply", fits)
			}
			if b.count(card+` button.refund[data-fits="yes"]`) != 1 || b.count(card+` button.apply[data-fits="yes"]`) != 0 {
				t.Error("the refund button is not marked as fitting, or apply is")
			}
		} else {
			t.Logf("payd's 409 names no actions: the card shows its detail, %q", got)
			if !strings.Contains(got, " — ") {
				t.Errorf("the card says %q, want the problem's detail after its title", got)
			}
		}
		if v, _ := eval[string](b, fmt.Sprintf(`document.querySelector(%q).value`, card+" .note")); v != "charge seen at the provider" {
			t.Errorf("the note after the redraw = %q, want it kept", v)
		}

		b.do("refund", chromedp.Click(card+" button.refund"))
		b.waitFor("the console to give up on the 502s", func() bool { return strings.Contains(b.text(card+" .result"), "502") })
		b.do("refund again", chromedp.Click(card+" button.refund"))
		entry := fmt.Sprintf(`#timeline li[data-kind="discrepancy"][data-id="%s"]`, did)
		b.waitFor("the resolution on the timeline", func() bool { return b.attr(entry, "outcome") == "resolved: refund" })
		b.waitFor("the refund on the timeline", func() bool { return b.count(`#timeline li[data-kind="refund"]`) == 1 && audits("200") == 1 })

		sent := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") })
		if len(sent) != 6 {
			t.Fatalf("resolve requests = %d, want 6 (apply; refund four times through the 502s; refund again)\n%s", len(sent), b.describe())
		}
		apply, refunds := sent[0], sent[1:]
		if apply.Status != http.StatusConflict || apply.Key == "" {
			t.Errorf("apply = %+v, want 409 with a key", apply)
		}
		for i, x := range refunds {
			want := http.StatusBadGateway
			if i == len(refunds)-1 {
				want = http.StatusOK
			}
			if x.Key != refunds[0].Key || x.Key == apply.Key || x.Status != want {
				t.Errorf("refund request %d = key %q status %d, want the refund's one key (not apply's %q), status %d", i+1, x.Key, x.Status, apply.Key, want)
			}
		}
		if n := s.count("refunds WHERE order_id = ?", order); n != 1 {
			t.Errorf("refunds of order %s = %d, want 1", order, n)
		}
		if n := s.count("audit_log WHERE action = 'resolve_discrepancy'"); n != 2 {
			t.Errorf("resolve audit rows = %d, want 2 (the refused apply, the refund)", n)
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
