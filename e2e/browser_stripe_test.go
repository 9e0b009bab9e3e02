package e2e

import (
	"net/http"
	"testing"

	"github.com/payd/payd/internal/stripefake"
)

// startStripeShopper is a browser on the checkout page of a payd in Stripe
// mode against the fake Stripe (no publishable key: the page offers
// Stripe's test PaymentMethods, as a shop in test mode without internet).
func startStripeShopper(t *testing.T, dialect string) (*shopper, *stripeStack) {
	t.Helper()
	s := start(t, on(dialect), stripeMode(), withEnv(env{"PAYD_LEASE": "10m"})).stripe() // only the webhook settles
	st := &stack{inproc: s.inproc, db: s.db, dialect: s.dialect, dbURL: s.dbURL}
	stockShop(st.driver, nil)
	return &shopper{t: t, s: st, tap: newTap(t, s.base), ctx: newBrowser(t)}, s
}

// TestCheckoutStripe: in Stripe mode the page pays with Stripe's test
// PaymentMethods; a card that asks for 3-D Secure leaves the page waiting
// for the bank, and Stripe's webhook, once the customer passed the
// challenge, shows the order paid: one PaymentIntent charged.
func TestCheckoutStripe(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		b, s := startStripeShopper(t, dialect)
		order := b.orderReady("stripe-3ds@example.com")
		if opts, err := eval[[]string](b, `[...document.querySelectorAll('#method option')].map((o) => o.value)`); err != nil ||
			len(opts) == 0 || opts[0] != stripefake.PMVisa {
			t.Fatalf("payment methods on the page = %v, %v; want Stripe's test methods", opts, err)
		}
		b.choose(stripefake.PM3DS)
		b.click("#pay", 1)
		b.waitState("authenticating", "processing")
		pays := b.tap.pays()
		if len(pays) != 1 || pays[0].Status != http.StatusAccepted {
			t.Fatalf("pay requests = %+v, want one answered 202\n%s", pays, b.describe())
		}
		pi := s.fake.PaymentIntentOf(order)
		s.fake.Authenticate(pi, true) // the customer passed the challenge at Stripe
		s.deliver(s.eventsOf(pi)...)
		b.waitState("paid")
		b.screenshot("stripe-3ds-paid")
		if n := s.fake.Succeeded(order); n != 1 {
			t.Errorf("succeeded PaymentIntents = %d, want 1", n)
		}
		if n := b.s.count("orders WHERE id = ? AND status = 'paid'", order); n != 1 {
			t.Errorf("order %s is not paid in payd's database", order)
		}

		// A decline with a test card, then a card that pays: one charge.
		b.click("#new-order", 1)
		b.waitState("cart")
		b.fillCart(usualCart)
		order = b.placeOrder()
		b.choose(stripefake.PMDeclined)
		b.click("#pay", 1)
		b.waitState("declined")
		b.choose(stripefake.PMVisa)
		b.click("#pay", 1)
		b.waitState("paid")
		if n := s.fake.Succeeded(order); n != 1 {
			t.Errorf("succeeded PaymentIntents = %d, want 1", n)
		}
		b.checkTokenStaysSecret(b.token())
	})
}
