package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/stripefake"
)

// wantNoRoute checks r is the 404 problem every unknown route answers.
func wantNoRoute(t *testing.T, what string, r reply) {
	t.Helper()
	if r.Status != http.StatusNotFound || r.code(t) != "not_found" {
		t.Errorf("%s = %d %s, want 404 not_found", what, r.Status, r.Body)
	}
}

// TestOneWebhookEndpointPerMode: payd takes the provider's events on one
// endpoint, the one of the provider it runs with. In Stripe mode a
// sandbox-format event correctly signed with PAYD_WEBHOOK_SECRET is
// answered 404 on /v1/webhooks/provider, stored nowhere and applied to
// nothing; in sandbox mode /v1/webhooks/stripe answers 404.
func TestOneWebhookEndpointPerMode(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Run("stripe", func(t *testing.T) {
			s := start(t, on(dialect), stripeMode()).stripe()
			_, token := s.register(newEmail())
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PM3DS); r.Status != http.StatusAccepted {
				t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
			}
			p := payment{AttemptID: s.fake.PaymentIntentOf(id), ChargeID: s.fake.PaymentIntentOf(id), OrderID: id, Amount: "19.90", Currency: "USD"}
			evID := "evt_" + uuid.NewString()
			body := eventBody(t, evID, "payment.succeeded", p)
			wantNoRoute(t, "sandbox event in Stripe mode", s.postWebhook(body, signedWebhook(t, evID, time.Now(), body)))
			if n := countRows(t, s.db, "webhook_events"); n != 0 {
				t.Errorf("webhook_events = %d, want 0", n)
			}
			if n := countRows(t, s.db, "discrepancies"); n != 0 {
				t.Errorf("discrepancies = %d, want 0", n)
			}
			if st := s.status(token, id); st != "processing" {
				t.Errorf("order = %s, want processing", st)
			}
		})
		t.Run("sandbox", func(t *testing.T) {
			s := start(t, on(dialect), tuned(silentSandbox))
			body := []byte(`{"id":"evt_x","object":"event","type":"payment_intent.succeeded","data":{"object":{}}}`)
			h := http.Header{"Stripe-Signature": {"t=1,v1=00"}, "Content-Type": {"application/json"}}
			wantNoRoute(t, "Stripe event in sandbox mode", s.do(request{method: http.MethodPost, path: "/v1/webhooks/stripe", header: h, body: body}))
			if n := s.count("webhook_events"); n != 0 {
				t.Errorf("webhook_events = %d, want 0", n)
			}
		})
	})
}
