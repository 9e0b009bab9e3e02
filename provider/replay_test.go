package provider_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// attemptOf is payd's record of an attempt charged by chargeReq(key, method).
func attemptOf(key, method string, status domain.AttemptStatus) domain.Attempt {
	r := chargeReq(key, method)
	return domain.Attempt{ID: key, OrderID: r.OrderID, Amount: r.Amount, Currency: domain.Currency(r.Currency),
		PaymentMethod: method, Status: status}
}

// TestGetChargeReplaysTheCreate: an attempt payd is still settling is
// never answered "not found" (ADR 0054). The sandbox holds every charge
// request (ChargeDelay) past the client's timeout, as a request delayed in
// transit. Asked while the first request is still held, GetCharge replays
// the create under the same key: whichever of the two requests the
// sandbox carries out first is the one charge, the other answers it, and
// every answer after says what the provider did. A settled attempt is
// only looked up, never charged by asking.
func TestGetChargeReplaysTheCreate(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		const hold = 600 * time.Millisecond
		sb := sandboxtest.New(t, sandbox.Config{DatabaseURL: dbURL, ChargeDelay: hold})
		cl := provider.NewClient(sb.URL, provider.WithTimeout(hold/3))
		ctx := context.Background()

		a := attemptOf("key-late", "pm_ok", domain.AttemptUnknown)
		if _, err := cl.Charge(ctx, chargeReq(a.ID, "pm_ok")); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Fatalf("Charge(held) = %v, want ErrProviderUnavailable (the client gave up)", err)
		}
		// The first request is still held at the sandbox: asking now must
		// not say "not found", and must not charge a second time.
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if ch, err := cl.GetCharge(ctx, a); err == nil || !errors.Is(err, domain.ErrProviderUnavailable) {
					t.Errorf("GetCharge(held) = %+v, %v; want an unknown outcome, not a verdict", ch, err)
				}
			})
		}
		wg.Wait()
		patient := provider.NewClient(sb.URL, provider.WithTimeout(5*hold))
		ch, err := patient.GetCharge(ctx, a)
		if err != nil || ch.Status != domain.ChargeSucceeded || ch.IdempotencyKey != a.ID {
			t.Fatalf("GetCharge(after the hold) = %+v, %v; want the key's succeeded charge", ch, err)
		}
		time.Sleep(2 * hold) // every replay still held lands now
		charges, err := sb.Server.Charges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(charges) != 1 || charges[0].ID != ch.ID {
			t.Fatalf("sandbox charges = %+v, want only %s", charges, ch.ID)
		}

		// A settled attempt the provider has no charge for is looked up,
		// and not charged by asking.
		settled := attemptOf("key-settled", "pm_ok", domain.AttemptFailed)
		if _, err := patient.GetCharge(ctx, settled); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Fatalf("GetCharge(settled, never sent) = %v, want ErrChargeNotFound", err)
		}
		// So is a key payd has no attempt for (an event named it).
		if _, err := patient.GetCharge(ctx, domain.Attempt{ID: "key-stranger", OrderID: "ord-x"}); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Fatalf("GetCharge(stranger) = %v, want ErrChargeNotFound", err)
		}
		if charges, _ = sb.Server.Charges(ctx); len(charges) != 1 {
			t.Fatalf("sandbox charges = %d, want still 1: asking about a settled attempt charged", len(charges))
		}
	})
}
