package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox"
)

// TestLateChargeIsNeverCalledNotCharged (issue 36, item 4): the provider
// carries out a charge request long after payd gave up on it — held in
// transit, as a proxy, a queue or a loaded provider would hold it — and
// sends no webhook. payd's look-up of the key finds nothing meanwhile,
// and that "not found" proves nothing: the late request is still coming.
// payd must never answer "nothing was charged" (502 payment_not_completed),
// nor release the order, for a charge the provider makes; the unknown
// outcome is settled by replaying the create under the attempt's own key
// (ADR 0054), and the key's answer is 200 paid with one charge.
//
// "every second" is the setup: each charge request held 6 s,
// PAYD_PROVIDER_TIMEOUT=2s, PAYD_LEASE=8s, the key retried every second
// (it failed only on a loaded machine). "after the recoverer" holds each
// request 12 s and retries only once the recoverer has met the attempt
// past its in-flight deadline, which on payd before ADR 0054 released the
// order as not charged on every machine.
func TestLateChargeIsNeverCalledNotCharged(t *testing.T) {
	cases := []struct {
		name        string
		hold        time.Duration
		firstRetry  time.Duration // after the first answer
		answerUntil time.Duration // from the first pay
	}{
		{"every second", 6 * time.Second, time.Second, 35 * time.Second},
		{"after the recoverer", 12 * time.Second, 14 * time.Second, 40 * time.Second},
	}
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				late := func(c *sandbox.Config) { c.ChargeDelay = tc.hold }
				s := start(t, on(dialect), tuned(silentSandbox, late),
					withEnv(env{"PAYD_PROVIDER_TIMEOUT": "2s", "PAYD_LEASE": "8s", "PAYD_INFLIGHT_WAIT": "100ms"}))
				_, token := s.register(newEmail())
				id, key := s.order(token, "42.00"), uuid.NewString()
				begin := time.Now()
				var seen []string
				answer := func() reply {
					r := s.pay(token, id, key, "pm_ok")
					seen = append(seen, fmt.Sprintf("%.1fs %d %s", time.Since(begin).Seconds(), r.Status, r.problemCode()))
					return r
				}
				r := answer()
				for wait := tc.firstRetry; r.Status != http.StatusOK && time.Since(begin) < tc.answerUntil; wait = time.Second {
					if r.Status == http.StatusBadGateway || r.Status == http.StatusPaymentRequired {
						break // a final "not charged" or decline: judged below
					}
					time.Sleep(wait)
					r = answer()
				}
				charged := s.sandboxCharges(id, domain.ChargeSucceeded)
				t.Logf("answers: %v; charges: %d", seen, len(charged))
				if r.Status == http.StatusBadGateway && r.problemCode() == "payment_not_completed" {
					// Let the late request land, to say what the provider did.
					eventually(t, tc.hold+5*time.Second, "the late charge to land", func() bool {
						return len(s.sandboxCharges(id, domain.ChargeSucceeded)) > 0
					})
					t.Fatalf("Pay(%q) = 502 payment_not_completed (\"nothing was charged\"), but the provider holds %d succeeded charge(s) for the order; answers %v",
						key, len(s.sandboxCharges(id, domain.ChargeSucceeded)), seen)
				}
				if r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
					t.Fatalf("Pay(%q) within %v = %d %s, want 200 paid; answers %v", key, tc.answerUntil, r.Status, r.Body, seen)
				}
				// Whatever is still in transit lands now: none of it may
				// charge again.
				time.Sleep(tc.hold + time.Second)
				if charged = s.sandboxCharges(id, domain.ChargeSucceeded); len(charged) != 1 {
					t.Fatalf("provider charges of the order = %+v, want exactly one", charged)
				}
				for _, a := range s.attempts(id) {
					if a.Status == domain.AttemptFailed && a.FailureCode == domain.NotCharged {
						t.Errorf("attempt %s = failed not_charged, and the provider charged %s", a.ID, charged[0].ID)
					}
				}
				if as := s.attempts(id); len(as) != 1 || as[0].Status != domain.AttemptSucceeded || as[0].ProviderChargeID != charged[0].ID {
					t.Errorf("attempts = %+v, want one, succeeded with the provider's charge %s", as, charged[0].ID)
				}
				if o := s.orderRow(id); o.Status != domain.StatusPaid || o.PayRequestID != key {
					t.Errorf("order = %s by %q, want paid by %q", o.Status, o.PayRequestID, key)
				}
			})
		}
	})
}
