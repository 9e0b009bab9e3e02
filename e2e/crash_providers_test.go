package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
)

// crashProvider is the provider a crash case charges through: the sandbox,
// or the fake Stripe behind the Stripe adapter. Each says what payd must
// have asked of it and how it charges.
type crashProvider interface {
	// settings are a payd's on dbURL charging through this provider.
	settings(dbURL string, extra env) env
	// method is a payment method that succeeds.
	method() string
	// chargesOf is every charge the provider holds for an order.
	chargesOf(orderID string) []domain.Charge
	// callsFor lists "POST" (charge) and "GET" (ask) for an attempt, in order.
	callsFor(attemptID string) []string
	// refundCalls is how many refunds payd asked for.
	refundCalls() int
	// recoveryCalls is what recovering an attempt crashed at point costs:
	// the sandbox is asked (GET) and, if it has nothing under the key, the
	// create is replayed under it (POST, ADR 0054); Stripe is asked by
	// repeating the create under the same key (ADR 0020).
	recoveryCalls(point string) []string
}

// eachCrashProvider runs fn per dialect and provider.
func eachCrashProvider(t *testing.T, fn func(t *testing.T, dialect string, newProv func(*testing.T) crashProvider)) {
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Run("sandbox", func(t *testing.T) {
			fn(t, dialect, func(t *testing.T) crashProvider { return startProcProvider(t, "") })
		})
		t.Run("stripe", func(t *testing.T) {
			fn(t, dialect, func(t *testing.T) crashProvider { return &stripeCrash{stripefake.New(t.Cleanup)} })
		})
	})
}

func (p *procProvider) settings(dbURL string, extra env) env { return paydEnv(dbURL, p.url, extra) }
func (p *procProvider) method() string                       { return "pm_ok" }
func (p *procProvider) recoveryCalls(point string) []string {
	if point == "after_claim" {
		return []string{"GET", "POST"}
	}
	return []string{"POST", "GET"}
}

// stripeCrash is the fake Stripe as a crash case's provider.
type stripeCrash struct{ f *stripefake.Fake }

func (s *stripeCrash) settings(dbURL string, extra env) env { return stripeEnv(dbURL, s.f, extra) }
func (s *stripeCrash) method() string                       { return stripefake.PMVisa }
func (s *stripeCrash) callsFor(attemptID string) []string   { return s.f.CallsFor(attemptID) }
func (s *stripeCrash) refundCalls() int                     { return s.f.Count("POST /v1/refunds") }
func (s *stripeCrash) recoveryCalls(point string) []string {
	if point == "after_claim" {
		return []string{"POST"} // the replay is the first create
	}
	return []string{"POST", "POST"} // the create, and its replay answered from the key
}

func (s *stripeCrash) chargesOf(orderID string) []domain.Charge {
	var out []domain.Charge
	for _, pi := range s.f.Intents(orderID) {
		st := domain.ChargePending
		switch pi[1] {
		case "succeeded":
			st = domain.ChargeSucceeded
		case "requires_payment_method", "canceled":
			st = domain.ChargeFailed
		}
		out = append(out, domain.Charge{ID: pi[0], OrderID: orderID, Status: st})
	}
	return out
}

// TestCrashWebhookStripe: payd is killed after Stripe charged; Stripe's
// payment_intent.succeeded, delivered to the restarted payd, settles the
// payment; the only question to Stripe is the webhook's own, confirming
// the success (ADR 0031). The attempt never learned its PaymentIntent, so
// the question is the create replayed under the attempt's key, which Stripe
// answers with the PaymentIntent it made (ADR 0020).
func TestCrashWebhookStripe(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range faultPoints[1:] {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				prov := &stripeCrash{stripefake.New(t.Cleanup)}
				c := crashPayment(t, dialect, point, prov, env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1m"})
				for _, e := range prov.f.Events() {
					if r, err := prov.f.Deliver(t.Context(), p.base+"/v1/webhooks/stripe", e); err != nil || r != http.StatusOK {
						t.Fatalf("deliver %s = %d, %v, want 200", e.Type, r, err)
					}
				}
				eventually(t, 30*time.Second, "the webhook did not settle the payment", func() bool {
					return c.orderState().Status != "processing" && c.recordState().Status != "processing"
				})
				c.checkPaid(p, 3, []string{"POST", "POST"})
			})
		}
	})
}
