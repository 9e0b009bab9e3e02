package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

func refundReq(key, chargeID, amount string) domain.ProviderRefundRequest {
	return domain.ProviderRefundRequest{IdempotencyKey: key, ChargeID: chargeID, Amount: dec(amount), Currency: "USD", Reason: "requested_by_customer"}
}

func TestRefunds(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		req := chargeReq("c1", "pm_ok")
		req.Amount = dec("10.00")
		ch, err := sb.Client.Charge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		refunded := func(want string) {
			t.Helper()
			got, err := sb.Client.GetCharge(ctx, "c1")
			if err != nil || !got.RefundedAmount.Equal(dec(want)) {
				t.Fatalf("GetCharge(c1).RefundedAmount = %v (%v), want %s", got.RefundedAmount, err, want)
			}
		}

		r1, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "4.00"))
		if err != nil || r1.Status != domain.ChargeSucceeded || !r1.Amount.Equal(dec("4.00")) || r1.ChargeID != ch.ID {
			t.Fatalf("Refund(r1) = %+v, %v; want 4.00 succeeded", r1, err)
		}
		replay, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "4.00"))
		if err != nil || replay.ID != r1.ID {
			t.Fatalf("Refund(r1 again) = %+v, %v; want the same refund %s", replay, err, r1.ID)
		}
		refunded("4.00")

		if _, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "5.00")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("Refund(r1, other amount) = %v, want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r2", ch.ID, "6.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(6.01 of 6.00 left) = %v, want refund_exceeds_charge", err)
		}
		refunded("4.00")

		r3, err := sb.Client.Refund(ctx, refundReq("r3", ch.ID, "6.00"))
		if err != nil {
			t.Fatalf("Refund(r3, the rest) = %v", err)
		}
		refunded("10.00")
		// A replay still answers after the charge is used up.
		if again, err := sb.Client.Refund(ctx, refundReq("r3", ch.ID, "6.00")); err != nil || again.ID != r3.ID {
			t.Errorf("Refund(r3 again) = %+v, %v; want %s", again, err, r3.ID)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r4", ch.ID, "0.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(fully refunded) = %v, want refund_exceeds_charge", err)
		}

		declined, _ := sb.Client.Charge(ctx, chargeReq("c2", "pm_declined"))
		if _, err := sb.Client.Refund(ctx, refundReq("r5", declined.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_not_refundable") {
			t.Errorf("Refund(declined charge) = %v, want charge_not_refundable", err)
		}
		eur := refundReq("r6", ch.ID, "1.00")
		eur.Currency = "EUR"
		if _, err := sb.Client.Refund(ctx, eur); !domain.IsProviderRequestError(err, "currency_mismatch") {
			t.Errorf("Refund(EUR of USD) = %v, want currency_mismatch", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r7", "ch_nope", "1.00")); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("Refund(unknown charge) = %v, want ErrChargeNotFound", err)
		}

		ds, _ := sb.Deliveries(ctx)
		var refundEvents int
		for _, d := range ds {
			if d.Type == "refund.succeeded" {
				refundEvents++
			}
		}
		if refundEvents != 2 {
			t.Errorf("refund.succeeded events = %d, want 2 (r1, r3)", refundEvents)
		}
	})
}

// Racing refunds can never give back more than was charged, and racing
// replays of one key refund once.
func TestRefundsConcurrent(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		req := chargeReq("c1", "pm_ok")
		req.Amount = dec("10.00")
		ch, err := sb.Client.Charge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg               sync.WaitGroup
			mu               sync.Mutex
			ok, exceeded     int
			sameKeyIDs       = map[string]bool{}
			unexpected       []error
			sameKeyRequested = 10
		)
		for i := range 20 {
			wg.Go(func() {
				_, err := sb.Client.Refund(ctx, refundReq(fmt.Sprintf("r%d", i), ch.ID, "1.00"))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case domain.IsProviderRequestError(err, "refund_exceeds_charge"):
					exceeded++
				default:
					unexpected = append(unexpected, err)
				}
			})
		}
		wg.Wait()
		if len(unexpected) > 0 || ok != 10 || exceeded != 10 {
			t.Fatalf("20 refunds of 1.00 on 10.00: %d ok, %d exceeded, errors %v; want 10 and 10", ok, exceeded, unexpected)
		}

		req = chargeReq("c2", "pm_ok")
		req.Amount = dec("5.00")
		ch2, _ := sb.Client.Charge(ctx, req)
		for range sameKeyRequested {
			wg.Go(func() {
				r, err := sb.Client.Refund(ctx, refundReq("same", ch2.ID, "3.00"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					unexpected = append(unexpected, err)
				}
				sameKeyIDs[r.ID] = true
			})
		}
		wg.Wait()
		if len(unexpected) > 0 || len(sameKeyIDs) != 1 {
			t.Fatalf("10 replays of one refund: ids %v, errors %v; want one id", sameKeyIDs, unexpected)
		}
		if got, _ := sb.Client.GetCharge(ctx, "c2"); !got.RefundedAmount.Equal(dec("3.00")) {
			t.Fatalf("RefundedAmount = %v, want 3.00", got.RefundedAmount)
		}
	})
}

// TestListRefunds: GET /v1/refunds lists the refunds created in [from, to),
// oldest first, each with its key, charge and the charge's order, and the
// settlement's refund lines name the same refunds.
func TestListRefunds(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		clk := &clock{}
		cfg := fastConfig(dbURL)
		cfg.Clock = clk.Now
		sb := sandboxtest.New(t, cfg)
		ctx := context.Background()
		day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
		clk.Set(day)
		ch, err := sb.Client.Charge(ctx, chargeReq("lr", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(day.Add(time.Hour))
		r1, err := sb.Client.Refund(ctx, refundReq("lr1", ch.ID, "1.00"))
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(day.Add(2 * time.Hour))
		r2, err := sb.Client.Refund(ctx, refundReq("lr2", ch.ID, "2.00"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := sb.Client.ListRefunds(ctx, day.Add(time.Hour), day.Add(2*time.Hour))
		if err != nil || len(got) != 1 || got[0].ID != r1.ID {
			t.Fatalf("ListRefunds(first hour) = %+v, %v; want only %s", got, err, r1.ID)
		}
		g := got[0]
		if g.IdempotencyKey != "lr1" || g.ChargeID != ch.ID || g.OrderID != "ord-lr" || !g.Amount.Equal(dec("1.00")) || g.Currency != "USD" ||
			g.Status != domain.ChargeSucceeded || !g.CreatedAt.Equal(day.Add(time.Hour)) {
			t.Errorf("listed refund = %+v, want lr1 of %s for ord-lr, 1.00 USD, succeeded, at %s", g, ch.ID, day.Add(time.Hour))
		}
		if got, err := sb.Client.ListRefunds(ctx, day, day.Add(24*time.Hour)); err != nil || len(got) != 2 || got[0].ID != r1.ID || got[1].ID != r2.ID {
			t.Errorf("ListRefunds(day) = %+v, %v; want %s then %s", got, err, r1.ID, r2.ID)
		}
		if status, _ := get(t, sb.URL+"/v1/refunds?from=2024-05-02T00:00:00Z&to=2024-05-01T00:00:00Z"); status != http.StatusBadRequest {
			t.Errorf("GET /v1/refunds with to before from = %d, want 400", status)
		}
	})
}
