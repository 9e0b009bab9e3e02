package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// The console never misleads (issue 42), in the shop's endpoints and the
// orders list: a failing endpoint looks failing, with its last error in
// words and what waits for it; endpoints are added, paused, resumed,
// rotated and deleted from the page, each change that stops or breaks
// something only after a confirmation; a declined order says why.

// endpointsOf is GET /v1/admin/endpoints, by ID.
func endpointsOf(t *testing.T, s *stack) map[string]endpointHealthAnswer {
	t.Helper()
	r := s.admin("GET", "/v1/admin/endpoints", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/admin/endpoints = %d %s, want 200", r.Status, r.Body)
	}
	out := map[string]endpointHealthAnswer{}
	for _, e := range decode[struct{ Data []endpointHealthAnswer }](t, r).Data {
		out[e.ID] = e
	}
	return out
}

// addEndpoint creates an endpoint told of events through the API.
func addEndpoint(t *testing.T, s *stack, url string, events ...string) string {
	t.Helper()
	r := s.admin("POST", "/v1/admin/endpoints", uuid.NewString(), map[string]any{"url": url, "events": events})
	if r.Status != http.StatusCreated {
		t.Fatalf("create endpoint %s = %d %s, want 201", url, r.Status, r.Body)
	}
	return decode[endpointAnswer](t, r).ID
}

// endpointCard is the list's card of endpoint id.
func endpointCard(id string) string { return fmt.Sprintf(`#ep-list li[data-id="%s"]`, id) }

// endpointWrites are the console's requests that change endpoint id (all when id is "").
func endpointWrites(p *tap, method, id string) []exchange {
	return p.exchanges(func(x exchange) bool {
		return x.Method == method && strings.HasPrefix(x.URI, "/v1/admin/endpoints") && strings.Contains(x.URI, id)
	})
}

// TestConsoleShowsEndpointHealth: an endpoint nothing listens at shows
// "failing" in the bad colour, its last error in words ("connection
// refused"), one delivery pending and since when; one that answers 204
// shows "healthy" in the good colour, nothing pending and no error; one
// never tried shows "idle". The delivery log is titled with the
// endpoint's URL.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps docs/console-endpoints-sqlite.png.
func TestConsoleShowsEndpointHealth(t *testing.T) {
	chromium(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nowhere := closed.Addr().String()
		closed.Close()
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		defer ok.Close()
		downURL := "http://" + nowhere + "/hooks"
		down := addEndpoint(t, s, downURL, "order.paid")
		up := addEndpoint(t, s, ok.URL+"/hooks", "order.paid")
		idle := addEndpoint(t, s, "https://shop.example/refunds-only", "order.refunded")
		_, cust := s.register(newEmail())
		s.paidOrder(cust, "3.00")
		eventually(t, 30*time.Second, "payd never tried both endpoints", func() bool {
			eps := endpointsOf(t, s)
			return eps[down].Health.LastAttemptAt != nil && eps[up].Health.LastAttemptAt != nil
		})

		p := newTap(t, s.base)
		b := consoleFor(t, s, p, 1280, true)
		b.waitFor("the three endpoints", func() bool { return b.count(`#ep-list li`) == 3 })

		type look struct {
			Health string `json:"health"`
			Badge  string `json:"badge"` // the health badge's text
			Class  string `json:"class"`
			Colour string `json:"colour"` // its computed background
		}
		lookOf := func(id string) look {
			v, err := eval[look](b, fmt.Sprintf(`(() => { const c = document.querySelector(%q); const b = c.querySelector('.head .badge.health');
				return { health: c.dataset.health, badge: b?.innerText ?? '', class: b?.className ?? '', colour: b ? getComputedStyle(b).backgroundColor : '' }; })()`, endpointCard(id)))
			if err != nil {
				t.Fatalf("read endpoint %s: %v", id, err)
			}
			return v
		}
		failing, healthy, never := lookOf(down), lookOf(up), lookOf(idle)
		if failing.Health != "failing" || failing.Badge != "failing" || !strings.Contains(failing.Class, "bad") {
			t.Errorf("the endpoint nothing listens at looks %+v, want a failing badge in the bad tone", failing)
		}
		if healthy.Health != "healthy" || healthy.Badge != "healthy" || !strings.Contains(healthy.Class, "ok") {
			t.Errorf("the endpoint answering 204 looks %+v, want a healthy badge in the ok tone", healthy)
		}
		if failing.Colour == healthy.Colour || failing.Colour == "" {
			t.Errorf("failing and healthy badges share the colour %q", failing.Colour)
		}
		if never.Health != "idle" || !strings.Contains(never.Class, "wait") {
			t.Errorf("the endpoint never tried looks %+v, want an idle badge in the wait tone", never)
		}

		text := b.text(endpointCard(down))
		for _, want := range []string{"Last error: connection refused: nothing listens there (" + nowhere + ")", "1 pending (oldest since ", "0 failed", "last attempt "} {
			if !strings.Contains(text, want) {
				t.Errorf("the failing endpoint's card reads %q, want %q in it", text, want)
			}
		}
		if _, after, found := strings.Cut(text, "oldest since "); !found {
			t.Errorf("the failing endpoint's card reads %q, want the oldest pending time", text)
		} else if oldest, _, _ := strings.Cut(after, ")"); !shownTime.MatchString(oldest) {
			t.Errorf("the oldest pending time reads %q, want 2026-12-03 12:33:03 UTC", oldest)
		}
		if text := b.text(endpointCard(up)); !strings.Contains(text, "0 pending") || !strings.Contains(text, "answered 204") || strings.Contains(text, "Last error") {
			t.Errorf("the healthy endpoint's card reads %q, want 0 pending, answered 204 and no error", text)
		}
		if text := b.text(endpointCard(idle)); !strings.Contains(text, "never tried") {
			t.Errorf("the idle endpoint's card reads %q, want never tried", text)
		}

		b.do("open the failing endpoint's delivery log", chromedp.Click(endpointCard(down)+" .deliveries"))
		b.waitFor("the log titled with its URL", func() bool { return strings.Contains(b.text("#ep-log h3"), downURL) })
		if got := b.attr("#ep-log-of .idref", "id"); got != down {
			t.Errorf("the log's title names endpoint %q, want %s", got, down)
		}
		b.shot("console-endpoints", "#endpoints")
	})
}

// TestConsoleManagesEndpoints: an endpoint added through the form without
// an event type is refused in payd's words beside the form; with two
// types and a description it is added, its secret shown once with a note
// that says so (and gone from the page once hidden), and it is listed.
// Pause asks first: cancel sends nothing and changes nothing; confirmed,
// it disables the endpoint (one PATCH, with a key). Resume enables it.
// Rotate asks first and shows a new secret. Delete asks first and removes
// it. An endpoint deleted elsewhere cannot be paused: payd's 404 is shown.
func TestConsoleManagesEndpoints(t *testing.T) {
	chromium(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		p := newTap(t, s.base)
		b := consoleFor(t, s, p, 1280, true)
		b.waitFor("no endpoint yet", func() bool { return b.displayed("#ep-empty") })

		b.do("add an endpoint without an event type", chromedp.SendKeys("#ep-url", "https://shop.example/payd-events"), chromedp.Click("#ep-create"))
		b.waitFor("payd's refusal beside the form", func() bool { return strings.Contains(b.text("#ep-new-result"), "400") })
		if got := b.text("#ep-new-result"); !strings.Contains(got, "events") {
			t.Errorf("the refusal reads %q, want payd's problem naming events", got)
		}
		if n := len(endpointsOf(t, s)); n != 0 {
			t.Fatalf("after the refusal payd has %d endpoints, want 0", n)
		}
		b.do("choose two types, describe it and add it",
			chromedp.Click(`#ep-types input[value="order.paid"]`), chromedp.Click(`#ep-types input[value="order.refunded"]`),
			chromedp.SendKeys("#ep-description", "fulfilment"), chromedp.Click("#ep-create"))
		b.waitFor("the secret shown", func() bool {
			return b.displayed("#ep-secret") && strings.HasPrefix(b.text("#ep-secret-value"), "whsec_")
		})
		secret := b.text("#ep-secret-value")
		if got := b.text("#ep-secret"); !strings.Contains(got, "Shown once") || !strings.Contains(got, "https://shop.example/payd-events") {
			t.Errorf("the secret's box reads %q, want it to say it is shown once, for the new URL", got)
		}
		eps := endpointsOf(t, s)
		if len(eps) != 1 {
			t.Fatalf("payd has %d endpoints, want the one added", len(eps))
		}
		var id string
		for id = range eps {
		}
		if e := eps[id]; e.Status != "enabled" {
			t.Errorf("the new endpoint is %+v, want enabled", e)
		}
		card := endpointCard(id)
		b.waitFor("the new endpoint listed", func() bool { return b.count(card) == 1 })
		if got := b.text(card); !strings.Contains(got, "order.paid, order.refunded") || !strings.Contains(got, "fulfilment") {
			t.Errorf("the new endpoint's card reads %q, want its two types and description", got)
		}
		if creates := endpointWrites(p, http.MethodPost, ""); len(creates) != 2 || creates[0].Key == "" || creates[1].Key == "" || creates[0].Key == creates[1].Key {
			t.Errorf("creates sent %+v, want two, each its own intent with its own key", creates)
		}
		b.do("hide the secret", chromedp.Click("#ep-secret-hide"))
		if still, _ := eval[bool](b, fmt.Sprintf(`document.body.textContent.includes(%q)`, secret)); still || b.displayed("#ep-secret") {
			t.Error("the secret is still on the page after it was hidden")
		}

		b.do("pause", chromedp.Click(card+" button.pause"))
		b.waitFor("the pause's confirmation", func() bool { return b.count(card+` .confirm[data-action="pause"]`) == 1 })
		b.do("cancel", chromedp.Click(card+" .confirm button.no"))
		b.waitFor("the confirmation gone", func() bool { return b.count(card+" .confirm") == 0 })
		if n := len(endpointWrites(p, http.MethodPatch, id)); n != 0 || endpointsOf(t, s)[id].Status != "enabled" {
			t.Errorf("after cancel: %d PATCH sent, endpoint %s; want none, enabled", n, endpointsOf(t, s)[id].Status)
		}
		b.do("pause and confirm", chromedp.Click(card+" button.pause"), chromedp.Click(card+" .confirm button.yes"))
		b.waitFor("the endpoint paused in the list", func() bool { return b.attr(card, "status") == "disabled" && b.attr(card, "health") == "disabled" })
		if e := endpointsOf(t, s)[id]; e.Status != "disabled" {
			t.Errorf("after pause payd has the endpoint %s, want disabled", e.Status)
		}
		if patches := endpointWrites(p, http.MethodPatch, id); len(patches) != 1 || patches[0].Key == "" || patches[0].Status != http.StatusOK {
			t.Errorf("pause sent %+v, want one PATCH with a key, answered 200", patches)
		}
		b.do("resume", chromedp.Click(card+" button.resume"))
		b.waitFor("the endpoint enabled in the list", func() bool { return b.attr(card, "status") == "enabled" })
		if e := endpointsOf(t, s)[id]; e.Status != "enabled" {
			t.Errorf("after resume payd has the endpoint %s, want enabled", e.Status)
		}

		b.do("rotate", chromedp.Click(card+" button.rotate"))
		b.waitFor("the rotation's confirmation", func() bool { return b.count(card+` .confirm[data-action="rotate"]`) == 1 })
		if n := len(endpointWrites(p, http.MethodPost, id+"/rotate-secret")); n != 0 {
			t.Errorf("before confirming, %d rotations were sent", n)
		}
		b.do("confirm the rotation", chromedp.Click(card+" .confirm button.yes"))
		b.waitFor("a new secret shown", func() bool {
			v := b.text("#ep-secret-value")
			return b.displayed("#ep-secret") && strings.HasPrefix(v, "whsec_") && v != secret
		})
		if got := b.text("#ep-secret"); !strings.Contains(got, "Shown once") {
			t.Errorf("the rotated secret's box reads %q, want it to say it is shown once", got)
		}
		if n := len(endpointWrites(p, http.MethodPost, id+"/rotate-secret")); n != 1 {
			t.Errorf("%d rotations sent, want 1", n)
		}
		for _, e := range decode[struct{ Data []endpointAnswer }](t, s.admin("GET", "/v1/admin/endpoints", "", nil)).Data {
			if e.ID == id && e.PreviousSecretUntil == nil {
				t.Error("after the rotation payd keeps no previous secret: nothing was rotated")
			}
		}

		b.do("delete", chromedp.Click(card+" button.delete"))
		b.waitFor("the deletion's confirmation", func() bool { return b.count(card+` .confirm[data-action="delete"]`) == 1 })
		b.do("confirm the deletion", chromedp.Click(card+" .confirm button.yes"))
		b.waitFor("the endpoint gone from the list", func() bool { return b.count(card) == 0 })
		if n := len(endpointsOf(t, s)); n != 0 {
			t.Errorf("after delete payd has %d endpoints, want 0", n)
		}
		if got := b.text("#ep-result"); !strings.Contains(got, "Deleted") {
			t.Errorf("after delete the section says %q, want Deleted", got)
		}

		// Deleted elsewhere while on screen: payd's 404, in its words.
		gone := addEndpoint(t, s, "https://shop.example/gone", "order.paid")
		b.do("reload the endpoints", chromedp.Click("#ep-refresh"))
		b.waitFor("the other endpoint listed", func() bool { return b.count(endpointCard(gone)) == 1 })
		if r := s.admin("DELETE", "/v1/admin/endpoints/"+gone, uuid.NewString(), nil); r.Status != http.StatusOK {
			t.Fatalf("delete elsewhere = %d %s", r.Status, r.Body)
		}
		b.do("pause it and confirm", chromedp.Click(endpointCard(gone)+" button.pause"), chromedp.Click(endpointCard(gone)+" .confirm button.yes"))
		b.waitFor("payd's refusal", func() bool { return strings.Contains(b.text("#ep-result"), "404") })
		if got := b.text("#ep-result"); !strings.Contains(got, "https://shop.example/gone") {
			t.Errorf("the refusal reads %q, want it to name the endpoint", got)
		}
		if !b.stayed() {
			t.Error("the page was reloaded")
		}
	})
}

// TestConsoleOrdersShowLastAttempt: the orders list has a "Last attempt"
// column: a declined order reads "failed · insufficient_funds", a paid one
// "succeeded", one never paid for "—"; "Only orders with a declined
// payment" asks payd for attempt=failed and lists the declined order
// alone; unticked, all three again.
func TestConsoleOrdersShowLastAttempt(t *testing.T) {
	chromium(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register(newEmail())
		declined := s.order(tok, "4.00")
		if r := s.pay(tok, declined, uuid.NewString(), "pm_insufficient_funds"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay with pm_insufficient_funds = %d %s, want 402", r.Status, r.Body)
		}
		paid := s.paidOrder(tok, "6.00")
		untried := s.order(tok, "7.00")
		p := newTap(t, s.base)
		b := consoleFor(t, s, p, 1280, true)
		row := func(id string) string { return fmt.Sprintf(`#orders-rows tr[data-id="%s"]`, id) }
		b.waitFor("the three orders", func() bool { return b.count(`#orders-rows tr`) == 3 })

		if got := b.text(`#orders-table thead`); !strings.Contains(strings.ToLower(got), "last attempt") {
			t.Errorf("the orders' header reads %q, want a Last attempt column", got)
		}
		for id, want := range map[string]string{declined: "failed · insufficient_funds", paid: "succeeded", untried: "—"} {
			if got := strings.TrimSpace(b.text(row(id) + " td.attempt")); got != want {
				t.Errorf("order %s's last attempt reads %q, want %q", id, got, want)
			}
		}
		if !strings.Contains(classOf(b, row(declined)+" td.attempt .badge"), "bad") {
			t.Error("the declined attempt's badge is not in the bad tone")
		}

		b.do("only failed payments", chromedp.Click("#q-failed"), chromedp.Click("#search"))
		b.waitFor("the failed search", func() bool { return strings.Contains(b.attr("#orders-rows", "query"), "attempt=failed") })
		ids, err := eval[[]string](b, `[...document.querySelectorAll('#orders-rows tr')].map((tr) => tr.dataset.id)`)
		if err != nil || !slices.Equal(ids, []string{declined}) {
			t.Errorf("with the failed filter the list shows %v (%v), want only %s", ids, err, declined)
		}
		b.do("all orders again", chromedp.Click("#q-failed"), chromedp.Click("#search"))
		b.waitFor("all three again", func() bool {
			return !strings.Contains(b.attr("#orders-rows", "query"), "attempt=") && b.count(`#orders-rows tr`) == 3
		})
		if wide, _ := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); wide {
			t.Error("at 1280 px the page is wider than the window")
		}
	})
}

// classOf is the class attribute of the first element matching sel.
func classOf(b *shopper, sel string) string {
	v, err := eval[string](b, fmt.Sprintf(`document.querySelector(%q)?.className ?? ''`, sel))
	if err != nil {
		return ""
	}
	return v
}
