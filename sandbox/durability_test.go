package sandbox_test

import (
	"context"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// A sandbox that stops (as if killed) forgets nothing: after a restart on
// the same database its charges are still there, the webhook it owed is
// still owed and is delivered, and a charge left pending resolves.
func TestDurableAcrossRestart(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		secret := sandboxtest.Secret(t)
		cfg := fastConfig(dbURL)
		cfg.WebhookSecret = secret // no URL yet: webhooks wait in the outbox

		first := sandboxtest.New(t, cfg)
		ok, err := first.Client.Charge(ctx, chargeReq("ok", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Client.Charge(ctx, chargeReq("async", "pm_async")); err != nil {
			t.Fatal(err)
		}
		first.Shutdown()

		rcv := newReceiver(t, secret, 0)
		cfg.WebhookURL = rcv.URL
		second := sandboxtest.New(t, cfg)
		got, err := second.Client.GetCharge(ctx, domain.Attempt{ID: "ok"})
		if err != nil || got.ID != ok.ID || got.Status != domain.ChargeSucceeded {
			t.Fatalf("GetCharge(ok) after restart = %+v, %v; want %s succeeded", got, err, ok.ID)
		}
		if got, _ := second.Client.GetCharge(ctx, domain.Attempt{ID: "async"}); got.Status != domain.ChargePending {
			t.Fatalf("GetCharge(async) after restart = %s, want still pending", got.Status)
		}
		ds, err := second.Deliveries(ctx)
		if err != nil || len(ds) != 1 || ds[0].Delivered() || ds[0].Type != "payment.succeeded" {
			t.Fatalf("outbox after restart = %+v, %v; want one pending payment.succeeded", ds, err)
		}
		// A replay after the restart is still the same charge.
		if again, err := second.Client.Charge(ctx, chargeReq("ok", "pm_ok")); err != nil || again.ID != ok.ID {
			t.Fatalf("Charge(ok) replay after restart = %+v, %v; want %s", again, err, ok.ID)
		}

		if err := second.Start(ctx); err != nil {
			t.Fatal(err)
		}
		evs := rcv.waitAccepted(t, 2)
		if len(byKey(evs, "ok")) != 1 || len(byKey(evs, "async")) != 1 {
			t.Fatalf("after restart delivered %d events, want one for ok and one for async", len(evs))
		}
		if got, _ := second.Client.GetCharge(ctx, domain.Attempt{ID: "async"}); got.Status != domain.ChargeSucceeded {
			t.Errorf("GetCharge(async) = %s, want succeeded", got.Status)
		}
		if charges, _ := second.Charges(ctx); len(charges) != 2 {
			t.Errorf("charges = %d, want 2", len(charges))
		}
	})
}
