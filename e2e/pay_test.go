package e2e

import (
	"bytes"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// TestPayAndReplay is the walkthrough of the README: register, order, pay,
// and pay again with the same key.
func TestPayAndReplay(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("ada@example.com")
		id := s.order(token, "19.90")
		key := uuid.NewString()

		first := s.pay(token, id, key, "pm_ok")
		if first.Status != http.StatusOK {
			t.Fatalf("pay = %d %s, want 200", first.Status, first.Body)
		}
		o := first.json(t)
		if o["status"] != "paid" || o["amount"] != "19.90" || o["pay_request_id"] != key || o["paid_at"] == nil {
			t.Errorf("paid order = %s, want status paid, amount 19.90, pay_request_id %s, paid_at set", first.Body, key)
		}
		if first.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("first pay carries Idempotent-Replayed")
		}

		again := s.pay(token, id, key, "pm_ok")
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
			t.Errorf("replay = %d %s, want %d %s", again.Status, again.Body, first.Status, first.Body)
		}
		if again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay Idempotent-Replayed = %q, want true", again.Header.Get("Idempotent-Replayed"))
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", id); n != 1 {
			t.Errorf("attempts = %d, want 1", n)
		}

		got := s.do(request{method: "GET", path: "/v1/orders/" + id, token: token})
		if got.Status != http.StatusOK {
			t.Fatalf("GET order = %d %s", got.Status, got.Body)
		}
		if atts, _ := got.json(t)["attempts"].([]any); len(atts) != 1 || atts[0].(map[string]any)["status"] != "succeeded" {
			t.Errorf("GET order attempts = %v, want one succeeded", got.json(t)["attempts"])
		}
	})
}

// TestConcurrentSameKey: 100 goroutines pay one order with one key. Exactly
// one charge and one attempt; every reply is the same answer, and all but
// the first say they are replays (or are still in flight: 409 in use).
func TestConcurrentSameKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("bob@example.com")
		id := s.order(token, "5.00")
		key := uuid.NewString()

		replies := parallel(100, func(int) reply { return s.pay(token, id, key, "pm_ok") })
		var firsts, replays, inUse int
		var body []byte
		for _, r := range replies {
			switch {
			case r.Status == http.StatusConflict && r.code(t) == "idempotency_key_in_use":
				inUse++
				if r.Header.Get("Retry-After") == "" {
					t.Error("409 in use without Retry-After")
				}
				continue
			case r.Status != http.StatusOK:
				t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
			case r.Header.Get("Idempotent-Replayed") == "true":
				replays++
			default:
				firsts++
			}
			if body == nil {
				body = r.Body
			} else if !bytes.Equal(body, r.Body) {
				t.Errorf("replies differ:\n%s\n%s", body, r.Body)
			}
		}
		if firsts != 1 || firsts+replays+inUse != 100 {
			t.Errorf("executed %d, replayed %d, in use %d; want 1 executed and 99 others", firsts, replays, inUse)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", id); n != 1 {
			t.Errorf("attempts = %d, want 1", n)
		}
	})
}

// TestConcurrentDifferentKeys: 100 goroutines pay one order, each with its
// own key. Exactly one charge; every other request is a 409 conflict.
func TestConcurrentDifferentKeys(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("cy@example.com")
		id := s.order(token, "7.25")

		replies := parallel(100, func(int) reply { return s.pay(token, id, uuid.NewString(), "pm_ok") })
		ok, conflicts := 0, 0
		for _, r := range replies {
			switch r.Status {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
				if c := r.code(t); c != "order_already_paid" && c != "order_payment_in_progress" {
					t.Errorf("409 code = %q, want order_already_paid or order_payment_in_progress", c)
				}
				conflicts++
			default:
				t.Errorf("pay = %d %s, want 200 or 409", r.Status, r.Body)
			}
		}
		if ok != 1 || conflicts != 99 {
			t.Errorf("200s = %d, 409s = %d; want 1 and 99", ok, conflicts)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", id); n != 1 {
			t.Errorf("attempts = %d, want 1", n)
		}
	})
}

// TestKeyReuse: the same key with another body, or on another order, is a
// 422 and executes nothing; another customer's identical key is independent.
func TestKeyReuse(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, ann := s.register("ann@example.com")
		_, ben := s.register("ben@example.com")
		a1, a2 := s.order(ann, "1.00"), s.order(ann, "2.00")
		key := uuid.NewString()

		if r := s.pay(ann, a1, key, "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay declined = %d %s, want 402", r.Status, r.Body)
		}
		if r := s.pay(ann, a1, key, "pm_insufficient_funds"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
			t.Errorf("same key, other body = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}
		if r := s.pay(ann, a2, key, "pm_declined"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
			t.Errorf("same key, other order = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", a2); n != 0 {
			t.Errorf("attempts on the other order = %d, want 0", n)
		}
		if n := s.count("payment_attempts WHERE order_id = ?", a1); n != 1 {
			t.Errorf("attempts after the reused key = %d, want 1", n)
		}

		b1 := s.order(ben, "3.00")
		if r := s.pay(ben, b1, key, "pm_ok"); r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("other customer, same key = %d (replayed %q) %s, want a fresh 200", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
	})
}

// TestDeclineThenRetry: a decline is 402 and releases the order; the same
// key runs again (a new attempt), and a good card then pays.
func TestDeclineThenRetry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("dee@example.com")
		id := s.order(token, "12.30")
		key := uuid.NewString()

		for i := range 2 {
			r := s.pay(token, id, key, "pm_declined")
			if r.Status != http.StatusPaymentRequired || r.code(t) != "card_declined" {
				t.Fatalf("pay #%d = %d %s, want 402 card_declined", i, r.Status, r.Body)
			}
			if r.Header.Get("Idempotent-Replayed") != "" {
				t.Errorf("retry after a decline was replayed, want a new attempt")
			}
			if o := s.do(request{method: "GET", path: "/v1/orders/" + id, token: token}).json(t); o["status"] != "pending" || o["pay_request_id"] != nil {
				t.Errorf("order after decline = %v %v, want pending with no pay_request_id", o["status"], o["pay_request_id"])
			}
		}
		if n := s.count("payment_attempts WHERE order_id = ? AND status = 'failed'", id); n != 2 {
			t.Errorf("failed attempts = %d, want 2", n)
		}
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay after decline = %d %s, want 200", r.Status, r.Body)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
	})
}

// TestUnknownOutcome: the provider charges but the reply is lost. The caller
// gets 202 with the order processing; the attempt is recorded as unknown so
// it can be resolved; nothing was charged twice.
func TestUnknownOutcome(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		// No webhooks: the provider's later word would settle the payment
		// and hide the state this test looks at.
		s := start(t, on(dialect), tuned(silentSandbox))
		_, token := s.register("eve@example.com")
		id := s.order(token, "8.00")
		r := s.pay(token, id, uuid.NewString(), "pm_timeout")
		if r.Status != http.StatusAccepted || r.json(t)["status"] != "processing" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("pay pm_timeout = %d %s (Retry-After %q), want 202 processing with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if n := s.count("payment_attempts WHERE order_id = ? AND status = 'unknown'", id); n != 1 {
			t.Errorf("unknown attempts = %d, want 1", n)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusConflict || r.code(t) != "order_payment_in_progress" {
			t.Errorf("another key while unknown = %d %s, want 409 order_payment_in_progress", r.Status, r.Body)
		}
	})
}

// parallel runs fn n times at once and returns the replies in order.
func parallel(n int, fn func(i int) reply) []reply {
	out := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestRecordStoredBeforeAnswer: the record holds the answer before the
// caller has it, so a caller that retries the moment it hears a decline
// makes a new attempt instead of waiting on a record still processing and
// being handed the decline it already saw.
func TestRecordStoredBeforeAnswer(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("fay@example.com")
		for i := range 5 {
			id := s.order(token, "3.00")
			key := uuid.NewString()
			method, wantStatus, wantRecord := "pm_declined", http.StatusPaymentRequired, "failed"
			if i%2 == 1 {
				method, wantStatus, wantRecord = "pm_ok", http.StatusOK, "succeeded"
			}
			if r := s.pay(token, id, key, method); r.Status != wantStatus {
				t.Fatalf("pay(%s) = %d %s, want %d", method, r.Status, r.Body, wantStatus)
			}
			if n := s.count("idempotency_records WHERE idem_key = ? AND status = ?", key, wantRecord); n != 1 {
				t.Errorf("record of %s right after its answer: %d rows %s, want 1", method, n, wantRecord)
			}
		}
	})
}
