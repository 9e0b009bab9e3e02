package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/internal/testdeps"
)

// stripeStormMethods: the Stripe test methods of the storm, the pay answer
// and where each order ends; settle says how the fake finishes a payment
// left pending (3-D Secure passed, processing succeeded or failed).
var stripeStormMethods = []struct {
	method string
	status int
	want   domain.OrderStatus
}{
	{stripefake.PMVisa, http.StatusOK, domain.StatusPaid},
	{stripefake.PM3DS, http.StatusAccepted, domain.StatusPaid},
	{stripefake.PMProcessing, http.StatusAccepted, domain.StatusPaid},
	{stripefake.PMProcessing, http.StatusAccepted, domain.StatusPending},
	{stripefake.PMDeclined, http.StatusPaymentRequired, domain.StatusPending},
}

// TestWebhookStormStripe is the webhook storm with the Stripe adapter: 200
// orders paid with a mix of Stripe test methods; every event Stripe emitted,
// plus a forged payment_failed contradicting each success, is delivered
// 1 to 5 times, shuffled, by 8 senders at once. Every order must end where
// its method says, with one PaymentIntent charged per paid order, each
// event ID stored once, and nothing recorded as a discrepancy.
func TestWebhookStormStripe(t *testing.T) {
	testdeps.RequireFull(t, "a storm of 200 orders' webhooks")
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		st := &stack{inproc: s.inproc, db: s.db, dialect: s.dialect, dbURL: s.dbURL}
		tokens := make([]string, 4)
		for i := range tokens {
			_, tokens[i] = s.register(fmt.Sprintf("stripe-storm%d@example.com", i))
		}
		orders := make([]stormOrder, 200)
		forEach(8, len(orders), func(i int) {
			m := stripeStormMethods[i%len(stripeStormMethods)]
			tok := tokens[i%len(tokens)]
			orders[i] = stormOrder{id: s.order(tok, fmt.Sprintf("%d.%02d", 1+i%50, i%100)), token: tok, key: uuid.NewString(), method: m.method, want: m.want}
			if r := s.pay(tok, orders[i].id, orders[i].key, m.method); r.Status != m.status {
				t.Errorf("pay(%s) = %d %s, want %d", m.method, r.Status, r.Body, m.status)
			}
		})
		// Stripe finishes what waited: 3-D Secure passed, processing done.
		for _, o := range orders {
			pi := s.fake.PaymentIntentOf(o.id)
			switch o.method {
			case stripefake.PM3DS:
				s.fake.Authenticate(pi, true)
			case stripefake.PMProcessing:
				s.fake.Finish(pi, o.want == domain.StatusPaid)
			}
		}
		events := s.fake.Events()
		for _, o := range orders {
			if o.want == domain.StatusPaid {
				events = append(events, s.fake.ContradictingFailure(s.fake.PaymentIntentOf(o.id)))
			}
		}
		var deliveries []stripefake.Event
		ids := map[string]bool{}
		for _, e := range events {
			ids[e.ID] = true
			for range 1 + rand.IntN(5) {
				deliveries = append(deliveries, e)
			}
		}
		rand.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
		forEach(8, len(deliveries), func(i int) {
			e := deliveries[i]
			h := http.Header{"Stripe-Signature": {s.fake.Sign(e.Body, time.Now())}}
			if r := s.do(request{method: http.MethodPost, path: "/v1/webhooks/stripe", header: h, body: e.Body}); r.Status != http.StatusOK {
				t.Errorf("deliver %s = %d %s, want 200", e.Type, r.Status, r.Body)
			}
		})
		t.Logf("%d events, %d deliveries", len(ids), len(deliveries))
		eventually(t, 30*time.Second, "orders still processing", func() bool { return st.count("orders WHERE status = 'processing'") == 0 })

		succeeded, charged := 0, map[string]int{}
		for _, o := range orders {
			charged[o.id] = s.fake.Succeeded(o.id)
			succeeded += charged[o.id]
		}
		st.checkStormEnd(orders, ids, succeeded, charged)
	})
}
