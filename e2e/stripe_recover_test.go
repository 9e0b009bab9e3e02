package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/stripefake"
)

// TestStripeRecovererSettlesLostReply: in Stripe mode, a pay whose create
// took effect at Stripe but whose reply was lost is answered 202 and left
// unknown; with nobody retrying the pay and no webhook delivered, the
// recoverer alone settles it within a few of its passes (ADR 0020, 0052),
// by the one PaymentIntent Stripe holds for the attempt, as it stands now:
// also when the create left it pending (processing, 3-D Secure) and it
// was finished since, though Stripe replays the create's first response.
func TestStripeRecovererSettlesLostReply(t *testing.T) {
	s := start(t, stripeMode(), withEnv(env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})).stripe()
	_, token := s.register(newEmail())
	for _, tt := range []struct {
		pm     string
		finish func(id string) // the bank, or the customer, once the reply is lost
	}{
		{stripefake.PMVisa, nil},
		{stripefake.PMProcessing, func(id string) { s.fake.Finish(id, true) }},
		{stripefake.PM3DS, func(id string) { s.fake.Authenticate(id, true) }},
	} {
		t.Run(tt.pm, func(t *testing.T) {
			id := s.order(token, "19.90")
			// Two: net/http itself resends a POST carrying an
			// Idempotency-Key once when a reused connection dies unanswered.
			s.fake.DropReplies(2)
			if r := s.pay(token, id, uuid.NewString(), tt.pm); r.Status != http.StatusAccepted {
				t.Fatalf("pay with the reply lost = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			if tt.finish != nil {
				tt.finish(pi)
			}
			if st := s.fake.Status(pi); st != "succeeded" {
				t.Fatalf("the fake holds PaymentIntent %q %s, want succeeded", pi, st)
			}
			if !within(20*time.Second, func() bool { return s.status(token, id) == "paid" }) {
				t.Fatalf("order = %s 20s after the lost reply, want paid by the recoverer; calls %v", s.status(token, id), s.fake.Calls())
			}
			if n := s.fake.Created(id); n != 1 {
				t.Fatalf("PaymentIntents created for the order = %d, want 1", n)
			}
			tl := s.timeline(id)
			if len(tl.Attempts) != 1 || tl.Attempts[0].ProviderChargeId == nil || *tl.Attempts[0].ProviderChargeId != pi {
				t.Fatalf("attempts = %+v, want one recording %s", tl.Attempts, pi)
			}
		})
	}
}
