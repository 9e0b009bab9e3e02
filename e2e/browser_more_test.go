package e2e

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestCheckoutInUseWaitsAsTold: the reply to an asynchronous payment is
// lost, so the page resends the same key while payd still waits for the
// provider. payd answers 409 idempotency_key_in_use with Retry-After; the
// page sends nothing more before that time, follows the order instead, and
// shows it paid when the webhook lands: one attempt, one charge.
func TestCheckoutInUseWaitsAsTold(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		// A short in-flight wait makes payd answer 409 at once, so a page that
		// ignored Retry-After would resend many times while the webhook is held.
		b := startShopper(t, dialect, checkoutOptions{cutPays: 1, holdWebhooks: true, env: env{"PAYD_INFLIGHT_WAIT": "100ms"}})
		order := b.orderReady("in-use@example.com")
		b.choose("pm_async")
		b.click("#pay", 1)
		b.waitFor("the page's resend to be answered", func() bool {
			pays := b.tap.pays()
			return len(pays) >= 2 && pays[1].Status != 0
		})
		pays := b.tap.pays()
		if !pays[0].Cut || pays[0].Status != 202 {
			t.Fatalf("first pay = %d cut=%v, want 202 answered by payd and cut", pays[0].Status, pays[0].Cut)
		}
		var p struct{ Code string }
		_ = json.Unmarshal(pays[1].Body, &p)
		if pays[1].Key != pays[0].Key || pays[1].Status != 409 || p.Code != "idempotency_key_in_use" {
			t.Fatalf("resend = key %q, %d %q; want key %q, 409 idempotency_key_in_use", pays[1].Key, pays[1].Status, p.Code, pays[0].Key)
		}
		wait, err := strconv.Atoi(pays[1].RetryAfter)
		if err != nil || wait < 5 {
			t.Fatalf("Retry-After = %q, want whole seconds, at least 5 (the lease)", pays[1].RetryAfter)
		}
		b.waitState("processing")
		// Hold the webhook well past the page's own backoff (0.5s) and well
		// short of Retry-After: a page that resent early would show here.
		time.Sleep(1500 * time.Millisecond)
		b.webhook.open.Store(true)
		b.waitState("paid")
		b.screenshot("in-use-paid")

		if n := len(b.tap.pays()); n != 2 {
			t.Errorf("pay requests = %d, want 2: no resend before Retry-After (%ds); the outcome comes from the order\n%s", n, wait, b.describe())
		}
		b.checkCounts(order, 1)
		b.checkTokenStaysSecret(b.token())
	})
}

// TestCheckoutTokenReuseShowsOrder: a customer who signs out and comes back
// with their token sees the order as payd has it (paid), and coming back
// never pays anything.
func TestCheckoutTokenReuseShowsOrder(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		b := startShopper(t, dialect, checkoutOptions{})
		order := b.orderReady("returning@example.com")
		b.choose("pm_ok")
		b.click("#pay", 1)
		b.waitState("paid")
		token := b.token()

		b.do("sign out", chromedp.Click(chromedp.CSS("#sign-out")))
		b.waitState("signed-out")
		b.do("sign in with the token",
			chromedp.Click(chromedp.CSS("summary")),
			chromedp.SendKeys(chromedp.CSS("#token"), token),
			chromedp.Click(chromedp.CSS("#use-token")),
		)
		b.waitState("paid")
		b.screenshot("token-reuse-paid")
		if got, _ := eval[string](b, `document.getElementById('app').dataset.orderId`); got != order {
			t.Errorf("order on the page = %q, want %q", got, order)
		}
		if n := len(b.tap.pays()); n != 1 {
			t.Errorf("pay requests = %d, want 1: coming back never pays", n)
		}
		b.checkCounts(order, 1)
		b.checkTokenStaysSecret(token)
	})
}
