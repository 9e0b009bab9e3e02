package e2e

import (
	"fmt"
	"github.com/payd/payd/client"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox"
)

// TestConsoleResolvesStagedDiscrepancy drives the operators' console at
// /admin in headless Chromium against payd booted through run. A payment
// whose outcome payd misread (the provider charged, payd's books say
// declined) is staged; the operator signs in (a wrong token is refused),
// reconciles through the console, finds the discrepancy in the run's result
// and in the list of open ones, opens its order, double-clicks "apply" and sees the timeline change: the
// discrepancy resolved, the operator action answered 200 and done by the
// named operator who signed in (PAYD_ADMIN_TOKENS), the order paid.
// The double click resolves once (one request, one audit row), and the
// token never travels in a URL nor reaches payd's logs. A dry run over the
// settlement file, uploaded through the page, finds nothing new.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshots the README shows.
func TestConsoleResolvesStagedDiscrepancy(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		const alice = "op-Pl9Ok8Ij7Uh6Yg5Tf4Rd3Es2Wa1Qz0Xc"
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m", "PAYD_ADMIN_TOKENS": "alice:" + alice}), tuned(silentSandbox)) // only reconciliation finds it
		p := newTap(t, s.base)
		b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
		b.do("widen the window", chromedp.EmulateViewport(1280, 900))

		_, tok := s.register("console@example.com")
		order := s.order(tok, "7.00")
		_, charge := s.loseOutcome(tok, order)

		b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
		b.waitState("signed-out")
		if b.displayed("#console") {
			t.Error("signed out, the console's panels are displayed")
		}
		b.do("sign in with a wrong token", chromedp.SendKeys("#token", "adm_wrong_token_0123456789abcdef"), chromedp.Click("#sign-in-button"))
		b.waitFor("the wrong token refused", func() bool { return strings.Contains(b.text("#sign-in-error"), "401") })
		b.do("sign in as alice", chromedp.SendKeys("#token", alice), chromedp.Click("#sign-in-button"))
		b.waitState("ready")

		b.do("reconcile", chromedp.Click("#run"))
		sel := `#run-discrepancies li[data-type="missing_local_payment"]`
		b.waitFor("the run's discrepancy", func() bool { return b.count(sel) == 1 })
		did := b.attr(sel, "id")
		if b.count(fmt.Sprintf(`#run-discrepancies .idref[data-id="%s"]`, charge)) != 1 {
			t.Errorf("the run shows %q, want the charge %s (shortened, whole in its copy button)", b.text("#run-discrepancies"), charge)
		}
		b.screenshot("console-reconcile")

		listed := fmt.Sprintf(`#disc-list li[data-id="%s"][data-status="open"]`, did)
		b.waitFor("the discrepancy in the open list", func() bool { return b.count(listed) == 1 })
		b.do("open its order", chromedp.Click(listed+" .open-order"))
		entry := fmt.Sprintf(`#timeline li[data-kind="discrepancy"][data-id="%s"]`, did)
		b.waitFor("the order's timeline", func() bool { return b.attr(entry, "outcome") == "open" })
		if got := b.attr(`#timeline li[data-kind="attempt"]`, "outcome"); got != "failed" {
			t.Errorf("the attempt's outcome on the timeline = %q, want failed (as payd's books have it)", got)
		}
		b.screenshot("console-timeline-open")

		card := fmt.Sprintf(`#order-open li[data-id="%s"]`, did)
		b.do("write a note", chromedp.SendKeys(card+" .note", "charge confirmed at the provider"))
		b.doubleClick(card + " button.apply")
		b.waitFor("the timeline to show the resolution", func() bool { return b.attr(entry, "outcome") == "resolved: apply" })
		b.waitFor("the operator action on the timeline", func() bool {
			return b.count(`#timeline li[data-kind="audit"][data-outcome="200"]`) == 1
		})
		if got := b.text(`#timeline li[data-kind="audit"] .summary`); !strings.HasPrefix(got, "alice resolve_discrepancy") {
			t.Errorf("the operator action on the timeline reads %q, want it done by alice", got)
		}
		if got := b.attr(`#timeline li[data-kind="attempt"]`, "outcome"); got != "succeeded" {
			t.Errorf("the attempt's outcome after apply = %q, want succeeded", got)
		}
		if got := b.text("#order-summary"); !strings.Contains(got, "paid") || !strings.Contains(got, "client secret issued (not shown)") {
			t.Errorf("order summary after apply = %q, want paid, and that a client secret exists", got)
		}
		if b.count(card) != 0 {
			t.Error("the resolved discrepancy still has resolve buttons on its order")
		}
		// The books: applying the charge booked it.
		b.waitFor("the money summary", func() bool { return b.attr(`#money [data-sum="charged"]`, "value") == "7.00" })
		for sum, want := range map[string]string{"refunded": "0.00", "disputed": "0.00", "lost": "0.00", "net": "7.00"} {
			if got := b.attr(fmt.Sprintf(`#money [data-sum="%s"]`, sum), "value"); got != want {
				t.Errorf("money summary %s = %q, want %q", sum, got, want)
			}
		}
		if got := b.text(`#money [data-sum="net"] dd`); got != "7.00 USD" {
			t.Errorf("net shows %q, want 7.00 USD", got)
		}
		if n := b.count(`#ledger-rows tr[data-kind="charge"]`); n != 1 || !b.displayed("#ledger-table") {
			t.Errorf("ledger charge rows = %d (table shown %v), want 1 shown", n, b.displayed("#ledger-table"))
		}
		if got := b.text(`#ledger-rows tr[data-kind="charge"]`); !strings.Contains(got, "7.00 USD") {
			t.Errorf("the ledger's charge reads %q, want 7.00 USD", got)
		}
		if n := b.count(`#timeline li[data-kind="ledger"][data-outcome="booked"]`); n != 1 {
			t.Errorf("ledger entries on the timeline = %d, want 1", n)
		}
		if b.displayed("#disputes-box") {
			t.Error("an order without disputes shows a disputes box")
		}
		b.screenshot("console-timeline-resolved")

		resolves := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") })
		if len(resolves) != 1 || resolves[0].Status != http.StatusOK || resolves[0].Key == "" {
			t.Errorf("resolve requests after a double click = %+v, want one with a key, answered 200\n%s", resolves, b.describe())
		}
		if n := s.count("discrepancies WHERE id = ? AND status = 'resolved' AND resolution = 'apply' AND note = ?", did, "charge confirmed at the provider"); n != 1 {
			t.Errorf("discrepancy %s is not resolved by apply with the operator's note", did)
		}
		if n := s.count("audit_log WHERE action = 'resolve_discrepancy'"); n != 1 {
			t.Errorf("resolve audit rows = %d, want 1", n)
		}
		if n := s.count("orders WHERE id = ? AND status = 'paid'", order); n != 1 {
			t.Errorf("order %s is not paid after apply", order)
		}
		b.waitFor("the open list to drop it", func() bool { return b.count(listed) == 0 })
		b.do("list the resolved", chromedp.SetValue("#d-status", "resolved"), chromedp.Click("#disc-refresh"))
		b.waitFor("the resolved list", func() bool {
			return b.count(fmt.Sprintf(`#disc-list li[data-id="%s"][data-status="resolved"]`, did)) == 1
		})
		if n := b.count(`#runs-rows tr`); n != 1 {
			t.Errorf("recent runs listed = %d, want 1", n)
		}

		// A dry run over the provider's settlement file, uploaded through the page.
		file := filepath.Join(t.TempDir(), "settlement.csv")
		if err := os.WriteFile(file, []byte(s.settlementCSV()), 0o600); err != nil {
			t.Fatal(err)
		}
		b.do("upload a settlement file for a dry run",
			chromedp.SetUploadFiles("#r-file", []string{file}), chromedp.Click("#r-dry"), chromedp.Click("#run"))
		b.waitFor("the dry run's result", func() bool {
			return strings.Contains(b.text("#run-summary"), "Settlement file") && strings.Contains(b.text("#run-result-id"), "dry run")
		})
		if got := b.text("#run-summary"); !strings.Contains(got, "0 new") {
			t.Errorf("dry run over the settlement = %q, want 0 new", got)
		}
		if n := s.count("reconciliation_runs"); n != 1 {
			t.Errorf("recorded runs = %d, want 1 (a dry run records nothing)", n)
		}

		for _, x := range p.exchanges(nil) {
			if strings.Contains(x.URI, alice) {
				t.Errorf("request %s %s carries the operator token in its URL", x.Method, x.URI)
			}
		}
		if strings.Contains(s.logs.String(), alice) {
			t.Error("payd's logs contain the operator token")
		}
		if n := s.count("audit_log WHERE actor = 'alice'"); n != 3 {
			t.Errorf("audit rows by alice = %d, want 3 (the run, the resolution, the dry run)", n)
		}
	})
}

// displayed reports whether the first element matching sel takes up room
// on the page (not display: none, itself or an ancestor).
func (b *shopper) displayed(sel string) bool {
	v, err := eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0; })()`, sel))
	return err == nil && v
}

// count is how many elements match a CSS selector.
func (b *shopper) count(sel string) int {
	n, err := eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
	if err != nil {
		return -1
	}
	return n
}

// attr is data-NAME of the first element matching sel ("" if none).
func (b *shopper) attr(sel, name string) string {
	v, err := eval[string](b, fmt.Sprintf(`document.querySelector(%q)?.dataset[%q] ?? ''`, sel, name))
	if err != nil {
		return ""
	}
	return v
}

// doubleClick presses the mouse twice on an element, as a person's double
// click does. Only the first press is checked to land: the page may answer
// and redraw before the second.
func (b *shopper) doubleClick(sel string) {
	b.t.Helper()
	b.do("scroll to "+sel, chromedp.ScrollIntoView(sel))
	xy, err := eval[[]float64](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
		return [r.x + r.width / 2, r.y + r.height / 2]; })()`, sel))
	if err != nil || len(xy) != 2 {
		b.t.Fatalf("locate %s: %v %v", sel, xy, err)
	}
	if hit, err := eval[bool](b, fmt.Sprintf(`document.querySelector(%q).contains(document.elementFromPoint(%f, %f))`, sel, xy[0], xy[1])); err != nil || !hit {
		b.t.Fatalf("before clicking, %s is not under the mouse (%v)", sel, err)
	}
	b.do("double-click "+sel, chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(1)), chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2)))
	time.Sleep(100 * time.Millisecond) // let a second request, if the page sent one, reach the tap
}

// TestConsoleLostResolveReplyRetriesSameKey: payd resolves, the reply is
// cut on its way to the browser, the console asks again with the same key
// and gets payd's stored answer: one resolution, and the timeline shows it.
// The orders are found by the customer's email in the search form.
func TestConsoleLostResolveReplyRetriesSameKey(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		p := newTap(t, s.base)
		p.cutWhich = func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") }
		p.cuts.Store(1)
		b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
		b.do("widen the window", chromedp.EmulateViewport(1280, 900))

		_, tok := s.register("lost-resolve@example.com")
		order := s.order(tok, "7.00")
		s.loseOutcome(tok, order)
		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]any{
			"from": time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), "to": time.Now().UTC().Add(time.Minute).Format(time.RFC3339)})
		if r.Status != http.StatusCreated {
			t.Fatalf("reconcile = %d %s, want 201", r.Status, r.Body)
		}

		b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
		b.waitState("signed-out")
		b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
		b.waitState("ready")
		if got := b.text("#who"); got != "Signed in as admin." {
			t.Errorf("who = %q, want Signed in as admin.", got)
		}
		// A field payd refuses is named with payd's reason, not "undefined".
		b.do("search by half an email", chromedp.SendKeys("#q-customer", "ben@"), chromedp.Click("#search"))
		b.waitFor("the refused field in the status line", func() bool {
			return strings.Contains(b.text("#status"), "customer: must be a customer ID (a UUID) or an email address")
		})
		if got := b.text("#status"); strings.Contains(got, "undefined") {
			t.Errorf("status line = %q, want no undefined", got)
		}
		if _, err := eval[string](b, `document.getElementById('q-customer').value = ''`); err != nil {
			t.Fatalf("clear the search field: %v", err)
		}
		b.do("search by email", chromedp.SendKeys("#q-customer", "lost-resolve@example.com"), chromedp.Click("#search"))
		row := fmt.Sprintf(`#orders-rows tr[data-id="%s"]`, order)
		b.waitFor("the order in the search result", func() bool {
			return strings.Contains(b.attr("#orders-rows", "query"), "customer=lost-resolve%40example.com") && b.count(row) == 1 && b.count(`#orders-rows tr`) == 1
		})
		b.do("open it", chromedp.Click(row+" .open-order"))
		card := `#order-open li[data-type="missing_local_payment"]`
		b.waitFor("its open discrepancy", func() bool { return b.count(card) == 1 })
		did := b.attr(card, "id")
		b.do("apply", chromedp.Click(card+" button.apply"))
		entry := fmt.Sprintf(`#timeline li[data-kind="discrepancy"][data-id="%s"]`, did)
		b.waitFor("the timeline to show the resolution", func() bool { return b.attr(entry, "outcome") == "resolved: apply" })

		resolves := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") })
		if len(resolves) != 2 {
			t.Fatalf("resolve requests = %d, want 2 (the cut one and the console's retry)\n%s", len(resolves), b.describe())
		}
		if !resolves[0].Cut || resolves[0].Status != http.StatusOK || resolves[1].Key != resolves[0].Key || resolves[1].Key == "" {
			t.Errorf("resolves = %+v, want the first answered 200 and cut, the second with the same key", resolves)
		}
		if resolves[1].Status != http.StatusOK || !resolves[1].Replayed {
			t.Errorf("retry = %d replayed=%v, want 200 replayed from the idempotency record", resolves[1].Status, resolves[1].Replayed)
		}
		if n := s.count("audit_log WHERE action = 'resolve_discrepancy' AND detail LIKE ?", `%"replayed":false%`); n != 1 {
			t.Errorf("resolutions carried out = %d, want 1", n)
		}
		if n := s.count("orders WHERE id = ? AND status = 'paid'", order); n != 1 {
			t.Errorf("order %s is not paid after apply", order)
		}
	})
}

// TestConsoleResolvesOutsideRun: a discrepancy payd found outside any run
// (a pay reply reporting another amount) is listed as such and, with no
// run at all, resolved by its ID alone.
func TestConsoleResolvesOutsideRun(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		p := newTap(t, s.base)
		b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
		b.do("widen the window", chromedp.EmulateViewport(1280, 900))

		_, tok := s.register("outside-console@example.com")
		order := s.order(tok, "500.00")
		h.set(order, hostileRule{Amount: "0.01"})
		if r := s.pay(tok, order, uuid.NewString(), "pm_ok"); r.Status != http.StatusBadGateway {
			t.Fatalf("pay with another amount = %d %s, want 502", r.Status, r.Body)
		}

		b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
		b.waitState("signed-out")
		b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
		b.waitState("ready")
		card := `#disc-list li[data-type="amount_mismatch"][data-status="open"]`
		b.waitFor("the discrepancy in the open list", func() bool { return b.count(card) == 1 })
		if got := b.text(card); !strings.Contains(got, "found outside a run") || b.count(fmt.Sprintf(`%s .idref[data-id="%s"] .open-order`, card, order)) != 1 {
			t.Errorf("the card reads %q, want it found outside a run, about order %s", got, order)
		}
		did := b.attr(card, "id")
		b.do("ignore with no run", chromedp.SendKeys(card+" .note", "refunded by hand"), chromedp.Click(card+" button.ignore"))
		b.waitFor("the open list to drop it", func() bool { return b.count(fmt.Sprintf(`#disc-list li[data-id="%s"]`, did)) == 0 })
		rs := p.exchanges(func(x exchange) bool { return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/resolve") })
		if len(rs) != 1 || rs[0].Status != http.StatusOK || rs[0].URI != "/v1/admin/discrepancies/"+did+"/resolve" {
			t.Errorf("resolve requests = %+v, want one to /v1/admin/discrepancies/%s/resolve, answered 200", rs, did)
		}
		if n := s.count("reconciliation_runs"); n != 0 {
			t.Errorf("runs = %d, want none: the discrepancy needs no run", n)
		}
		if n := s.count("discrepancies WHERE id = ? AND status = 'resolved' AND resolution = 'ignore' AND note = ?", did, "refunded by hand"); n != 1 {
			t.Errorf("discrepancy %s is not resolved by ignore with the note", did)
		}
	})
}

// TestConsoleShowsOutsideRefundAndLostDispute: an order of 10.00 paid with
// the sandbox's pm_dispute, 3.00 of it refunded straight at the provider
// (a dashboard refund payd never asked for) before the customer's bank
// disputes the whole charge, and the dispute lost. The provider's books
// then hold more taken back than was charged, and payd mirrors them: the
// console shows charged 10.00, refunded 3.00, disputed 0.00, lost 10.00 and
// a net of −3.00 marked as a loss; the ledger's charge, outside refund,
// dispute opened and dispute lost; the dispute, lost; and on the timeline
// the outside refund recorded with the provider as actor.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshot the README shows.
func TestConsoleShowsOutsideRefundAndLostDispute(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		// The sandbox's clock stands still until payd has booked the outside
		// refund: the dispute, due AsyncDelay after the charge, cannot open
		// before it (the provider refuses to refund a charge under an open
		// dispute). Webhooks are signed with the real time regardless.
		var held atomic.Pointer[time.Time]
		t0 := time.Now()
		held.Store(&t0)
		s := start(t, on(dialect), tuned(func(c *sandbox.Config) {
			c.Clock = func() time.Time {
				if at := held.Load(); at != nil {
					return *at
				}
				return time.Now()
			}
		}))
		p := newTap(t, s.base)
		b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
		b.do("widen the window", chromedp.EmulateViewport(1280, 900))

		_, tok := s.register("books-console@example.com")
		order := s.order(tok, "10.00")
		if r := s.pay(tok, order, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
			t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
		}
		books := func() client.Timeline {
			return decode[client.Timeline](t, s.admin("GET", "/v1/admin/orders/"+order, "", nil))
		}
		doc := books()
		if len(doc.Attempts) != 1 || deref(doc.Attempts[0].ProviderChargeId) == "" {
			t.Fatalf("attempts = %+v, want one with the provider's charge", doc.Attempts)
		}
		charge := deref(doc.Attempts[0].ProviderChargeId)

		pr, err := s.directProvider().Refund(t.Context(), domain.ProviderRefundRequest{
			IdempotencyKey: "dash-" + uuid.NewString(), ChargeID: charge, Amount: decimal.RequireFromString("3.00"), Currency: "USD", Reason: "dashboard"})
		if err != nil || pr.Status != domain.ChargeSucceeded {
			t.Fatalf("refund 3.00 of %s at the provider = %+v, %v; want succeeded", charge, pr, err)
		}
		eventually(t, 20*time.Second, "payd to book the outside refund", func() bool {
			doc = books()
			return doc.Order.RefundedAmount == "3.00" && money(doc.Order.Money)["refunded"] == "3.00"
		})
		if ds, err := s.sandbox.Disputes(t.Context()); err != nil || len(ds) != 0 {
			t.Fatalf("sandbox disputes before the clock moves = %+v, %v; want none yet", ds, err)
		}

		held.Store(nil) // the dispute is due: the provider opens it
		eventually(t, 20*time.Second, "the dispute open on the order", func() bool {
			doc = books()
			return len(doc.Disputes) == 1 && doc.Disputes[0].Status == "open"
		})
		dispute := doc.Disputes[0].Id
		if _, err := s.sandbox.CloseDispute(t.Context(), dispute, domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the dispute lost on the order", func() bool {
			doc = books()
			return doc.Disputes[0].Status == "lost"
		})

		b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
		b.waitState("signed-out")
		b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
		b.waitState("ready")
		b.do("open the order by ID", chromedp.SendKeys("#open-id", order), chromedp.Click("#open"))
		b.waitFor("the order's books", func() bool {
			return b.attr(`#money [data-sum="lost"]`, "value") == "10.00" && b.count(`#disputes li[data-status="lost"]`) == 1
		})

		for sum, want := range map[string]string{"charged": "10.00", "refunded": "3.00", "disputed": "0.00", "lost": "10.00", "net": "-3.00"} {
			if got := b.attr(fmt.Sprintf(`#money [data-sum="%s"]`, sum), "value"); got != want {
				t.Errorf("money summary %s = %q, want %q", sum, got, want)
			}
		}
		for sum, want := range map[string]string{"charged": "10.00 USD", "refunded": "3.00 USD", "lost": "10.00 USD", "net": "−3.00 USD"} {
			if got := b.text(fmt.Sprintf(`#money [data-sum="%s"] dd`, sum)); got != want {
				t.Errorf("%s shows %q, want %q", sum, got, want)
			}
		}
		if !b.displayed(`#money .sum-net.negative`) {
			t.Error("a net below zero is not marked negative")
		}
		if b.displayed(`#money .sum-charged.negative`) {
			t.Error("a positive sum is marked negative")
		}

		if !b.displayed("#ledger-table") {
			t.Error("the ledger table is not shown")
		}
		kinds, err := eval[[]string](b, `[...document.querySelectorAll('#ledger-rows tr')].map((r) => r.dataset.kind)`)
		if want := []string{"charge", "outside_refund", "dispute_opened", "dispute_lost"}; err != nil || !slices.Equal(kinds, want) {
			t.Errorf("ledger rows = %v (%v), want %v", kinds, err, want)
		}
		for kind, want := range map[string]string{"charge": "10.00 USD", "outside_refund": "3.00 USD", "dispute_opened": "10.00 USD", "dispute_lost": "10.00 USD"} {
			if got := b.text(fmt.Sprintf(`#ledger-rows tr[data-kind="%s"]`, kind)); !strings.Contains(got, want) {
				t.Errorf("the ledger's %s reads %q, want %s", kind, got, want)
			}
		}
		if got := b.text(`#ledger-rows tr[data-kind="outside_refund"] td:first-child`); got != "outside refund" {
			t.Errorf("the outside refund's kind reads %q, want outside refund", got)
		}

		card := fmt.Sprintf(`#disputes li[data-id="%s"]`, dispute)
		if !b.displayed("#disputes-box") || b.count(card) != 1 {
			t.Fatalf("the dispute %s is not shown (box shown %v)", dispute, b.displayed("#disputes-box"))
		}
		if got := b.text(card); !strings.Contains(got, "lost") || !strings.Contains(got, "10.00 USD") || b.count(card+fmt.Sprintf(` .idref[data-id="%s"]`, charge)) != 1 || !strings.Contains(got, "closed") {
			t.Errorf("the dispute reads %q, want lost, 10.00 USD, on %s, closed", got, charge)
		}
		if got := b.attr(fmt.Sprintf(`#timeline li[data-kind="dispute"][data-id="%s"]`, dispute), "outcome"); got != "lost" {
			t.Errorf("the dispute on the timeline = %q, want lost", got)
		}

		// The provider moved all of this money: every action on the order's
		// audit trail is the provider's, the outside refund first.
		actions, err := eval[[]string](b, `[...document.querySelectorAll('#timeline li[data-kind="audit"] .summary')].map((e) => e.innerText)`)
		want := []string{"provider outside_refund", "provider dispute_opened", "provider dispute_lost"}
		if err != nil || len(actions) != len(want) {
			t.Fatalf("audit entries on the timeline = %q (%v), want %v", actions, err, want)
		}
		for i, w := range want {
			if !strings.HasPrefix(actions[i], w+":") {
				t.Errorf("audit entry %d on the timeline reads %q, want %s", i, actions[i], w)
			}
		}
		outside := `#timeline li[data-kind="audit"] .detail` // the first: the outside refund
		if got := b.text(outside); !strings.Contains(got, "about ") || b.count(outside+fmt.Sprintf(` .idref[data-id="%s"]`, pr.ID)) == 0 ||
			!strings.Contains(got, "amount=3.00") || b.count(outside+fmt.Sprintf(` .idref[data-id="%s"]`, charge)) == 0 {
			t.Errorf("the outside refund's detail reads %q, want refund %s of 3.00 on %s", got, pr.ID, charge)
		}
		if n := b.count(`#timeline li[data-kind="ledger"][data-outcome="booked"]`); n != 4 {
			t.Errorf("ledger entries on the timeline = %d, want 4", n)
		}
		// The dispute's discrepancy: payd's books hold it as a dispute of
		// the order, which the card says in words, never as a dash.
		disputed := `#order-open li[data-type="disputed"] .meta`
		if got := b.text(disputed); !strings.Contains(got, "disputed at the provider 10.00 USD · in payd's books as a dispute of its order") || strings.Contains(got, "—") {
			t.Errorf("the disputed card reads %q, want disputed at the provider 10.00 USD · in payd's books as a dispute of its order", got)
		}
		b.screenshot("console-books")
	})
}
