package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestSlowChargeOutlivesAnotherReplicasLease: a charge request is held by
// a slow provider for 2s. Another replica, configured with a much shorter
// lease and provider timeout (a rolling config change), runs its recoverer
// while the charge is in flight and finds nothing at the provider yet. The
// lease the claiming request holds from the claim keeps it away: exactly
// one charge, no refund, the pay call answers 200 paid, and the record
// stores that answer.
func TestSlowChargeOutlivesAnotherReplicasLease(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_PROVIDER_TIMEOUT": "4s", "PAYD_LEASE": "7s"}))
		h := s.hostile
		start(t, peerOf(s), providerAt(h.url), withEnv(env{"PAYD_PROVIDER_TIMEOUT": "300ms", "PAYD_LEASE": "1s"}))
		_, token := s.register("slow@example.com")
		id := s.order(token, "500.00")
		h.set(id, hostileRule{HoldRequest: 2 * time.Second})
		key := uuid.NewString()

		r := s.pay(token, id, key, "pm_ok")
		if r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
			t.Errorf("Pay(%q) = %d %s, want 200 paid", key, r.Status, r.Body)
		}
		time.Sleep(1500 * time.Millisecond) // let both recoverers look again
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
			t.Errorf("refunds = %d, want 0", n)
		}
		if o := s.orderRow(id); o.Status != "paid" {
			t.Errorf("order status = %s, want paid", o.Status)
		}
		if st, code, body := s.record(token, key); st != "succeeded" || code != http.StatusOK || body["status"] != "paid" {
			t.Errorf("record = %s %d %v, want succeeded 200 paid", st, code, body)
		}

		// Even with the lease gone (cleared while the charge is held), the
		// time in flight recorded on the attempt alone keeps the other
		// replica's recoverer from taking its "not found" as "never charged".
		id = s.order(token, "500.00")
		h.set(id, hostileRule{HoldRequest: 2 * time.Second})
		key = uuid.NewString()
		answer := make(chan reply, 1)
		go func() { answer <- s.pay(token, id, key, "pm_ok") }()
		eventually(t, 5*time.Second, "the charge request did not reach the provider", func() bool { return h.chargeRequests(id) == 1 })
		s.exec("UPDATE payment_attempts SET leased_until = NULL WHERE order_id = ?", id)
		if r := <-answer; r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
			t.Errorf("Pay(%q) without its lease = %d %s, want 200 paid", key, r.Status, r.Body)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("without the lease: provider charges = %d, want 1", n)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 0 {
			t.Errorf("without the lease: refunds = %d, want 0", n)
		}
	})
}

// TestProviderRefusalIsDefinite: a provider 4xx that refuses the charge
// request is a definite failure (nothing charged): the attempt fails, the
// order is released at once, the caller gets a 4xx problem, and the record
// is failed so the same key may run again. Timing refusals (408, 409,
// 429) and 5xx leave the outcome unknown (202).
func TestProviderRefusalIsDefinite(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("refused@example.com")

		definite := []struct {
			status     int
			code       string
			wantStatus int
			wantCode   string
			wantWhy    string
		}{
			{400, "unknown_payment_method", 400, "payment_method_invalid", ""},
			{402, "card_declined", 402, "card_declined", "card_declined"},
			{422, "amount_too_large", 402, "card_declined", "amount_too_large"},
			{400, "validation_failed", 402, "card_declined", "validation_failed"},
		}
		for _, tt := range definite {
			id := s.order(token, "20.00")
			h.set(id, hostileRule{RefuseStatus: tt.status, RefuseCode: tt.code, Times: 1})
			key := uuid.NewString()
			r := s.pay(token, id, key, "pm_ok")
			if r.Status != tt.wantStatus || r.code(t) != tt.wantCode {
				t.Errorf("provider %d %s: Pay = %d %s, want %d %s", tt.status, tt.code, r.Status, r.Body, tt.wantStatus, tt.wantCode)
				continue
			}
			if why, _ := r.json(t)["decline_code"].(string); why != tt.wantWhy {
				t.Errorf("provider %d %s: decline_code = %q, want %q", tt.status, tt.code, why, tt.wantWhy)
			}
			if a := s.onlyAttempt(id); a.Status != "failed" || a.FailureCode != tt.code {
				t.Errorf("provider %d %s: attempt = %s %s, want failed %s", tt.status, tt.code, a.Status, a.FailureCode, tt.code)
			}
			if o := s.orderRow(id); o.Status != "pending" || o.PayRequestID != "" {
				t.Errorf("provider %d %s: order = %s (pay_request_id %q), want pending and released", tt.status, tt.code, o.Status, o.PayRequestID)
			}
			if st, code, _ := s.record(token, key); st != "failed" || code != tt.wantStatus {
				t.Errorf("provider %d %s: record = %s %d, want failed %d", tt.status, tt.code, st, code, tt.wantStatus)
			}
			// The same key runs again (the rule was for one request) and pays.
			if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
				t.Errorf("provider %d %s: retry with the same key = %d %s, want 200 executed anew", tt.status, tt.code, r.Status, r.Body)
			}
			if n := s.charges(id); n != 1 {
				t.Errorf("provider %d %s: charges = %d, want 1", tt.status, tt.code, n)
			}
		}

		for _, status := range []int{408, 409, 429, 503} {
			id := s.order(token, "20.00")
			h.set(id, hostileRule{RefuseStatus: status, RefuseCode: "try_later"})
			r := s.pay(token, id, uuid.NewString(), "pm_ok")
			if r.Status != http.StatusAccepted || r.json(t)["status"] != "processing" || r.Header.Get("Retry-After") == "" {
				t.Errorf("provider %d: Pay = %d %s, want 202 processing with Retry-After", status, r.Status, r.Body)
			}
			if a := s.onlyAttempt(id); a.Status != "unknown" {
				t.Errorf("provider %d: attempt = %s, want unknown", status, a.Status)
			}
		}

		// The sandbox's own refusal of a payment method it does not know.
		id := s.order(token, "20.00")
		key := uuid.NewString()
		r := s.pay(token, id, key, "pm_foo")
		if r.Status != http.StatusBadRequest || r.code(t) != "payment_method_invalid" {
			t.Fatalf("Pay(pm_foo) = %d %s, want 400 payment_method_invalid", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != "pending" {
			t.Errorf("order after pm_foo = %s, want pending", o.Status)
		}
		if st, code, _ := s.record(token, key); st != "failed" || code != http.StatusBadRequest {
			t.Errorf("record after pm_foo = %s %d, want failed 400", st, code)
		}
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("Pay(pm_ok) after pm_foo = %d %s, want 200", r.Status, r.Body)
		}
	})
}

// TestExpiredOrderCannotBePaid: an order past its expires_at is refused by
// the claim itself (409 order_expired), before the expiry job has run, and
// nothing is charged. Once the job has run the answer is the same.
func TestExpiredOrderCannotBePaid(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("late@example.com")
		id := s.order(token, "9.99")
		s.exec("UPDATE orders SET expires_at = ? WHERE id = ?", time.Now().UTC().Add(-time.Second).Format("2006-01-02 15:04:05.000000"), id)

		r := s.pay(token, id, uuid.NewString(), "pm_ok")
		if r.Status != http.StatusConflict || r.code(t) != "order_expired" {
			t.Errorf("Pay(expired, before the job) = %d %s, want 409 order_expired", r.Status, r.Body)
		}
		if n := s.charges(id); n != 0 {
			t.Errorf("provider charges = %d, want 0", n)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", id); n != 0 {
			t.Errorf("attempts = %d, want 0", n)
		}
		if o := s.orderRow(id); o.Status != "pending" || o.Version != 1 {
			t.Errorf("order = %s v%d, want pending v1 (untouched)", o.Status, o.Version)
		}
		s.exec("UPDATE orders SET status = 'expired' WHERE id = ?", id) // as the job does
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusConflict || r.code(t) != "order_expired" {
			t.Errorf("Pay(expired, after the job) = %d %s, want 409 order_expired", r.Status, r.Body)
		}
	})
}
