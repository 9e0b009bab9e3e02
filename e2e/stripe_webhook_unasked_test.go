package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/stripefake"
)

// TestStripeWebhookConfirmReplyLost: in Stripe mode, while every reply of
// Stripe's API is lost (the connection closed unanswered), a
// payment_intent.succeeded payd cannot confirm is answered 503 with
// Retry-After and logged as a warning, not as an internal error, and the
// inbox keeps it unprocessed; Stripe's redelivery, once its API answers,
// applies it once.
func TestStripeWebhookConfirmReplyLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode(), withEnv(env{"PAYD_LEASE": "10m", "PAYD_PROVIDER_TIMEOUT": "500ms"})).stripe()
		_, token := s.register(newEmail())
		id := s.order(token, "19.90")
		if r := s.pay(token, id, uuid.NewString(), stripefake.PMProcessing); r.Status != http.StatusAccepted {
			t.Fatalf("pay(processing) = %d %s, want 202", r.Status, r.Body)
		}
		pi := s.fake.PaymentIntentOf(id)
		s.fake.Finish(pi, true)
		evs := s.eventsOf(pi)
		ev := evs[len(evs)-1]
		post := func() reply {
			h := http.Header{"Stripe-Signature": {s.fake.Sign(ev.Body, time.Now())}}
			return s.do(request{method: http.MethodPost, path: "/v1/webhooks/stripe", header: h, body: ev.Body})
		}

		s.fake.DropReplies(100) // more than any client's retries
		r := post()
		s.fake.DropReplies(0)
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s while Stripe's replies are lost = %d (Retry-After %q) %s, want 503 with Retry-After",
				ev.Type, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		if n := s.count("webhook_events WHERE id = ? AND processed_at IS NULL AND outcome IS NULL", ev.ID); n != 1 {
			t.Errorf("unprocessed inbox rows of %s = %d, want 1", ev.ID, n)
		}
		if st := s.status(token, id); st != "processing" {
			t.Errorf("order while Stripe's replies are lost = %s, want processing", st)
		}
		warned := false
		for line := range strings.SplitSeq(s.logs.String(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) {
				t.Errorf("ERROR line for a provider that could not be asked: %s", line)
			}
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "/v1/webhooks/stripe") {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no WARN line naming the route; logs:\n%s", s.logs.String())
		}

		if r := post(); r.Status != http.StatusOK || r.json(t)["outcome"] != "applied" {
			t.Fatalf("redelivery = %d %s, want 200 applied", r.Status, r.Body)
		}
		if r := post(); r.Status != http.StatusOK || r.json(t)["outcome"] != "duplicate" {
			t.Fatalf("second redelivery = %d %s, want 200 duplicate", r.Status, r.Body)
		}
		if st := s.status(token, id); st != "paid" {
			t.Errorf("order after the redelivery = %s, want paid", st)
		}
		if n := s.count("ledger_entries WHERE order_id = ? AND kind = 'charge'", id); n != 1 {
			t.Errorf("charge entries of the order = %d, want 1", n)
		}
		if n := s.fake.Succeeded(id); n != 1 {
			t.Errorf("succeeded PaymentIntents = %d, want 1", n)
		}
	})
}
