package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestCrashThenRetry is the crash matrix of SPEC §9: payd is killed (kill -9)
// at each point of a payment, restarted on the same database, and the
// customer retries with the same key. Whatever the point, the provider
// charged once, the order is paid, and the retry's answer is what every
// later replay says.
//
// The restarted payd has a longer lease than the crashed one, so its
// recoverer leaves the attempt alone: this is the retry's own path, the
// takeover of the expired record and Checkout.recover asking the provider
// before anything (TestCrashRecoverer covers the recoverer).
func TestCrashThenRetry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range faultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				c := crashPayment(t, dialect, point, startProcProvider(t, ""), env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"})

				final, waits := c.payUntilFinal(p)
				t.Logf("told to wait %d times before the final answer", waits)
				if final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
					t.Fatalf("Pay(%q) after restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
				}
				// Never charge without asking first: the recovery asks the
				// provider about the attempt, and charges (under the same key)
				// only when the provider never saw it.
				calls := []string{"POST", "GET"}
				if point == "after_claim" {
					calls = []string{"GET", "POST"}
				}
				stored := c.checkPaid(p, 3, calls)
				if !bytes.Equal(final.Body, stored) {
					t.Errorf("final answer %s, stored %s: want the same bytes", final.Body, stored)
				}
				if atts := c.attemptStates(); len(atts) != 1 {
					t.Errorf("attempts = %+v, want the one the crashed payd started", atts)
				}
			})
		}
	})
}

// TestCrashRecoverer: payd is killed mid-payment and nobody retries. The
// restarted payd's background recoverer alone resolves the attempt by
// asking the provider: a charge the provider made pays the order (and
// completes the record, so a later replay says 200 paid); an attempt the
// provider never saw releases the order without charging, and the
// customer's retry with the same key then pays it.
func TestCrashRecoverer(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range faultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				c := crashPayment(t, dialect, point, startProcProvider(t, ""), env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				// The job logs its batch after the batch: wait for the line too.
				pollUntil(t, 30*time.Second, "the recoverer did not settle the attempt", func() bool {
					s := c.attemptStates()[0].Status
					return s != "started" && s != "unknown" && p.jobRows("recover_payments") > 0
				})
				if n := p.jobRows("recover_payments"); n != 1 {
					t.Errorf("recover_payments settled %d attempts, want 1", n)
				}
				if point != "after_claim" {
					c.checkPaid(p, 3, []string{"POST", "GET"})
					return
				}
				c.checkReleased()
				r, err := p.pay(c.token, c.order, c.key, "pm_ok")
				if err != nil || r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
					t.Fatalf("Pay(%q) after the release = %d %s (err %v), want 200 executed anew", c.key, r.Status, r.Body, err)
				}
				c.checkPaid(p, 5, []string{"POST"})
			})
		}
	})
}

// checkReleased: the recoverer found that the provider never saw the
// attempt, so it failed it and released the order, charged nothing, and
// failed the record (the same key may pay again).
func (c *crashCase) checkReleased() {
	t := c.t
	t.Helper()
	if a := c.attemptStates()[0]; a.Status != "failed" || a.FailureCode.String != "not_charged" {
		t.Errorf("attempt = %+v, want failed not_charged", a)
	}
	if o := c.orderState(); o.Status != "pending" || o.Version != 3 || o.PayRequestID.Valid {
		t.Errorf("order = %+v, want pending, version 3, no pay_request_id", o)
	}
	if ch := c.prov.chargesOf(c.order); len(ch) != 0 {
		t.Errorf("provider charges = %+v, want none", ch)
	}
	if got := c.prov.callsFor(c.attemptStates()[0].ID); !slices.Equal(got, []string{"GET"}) {
		t.Errorf("provider calls for the attempt = %v, want only [GET]", got)
	}
	rec := c.recordState()
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(rec.ResponseBody, &p)
	// Nothing was declined: the record says so, and stays free to run again.
	if rec.Status != "failed" || rec.ResponseStatus != http.StatusBadGateway || p.Code != "payment_not_completed" {
		t.Errorf("idempotency record = %s %d %s, want failed 502 payment_not_completed", rec.Status, rec.ResponseStatus, rec.ResponseBody)
	}
}

// TestCrashWebhook: payd is killed after the provider charged, and the
// provider's payment.succeeded webhook, retried until a payd answers, is
// what settles the payment: nobody retries and nobody asks the provider.
func TestCrashWebhook(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range faultPoints[1:] {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				relay := startHookRelay(t)
				c := crashPayment(t, dialect, point, startProcProvider(t, relay.url), env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1m"})
				relay.point(p.base)
				pollUntil(t, 30*time.Second, "the webhook did not settle the payment", func() bool {
					return c.orderState().Status != "processing"
				})
				c.checkPaid(p, 3, []string{"POST"})
				p.stop() // every batch its jobs ran is in the log now
				if n := p.jobRows("recover_payments"); n != 0 {
					t.Errorf("recover_payments settled %d attempts, want 0 (the webhook did)", n)
				}
			})
		}
	})
}
