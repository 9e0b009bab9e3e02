package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestRefundKeyAfterExpiry: once the idempotency record of an admin refund
// is gone, the refund row is the key's only memory. The same body gets the
// same refund back; another amount under that key is 422, and nothing is
// refunded again.
func TestRefundKeyAfterExpiry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("refund-key@example.com")
		for _, how := range []string{"expired", "purged"} {
			id, key := s.paidOrder(token, "10.00"), uuid.NewString()
			first := s.refund(id, key, "4.00")
			if first.Status != http.StatusOK {
				t.Fatalf("refund 4.00 = %d %s, want 200", first.Status, first.Body)
			}
			s.forget(how, key)
			if r := s.refund(id, key, "1.00"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
				t.Errorf("%s: refund 1.00 under the key of 4.00 = %d %s, want 422 idempotency_key_reused", how, r.Status, r.Body)
			}
			s.forget(how, key)
			r := s.refund(id, key, "4.00")
			if r.Status != http.StatusOK {
				t.Errorf("%s: same refund again = %d %s, want 200", how, r.Status, r.Body)
			} else if got, want := r.json(t)["refund"].(map[string]any)["id"], first.json(t)["refund"].(map[string]any)["id"]; got != want {
				t.Errorf("%s: same refund again gave refund %v, want %v", how, got, want)
			}
			if n := s.count("refunds WHERE order_id = ?", id); n != 1 {
				t.Errorf("%s: refunds = %d, want 1", how, n)
			}
		}
	})
}

// TestPayKeyAfterExpiryMethod: once a pay key's record is gone, the order
// answers for the key through pay_request_id; the attempt remembers the
// payment method, so another method under that key is 422, the same is 200.
func TestPayKeyAfterExpiryMethod(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("pay-key@example.com")
		for _, how := range []string{"expired", "purged"} {
			id, key := s.order(token, "10.00"), uuid.NewString()
			if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK {
				t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
			}
			s.forget(how, key)
			if r := s.pay(token, id, key, "pm_declined"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
				t.Errorf("%s: pay with another method under the key = %d %s, want 422 idempotency_key_reused", how, r.Status, r.Body)
			}
			s.forget(how, key)
			if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK {
				t.Errorf("%s: same pay again = %d %s, want 200", how, r.Status, r.Body)
			}
			if n := s.charges(id); n != 1 {
				t.Errorf("%s: charges = %d, want 1", how, n)
			}
		}
	})
}
