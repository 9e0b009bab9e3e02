package e2e

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// settleWait bounds how long a test waits for the sandbox's webhook: it
// resolves async charges after 100ms and polls every 20ms, so seconds are
// plenty even on a loaded machine.
const settleWait = 20 * time.Second

// TestAsyncPaymentSucceeds: pm_async answers 202 processing; the sandbox's
// payment.succeeded webhook makes the order paid and completes the pay
// request's idempotency record, so the same pay call replayed answers 200
// paid (not a stale 202), and one charge was made.
func TestAsyncPaymentSucceeds(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("async-ok@example.com")
		id := s.order(token, "12.30")
		key := uuid.NewString()

		first := s.pay(token, id, key, "pm_async")
		if first.Status != http.StatusAccepted || first.json(t)["status"] != "processing" {
			t.Fatalf("pay(pm_async) = %d %s, want 202 processing", first.Status, first.Body)
		}
		if first.Header.Get("Retry-After") == "" {
			t.Error("202 without Retry-After")
		}
		eventually(t, settleWait, "order not paid by the webhook", func() bool { return s.orderRow(id).Status == domain.StatusPaid })
		eventually(t, settleWait, "idempotency record not completed", func() bool { st, _, _ := s.record(token, key); return st == "succeeded" })

		st, code, stored := s.record(token, key)
		if st != "succeeded" || code != http.StatusOK || stored["status"] != "paid" {
			t.Errorf("GET /v1/requests/%s = %s %d %v, want succeeded 200 paid", key, st, code, stored)
		}
		replay := s.pay(token, id, key, "pm_async")
		if replay.Status != http.StatusOK || replay.json(t)["status"] != "paid" {
			t.Fatalf("replayed pay = %d %s, want 200 paid", replay.Status, replay.Body)
		}
		if replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replayed pay Idempotent-Replayed = %q, want true", replay.Header.Get("Idempotent-Replayed"))
		}
		if again := s.pay(token, id, key, "pm_async"); !bytes.Equal(again.Body, replay.Body) {
			t.Errorf("second replay = %s, want the same bytes %s", again.Body, replay.Body)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
		a := s.onlyAttempt(id)
		if a.Status != domain.AttemptSucceeded || a.ProviderChargeID == "" {
			t.Errorf("attempt = %s charge %q, want succeeded with the charge ID", a.Status, a.ProviderChargeID)
		}
		if n := s.count("webhook_events WHERE order_id = ? AND type = 'payment.succeeded'", id); n != 1 {
			t.Errorf("payment.succeeded events stored = %d, want 1", n)
		}
	})
}

// TestAsyncPaymentFails: pm_async_fail answers 202; the payment.failed
// webhook releases the order to pending and completes the record with the
// decline, which GET /v1/requests/{key} then shows (402 card_declined).
//
// The customer never saw that decline (the request answered 202), so the
// pay call replayed with the same key tells the truth (docs/guarantees.md#pay-answers): the stored
// 402, replayed, with no new attempt. Paying again takes a new key, as
// after any decline; that one runs and is declined on its own.
func TestAsyncPaymentFails(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("async-fail@example.com")
		id := s.order(token, "8.00")
		key := uuid.NewString()

		first := s.pay(token, id, key, "pm_async_fail")
		if first.Status != http.StatusAccepted || first.json(t)["status"] != "processing" {
			t.Fatalf("pay(pm_async_fail) = %d %s, want 202 processing", first.Status, first.Body)
		}
		eventually(t, settleWait, "attempt not failed by the webhook", func() bool {
			return s.onlyAttempt(id).Status == domain.AttemptFailed
		})
		eventually(t, settleWait, "idempotency record not completed", func() bool { st, _, _ := s.record(token, key); return st == "failed" })
		if o := s.orderRow(id); o.Status != domain.StatusPending || o.PayRequestID != "" {
			t.Errorf("order = %s (pay_request_id %q), want pending and released", o.Status, o.PayRequestID)
		}
		st, code, stored := s.record(token, key)
		if st != "failed" || code != http.StatusPaymentRequired || stored["code"] != "card_declined" {
			t.Errorf("GET /v1/requests/%s = %s %d %v, want failed 402 card_declined", key, st, code, stored)
		}

		for range 2 {
			replay := s.pay(token, id, key, "pm_async_fail")
			if replay.Status != http.StatusPaymentRequired || replay.Header.Get("Idempotent-Replayed") != "true" || replay.code(t) != "card_declined" {
				t.Fatalf("replayed pay = %d (replayed %q) %s, want the stored 402 card_declined replayed", replay.Status,
					replay.Header.Get("Idempotent-Replayed"), replay.Body)
			}
		}
		if as := s.attempts(id); len(as) != 1 {
			t.Errorf("attempts after the replays = %d, want 1 (a replay executes nothing)", len(as))
		}
		again := s.pay(token, id, uuid.NewString(), "pm_async_fail")
		if again.Status != http.StatusAccepted {
			t.Fatalf("pay again with a new key = %d %s, want 202", again.Status, again.Body)
		}
		eventually(t, settleWait, "second attempt not failed by its webhook", func() bool {
			as := s.attempts(id)
			return len(as) == 2 && as[1].Status == domain.AttemptFailed
		})
		if o := s.orderRow(id); o.Status != domain.StatusPending {
			t.Errorf("order after the second decline = %s, want pending", o.Status)
		}
		if n := s.charges(id); n != 0 {
			t.Errorf("provider charges = %d, want 0", n)
		}
	})
}
