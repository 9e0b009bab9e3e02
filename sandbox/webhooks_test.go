package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// Every charge outcome reaches the receiver as a signed webhook: the
// synchronous ones at once, the asynchronous ones after AsyncDelay.
func TestWebhooksForEveryOutcome(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 0)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
		sb := sandboxtest.Start(t, cfg)
		ctx := context.Background()

		want := map[string]struct {
			typ         domain.ProviderEventType
			status      domain.ChargeStatus
			failureCode string
		}{
			"pm_ok":                 {domain.EventPaymentSucceeded, domain.ChargeSucceeded, ""},
			"pm_declined":           {domain.EventPaymentFailed, domain.ChargeFailed, "card_declined"},
			"pm_insufficient_funds": {domain.EventPaymentFailed, domain.ChargeFailed, "insufficient_funds"},
			"pm_async":              {domain.EventPaymentSucceeded, domain.ChargeSucceeded, ""},
			"pm_async_fail":         {domain.EventPaymentFailed, domain.ChargeFailed, "card_declined"},
			"pm_timeout":            {domain.EventPaymentSucceeded, domain.ChargeSucceeded, ""},
		}
		charged := map[string]domain.Charge{}
		for m := range want {
			ch, err := sb.Client.Charge(ctx, chargeReq(m, m))
			if m == "pm_timeout" {
				if !errors.Is(err, domain.ErrProviderUnavailable) {
					t.Fatalf("Charge(pm_timeout) = %v, want ErrProviderUnavailable", err)
				}
				ch, err = sb.Client.GetCharge(ctx, domain.Attempt{ID: m})
			}
			if err != nil {
				t.Fatalf("Charge(%s) = %v", m, err)
			}
			if strings.HasPrefix(m, "pm_async") && ch.Status != domain.ChargePending {
				t.Errorf("Charge(%s).Status = %s, want pending", m, ch.Status)
			}
			charged[m] = ch
		}
		if _, err := sb.Client.Charge(ctx, chargeReq("pm_error", "pm_error")); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Fatalf("Charge(pm_error) = %v, want ErrProviderUnavailable", err)
		}

		got := rcv.waitAccepted(t, len(want))
		for m, w := range want {
			evs := byKey(got, m)
			if len(evs) != 1 {
				t.Errorf("%s: %d events, want 1", m, len(evs))
				continue
			}
			e := evs[0]
			if e.Type != w.typ || e.Status != w.status || e.FailureCode != w.failureCode ||
				e.ChargeID != charged[m].ID || e.OrderID != "ord-"+m || !e.Amount.Equal(dec("12.30")) ||
				e.Currency != "USD" || !strings.HasPrefix(e.ID, "evt_") {
				t.Errorf("%s: event = %+v, want %s %s %q for charge %s", m, e, w.typ, w.status, w.failureCode, charged[m].ID)
			}
			if ch, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: m}); err != nil || ch.Status != w.status {
				t.Errorf("GetCharge(%s) = %v %v, want %s", m, ch.Status, err, w.status)
			}
		}
		time.Sleep(50 * time.Millisecond) // room for a stray extra delivery to show
		if n := len(rcv.allCalls()); n != len(want) {
			t.Errorf("receiver saw %d requests, want %d (pm_error must send none)", n, len(want))
		}
	})
}

// The signature covers id, timestamp and body: changing any of them, or
// verifying with another secret, fails.
func TestWebhookSignature(t *testing.T) {
	secret := sandboxtest.Secret(t)
	rcv := newReceiver(t, secret, 0)
	cfg := fastConfig(sandboxtest.SQLiteURL(t))
	cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
	sb := sandboxtest.Start(t, cfg)
	if _, err := sb.Client.Charge(context.Background(), chargeReq("k", "pm_ok")); err != nil {
		t.Fatal(err)
	}
	got := rcv.waitAccepted(t, 1)[0]
	hook, _ := standardwebhooks.NewWebhook(secret)
	if err := hook.Verify(got.body, got.header); err != nil {
		t.Fatalf("Verify(as delivered) = %v, want nil", err)
	}
	if got.header.Get("webhook-id") != got.event.ID {
		t.Errorf("webhook-id = %q, want the event id %q", got.header.Get("webhook-id"), got.event.ID)
	}

	tampered := []byte(strings.Replace(string(got.body), `"12.30"`, `"1230.00"`, 1))
	if string(tampered) == string(got.body) {
		t.Fatal("test did not change the body")
	}
	if err := hook.Verify(tampered, got.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("Verify(tampered body) = %v, want ErrNoMatchingSignature", err)
	}
	otherID := got.header.Clone()
	otherID.Set("webhook-id", "evt_other")
	if err := hook.Verify(got.body, otherID); err == nil {
		t.Error("Verify(other webhook-id) = nil, want an error")
	}
	other, _ := standardwebhooks.NewWebhook(sandboxtest.Secret(t))
	if err := other.Verify(got.body, got.header); err == nil {
		t.Error("Verify(other secret) = nil, want an error")
	}
}

// A receiver that fails gets the same event again, with the same
// webhook-id, after exponentially growing pauses, until it answers 2xx.
func TestWebhookRetriesUntil2xx(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 3)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
		cfg.RetryBase, cfg.RetryMax = 20*time.Millisecond, 60*time.Millisecond
		sb := sandboxtest.Start(t, cfg)
		ctx := context.Background()
		if _, err := sb.Client.Charge(ctx, chargeReq("k", "pm_ok")); err != nil {
			t.Fatal(err)
		}
		rcv.waitAccepted(t, 1)
		calls := rcv.allCalls()
		if len(calls) != 4 {
			t.Fatalf("receiver saw %d requests, want 4 (3 failures, then success)", len(calls))
		}
		wantGaps := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond} // capped
		for i, c := range calls {
			if id := c.header.Get("webhook-id"); id != calls[0].header.Get("webhook-id") {
				t.Errorf("attempt %d webhook-id = %q, want %q", i+1, id, calls[0].header.Get("webhook-id"))
			}
			if i > 0 {
				if gap := c.at.Sub(calls[i-1].at); gap < wantGaps[i-1]-2*time.Millisecond {
					t.Errorf("pause before attempt %d = %v, want at least %v", i+1, gap, wantGaps[i-1])
				}
			}
		}
		eventually(t, "delivery recorded", func() bool {
			ds, _ := sb.Deliveries(ctx)
			return len(ds) == 1 && ds[0].Delivered()
		})
		ds, _ := sb.Deliveries(ctx)
		if ds[0].Attempts != 4 || ds[0].LastStatus != 204 {
			t.Errorf("delivery = attempts %d, last status %d; want 4, 204", ds[0].Attempts, ds[0].LastStatus)
		}
	})
}

// Duplicates: N copies of each event, all with one webhook-id and body.
func TestWebhookDuplicates(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 0)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret, cfg.Duplicates = rcv.URL, secret, 3
		sb := sandboxtest.Start(t, cfg)
		if _, err := sb.Client.Charge(context.Background(), chargeReq("k", "pm_ok")); err != nil {
			t.Fatal(err)
		}
		got := rcv.waitAccepted(t, 3)
		time.Sleep(50 * time.Millisecond)
		if n := len(rcv.allCalls()); n != 3 {
			t.Fatalf("receiver saw %d requests, want 3", n)
		}
		for i, g := range got {
			if g.header.Get("webhook-id") != got[0].header.Get("webhook-id") || string(g.body) != string(got[0].body) {
				t.Errorf("copy %d differs from copy 1: id %q vs %q", i+1, g.header.Get("webhook-id"), got[0].header.Get("webhook-id"))
			}
		}
	})
}

// Reorder still delivers every event (exactly once without duplicates);
// and two sandbox processes sharing the outbox never send the same row twice.
func TestWebhookReorderAndSharedOutbox(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 0)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
		cfg.Reorder, cfg.ReorderWindow = true, 30*time.Millisecond
		a := sandboxtest.New(t, cfg) // charges go in here, with no workers of its own yet
		ctx := context.Background()
		const n = 20
		for i := range n {
			if _, err := a.Client.Charge(ctx, chargeReq(fmt.Sprintf("k%d", i), "pm_ok")); err != nil {
				t.Fatal(err)
			}
		}
		b := sandboxtest.New(t, cfg)
		for _, s := range []*sandboxtest.Sandbox{a, b} {
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rcv.waitAccepted(t, n)
		time.Sleep(100 * time.Millisecond)
		seen := map[string]int{}
		for _, c := range rcv.allCalls() {
			seen[c.header.Get("webhook-id")]++
		}
		if len(seen) != n {
			t.Errorf("distinct events = %d, want %d", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("event %s delivered %d times, want 1", id, k)
			}
		}
	})
}
