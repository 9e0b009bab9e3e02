package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The checkout page's half of the promise, proven in headless Chromium
// against payd booted through run: whatever the customer or the network
// does, the order is charged once. Each test saves a screenshot of the
// page's final state and logs its path.

// TestCheckoutDoubleClickPaysOnce: a double click on Pay sends one pay
// request (the button is disabled before anything awaits) and charges once.
func TestCheckoutDoubleClickPaysOnce(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{})
		order := b.orderReady("double-click@example.com")
		b.choose("pm_ok")
		b.click("#pay", 2)
		b.waitState("paid")
		b.screenshot("double-click-paid")

		if pays := b.tap.pays(); len(pays) != 1 || pays[0].Status != 200 {
			t.Errorf("pay requests after a double click = %+v, want one, answered 200\n%s", pays, b.describe())
		}
		b.checkCounts(order, 1)
		b.checkTokenStaysSecret(b.token())
	})
}

// TestCheckoutLostReplyRetriesSameKey: payd charges, the reply is cut on its
// way to the browser, the page retries with the same key and gets payd's
// stored answer back: one charge, and the page says paid.
func TestCheckoutLostReplyRetriesSameKey(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{cutPays: 1})
		order := b.orderReady("lost-reply@example.com")
		b.choose("pm_ok")
		b.click("#pay", 1)
		b.waitState("paid")
		b.screenshot("lost-reply-paid")

		pays := b.tap.pays()
		if len(pays) != 2 {
			t.Fatalf("pay requests = %d, want 2 (the cut one and the page's retry)\n%s", len(pays), b.describe())
		}
		if !pays[0].Cut || pays[0].Status != 200 {
			t.Errorf("first pay = %d cut=%v, want 200 answered by payd and cut", pays[0].Status, pays[0].Cut)
		}
		if pays[1].Key != pays[0].Key || pays[1].Key == "" {
			t.Errorf("retry key = %q, want the first request's %q", pays[1].Key, pays[0].Key)
		}
		if pays[1].Status != 200 || !pays[1].Replayed {
			t.Errorf("retry = %d replayed=%v, want 200 replayed from the idempotency record", pays[1].Status, pays[1].Replayed)
		}
		b.checkCounts(order, 1)
		b.checkTokenStaysSecret(b.token())
	})
}

// TestCheckoutReloadMidPaymentRecovers: the customer reloads while an
// asynchronous payment waits for the provider's webhook. The page finds
// its key in localStorage, asks payd what became of it instead of paying
// again, follows the order and shows it paid when the webhook lands.
func TestCheckoutReloadMidPaymentRecovers(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		// A long lease keeps the recoverer out: only the webhook settles this payment.
		b := startShopper(t, dialect, checkoutOptions{holdWebhooks: true, env: env{"PAYD_LEASE": "10m"}})
		order := b.orderReady("reload@example.com")
		b.choose("pm_async")
		b.click("#pay", 1)
		b.waitState("processing")
		if n := b.s.count("orders WHERE id = ? AND status = 'processing'", order); n != 1 {
			t.Fatalf("order %s is not processing before the reload", order)
		}
		key := b.tap.pays()[0].Key
		before := len(b.tap.exchanges(nil))

		b.do("reload", chromedp.Reload())
		b.waitState("processing")
		var asked bool
		for _, x := range b.tap.exchanges(nil)[before:] {
			asked = asked || (x.Method == "GET" && x.URI == "/v1/requests/"+key && x.Status == 200)
		}
		if !asked {
			t.Errorf("after the reload the page did not look up GET /v1/requests/%s\n%s", key, b.describe())
		}
		if stored := storedIntentKey(t, b); stored != key {
			t.Errorf("intent key in localStorage after reload = %q, want %q", stored, key)
		}

		b.webhook.open.Store(true) // the provider's payment.succeeded reaches payd
		b.waitState("paid")
		b.screenshot("reload-recovered-paid")
		if pays := b.tap.pays(); len(pays) != 1 {
			t.Errorf("pay requests = %d, want 1: a reload must never pay again\n%s", len(pays), b.describe())
		}
		b.checkCounts(order, 1)
		b.checkTokenStaysSecret(b.token())
	})
}

// TestCheckoutDeclineThenPayAgain: a decline is shown in payd's own words;
// paying again is a new intent with a new key, and succeeds: two attempts,
// one charge.
func TestCheckoutDeclineThenPayAgain(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{})
		order := b.orderReady("decline@example.com")
		b.choose("pm_declined")
		b.click("#pay", 1)
		b.waitState("declined")
		b.screenshot("declined")

		pays := b.tap.pays()
		if len(pays) != 1 || pays[0].Status != 402 {
			t.Fatalf("pay requests = %+v, want one answered 402", pays)
		}
		var problem struct{ Title, Detail string }
		if err := json.Unmarshal(pays[0].Body, &problem); err != nil || problem.Title == "" {
			t.Fatalf("402 body %s is not a problem: %v", pays[0].Body, err)
		}
		if got := b.text("#status-title"); got != problem.Title {
			t.Errorf("page title = %q, want the problem's title %q", got, problem.Title)
		}
		if got := b.text("#status-detail"); !strings.Contains(got, problem.Detail) {
			t.Errorf("page detail = %q, want it to carry the problem's detail %q", got, problem.Detail)
		}

		b.choose("pm_ok")
		b.click("#pay", 1)
		b.waitState("paid")
		b.screenshot("decline-then-paid")
		pays = b.tap.pays()
		if len(pays) != 2 || pays[1].Status != 200 {
			t.Fatalf("pay requests = %d, want 2 (declined, then paid)\n%s", len(pays), b.describe())
		}
		if pays[1].Key == pays[0].Key {
			t.Errorf("second payment reused key %q; a new intent needs a new key", pays[1].Key)
		}
		b.checkCounts(order, 2)
		if n := b.s.count("payment_attempts WHERE order_id = ? AND status = 'failed'", order); n != 1 {
			t.Errorf("failed attempts = %d, want 1", n)
		}
		b.checkTokenStaysSecret(b.token())
	})
}

// storedIntentKey is the idempotency key the page keeps in localStorage.
func storedIntentKey(t *testing.T, b *shopper) string {
	t.Helper()
	k, err := eval[string](b, `JSON.parse(localStorage.getItem('payd.checkout.intent')).key`)
	if err != nil {
		t.Fatalf("read the stored intent: %v", err)
	}
	return k
}
