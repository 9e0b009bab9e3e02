package e2e

import (
	"net/http"
	"strings"
	"time"

	"github.com/payd/payd/internal/stripefake"
)

// stripeStack is payd started through run with PAYD_PROVIDER=stripe
// against the stateful fake Stripe, which counts what was really charged.
type stripeStack struct{ *stack }

// stripe is s, started in stripeMode, with the Stripe helpers.
func (s *stack) stripe() *stripeStack {
	if s.fake == nil {
		s.t.Fatal("stripe(): the stack was not started in stripeMode")
	}
	return &stripeStack{s}
}

// stripeEnv is the settings of a payd on dbURL in Stripe mode against f.
func stripeEnv(dbURL string, f *stripefake.Fake, extra env) env {
	e := paydEnv(dbURL, "", env{"PAYD_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_fake",
		"STRIPE_WEBHOOK_SECRET": f.Secret, "STRIPE_API_BASE": f.URL()})
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// deliver posts events to payd's Stripe endpoint, each freshly signed, and
// wants every one answered 200.
func (s *stripeStack) deliver(events ...stripefake.Event) {
	s.t.Helper()
	for _, e := range events {
		h := http.Header{"Stripe-Signature": {s.fake.Sign(e.Body, time.Now())}}
		r := s.do(request{method: http.MethodPost, path: "/v1/webhooks/stripe", header: h, body: e.Body})
		if r.Status != http.StatusOK {
			s.t.Fatalf("deliver %s %s = %d %s, want 200", e.Type, e.ID, r.Status, r.Body)
		}
	}
}

// eventsOf returns the fake's events about PaymentIntent pi (or all when empty).
func (s *stripeStack) eventsOf(pi string) []stripefake.Event {
	var out []stripefake.Event
	for _, e := range s.fake.Events() {
		if pi == "" || bytesContains(e.Body, pi) {
			out = append(out, e)
		}
	}
	return out
}

func bytesContains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// status reads an order's status as its customer sees it.
func (s *stripeStack) status(token, orderID string) string {
	s.t.Helper()
	r := s.do(request{method: http.MethodGet, path: "/v1/orders/" + orderID, token: token})
	if r.Status != http.StatusOK {
		s.t.Fatalf("GET order %s = %d %s", orderID, r.Status, r.Body)
	}
	return r.json(s.t)["status"].(string)
}
