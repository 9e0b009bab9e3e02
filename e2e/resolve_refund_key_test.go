package e2e

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// A refund resolution keeps one answer under one key (ADR 0043): before
// its final answer a key may only say "outcome unknown, retry with this
// key" (503 payment_outcome_unknown with Retry-After) or "still running" (409
// idempotency_key_in_use with Retry-After); the final answer is stored
// once and replayed byte for byte, and the provider refunds once.

// refundable is a discrepancy a refund resolution gives a charge back for,
// and the route that resolves it.
type refundable struct {
	d        domain.Discrepancy
	chargeID string
	path     string
}

// refundableCharges stages one discrepancy of each refund path and
// returns them by name: a charge that pays no order (given back whole,
// resolved through the run that found it) and an order's own payment
// named for less in a settlement file (refunded through the order's
// refund, resolved by the discrepancy's own route).
func (s *stack) refundableCharges() map[string]refundable {
	s.t.Helper()
	_, tok := s.register(newEmail())
	stranger := s.order(tok, "5.00")
	orphan := s.chargeDirectly(uuid.NewString(), stranger, "5.00")
	now := time.Now().UTC()
	r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]string{
		"from": now.Add(-time.Hour).Format(time.RFC3339), "to": now.Add(time.Minute).Format(time.RFC3339)})
	if r.Status != http.StatusCreated {
		s.t.Fatalf("reconciliation run = %d %s, want 201", r.Status, r.Body)
	}
	run := r.json(s.t)["id"].(string)
	paid := s.paidOrder(tok, "10.00")
	a := s.onlyAttempt(paid)
	s.forgedSettlement(a.ProviderChargeID, a.ID, paid, "5.00")
	od := s.openOf(stranger, domain.MissingLocalPayment)
	pd := s.openOf(paid, domain.AmountMismatch)
	return map[string]refundable{
		"orphan charge": {d: od, chargeID: orphan.ID, path: resolvePath(run, od.ID)},
		"order payment": {d: pd, chargeID: a.ProviderChargeID, path: "/v1/admin/discrepancies/" + pd.ID + "/resolve"},
	}
}

// notYet reports whether r is an answer a key may give before its final
// one.
func notYet(t *testing.T, r reply) bool {
	switch {
	case r.Status == http.StatusServiceUnavailable && r.code(t) == "payment_outcome_unknown":
		// A concurrent duplicate given the original's stored answer hears
		// when to retry too (ADR 0047).
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("503 payment_outcome_unknown without Retry-After: %s", r.Body)
		}
		return true
	case r.Status == http.StatusConflict && r.code(t) == "idempotency_key_in_use":
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("409 idempotency_key_in_use without Retry-After: %s", r.Body)
		}
		return true
	}
	return false
}

// oneFinalAnswer checks answers, in the order they came, hold one final
// answer: every answer is either not final yet or byte-identical to the
// first final one, whose status is want; exactly one final answer was
// executed (the others are replays). It returns the final answer.
func oneFinalAnswer(t *testing.T, answers []reply, want int) reply {
	t.Helper()
	var final *reply
	executed := 0
	for i, r := range answers {
		if notYet(t, r) {
			continue
		}
		if r.Header.Get("Idempotent-Replayed") != "true" {
			executed++
		}
		if final == nil {
			final = &answers[i]
			continue
		}
		if r.Status != final.Status || !bytes.Equal(r.Body, final.Body) {
			t.Errorf("answer %d = %d %s, want the final answer %d %s byte for byte", i, r.Status, r.Body, final.Status, final.Body)
		}
	}
	if final == nil {
		t.Fatalf("no final answer among %d", len(answers))
	}
	if final.Status != want {
		t.Errorf("final answer = %d %s, want %d", final.Status, final.Body, want)
	}
	if executed != 1 {
		t.Errorf("final answers executed = %d, want 1 (the rest replayed)", executed)
	}
	return *final
}

// resolveTimes sends the refund resolution of c under key n times, from
// workers goroutines, and returns the answers.
func (s *stack) resolveTimes(c refundable, key string, workers, n int) []reply {
	var mu sync.Mutex
	var out []reply
	forEach(workers, n, func(int) {
		r := s.admin("POST", c.path, key, map[string]string{"action": "refund", "note": "ops"})
		mu.Lock()
		out = append(out, r)
		mu.Unlock()
	})
	return out
}

// providerRefunds is how many refunds of chargeID the provider holds.
func (s *stack) providerRefunds(chargeID string) int {
	s.t.Helper()
	all, err := s.sandbox.Refunds(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, r := range all {
		if r.ChargeID == chargeID {
			n++
		}
	}
	return n
}

// TestRefundResolutionOneAnswerAfterLostReply: the provider refunds but
// its reply is lost, to the first try and to concurrent retries under
// the same key: they answer "outcome unknown" or "in use". Once the
// provider answers again, retries under the key — concurrent, then one
// after another — learn the earlier refund's outcome under its own key:
// one answer, 200 resolved, executed once and replayed byte for byte, and
// one refund at the provider.
func TestRefundResolutionOneAnswerAfterLostReply(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		for name, c := range s.refundableCharges() {
			t.Run(name, func(t *testing.T) {
				key := uuid.NewString()
				s.hostile.loseRefundReplies(true)
				first := s.resolveTimes(c, key, 1, 1)
				if r := first[0]; r.Status != http.StatusServiceUnavailable || r.code(t) != "payment_outcome_unknown" || r.Header.Get("Retry-After") != "2" {
					t.Fatalf("first try, reply lost = %d %s (Retry-After %q), want 503 payment_outcome_unknown with Retry-After 2", r.Status, r.Body, r.Header.Get("Retry-After"))
				}
				answers := append(first, s.resolveTimes(c, key, 4, 4)...)
				for i, r := range answers {
					if !notYet(t, r) {
						t.Errorf("answer %d while every reply is lost = %d %s, want one that is not final", i, r.Status, r.Body)
					}
				}
				s.hostile.loseRefundReplies(false)
				answers = append(answers, s.resolveTimes(c, key, 6, 6)...)
				answers = append(answers, s.resolveTimes(c, key, 1, 3)...)
				final := oneFinalAnswer(t, answers, http.StatusOK)
				if got := decode[client.Discrepancy](t, final); got.Status != "resolved" || got.Resolution == nil || *got.Resolution != "refund" {
					t.Errorf("final answer %s, want the discrepancy resolved by refund", final.Body)
				}
				if n := s.providerRefunds(c.chargeID); n != 1 {
					t.Errorf("refunds of %s at the provider = %d, want 1", c.chargeID, n)
				}
				if n := s.count("refunds WHERE charge_id = ? AND status = 'succeeded'", c.chargeID); n != 1 || s.count("refunds WHERE charge_id = ?", c.chargeID) != 1 {
					t.Errorf("payd's refunds of %s = %d succeeded of %d, want the one", c.chargeID, n, s.count("refunds WHERE charge_id = ?", c.chargeID))
				}
			})
		}
	})
}

// TestRefundResolutionOneAnswerWhenRefused: the provider refuses the
// refund. The first try says so (502 refund_refused, not "outcome
// unknown": the outcome is known), and every retry under the key gets
// that same answer, replayed byte for byte rather than tried again;
// nothing is refunded and the discrepancy stays open for another action.
func TestRefundResolutionOneAnswerWhenRefused(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		for name, c := range s.refundableCharges() {
			t.Run(name, func(t *testing.T) {
				key := uuid.NewString()
				s.hostile.refuseRefunds(true)
				answers := s.resolveTimes(c, key, 1, 1)
				if r := answers[0]; r.Status != http.StatusBadGateway || r.code(t) != "refund_refused" {
					t.Errorf("first try, refund refused = %d %s, want 502 refund_refused", r.Status, r.Body)
				}
				answers = append(answers, s.resolveTimes(c, key, 4, 4)...)
				s.hostile.refuseRefunds(false) // a retry under the key must not try again
				answers = append(answers, s.resolveTimes(c, key, 1, 3)...)
				oneFinalAnswer(t, answers, http.StatusBadGateway)
				if n := s.providerRefunds(c.chargeID); n != 0 {
					t.Errorf("refunds of %s at the provider = %d, want 0", c.chargeID, n)
				}
				if n := s.count("discrepancies WHERE id = ? AND status = 'open'", c.d.ID); n != 1 {
					t.Errorf("discrepancy %s not open after the refusal", c.d.ID)
				}
			})
		}
	})
}
