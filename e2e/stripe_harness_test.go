package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// stripeStack is payd started through run with PAYD_PROVIDER=stripe
// against the stateful fake Stripe, which counts what was really charged.
type stripeStack struct {
	*inproc
	fake    *stripefake.Fake
	db      *repository.DB
	dialect string
	dbURL   string
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

func startStripeStack(t *testing.T, dialect string, extra env) *stripeStack {
	t.Helper()
	s := &stripeStack{fake: stripefake.New(t.Cleanup), dialect: dialect, dbURL: dbtest.NewURL(t, migrations.Dialect(dialect))}
	s.inproc = startInproc(t, nil, stripeEnv(s.dbURL, s.fake, extra))
	s.db = openDB(t, s.dbURL)
	return s
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
