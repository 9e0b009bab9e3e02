package main

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// TestStubHonoursKeys talks to the stub through payd's own provider
// client: the same key is the same charge, other parameters under it are
// refused, and an unknown key is the provider's "not found".
func TestStubHonoursKeys(t *testing.T) {
	s, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ctx := provider.NewClient(s.URL), context.Background()
	req := domain.ChargeRequest{IdempotencyKey: "k1", OrderID: "o1", Amount: decimal.RequireFromString("9.99"), Currency: "USD", PaymentMethod: "pm_ok"}
	first, err := c.Charge(ctx, req)
	if err != nil || first.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(k1) = %+v, %v, want succeeded", first, err)
	}
	again, err := c.Charge(ctx, req)
	if err != nil || again.ID != first.ID {
		t.Errorf("Charge(k1) again = %q, %v, want the same charge %q", again.ID, err, first.ID)
	}
	other := req
	other.Amount = decimal.RequireFromString("1.00")
	if _, err := c.Charge(ctx, other); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
		t.Errorf("Charge(k1, other amount) = %v, want idempotency_key_reused", err)
	}
	if got, err := c.GetCharge(ctx, domain.Attempt{ID: "k1"}); err != nil || got.ID != first.ID {
		t.Errorf("GetCharge(k1) = %q, %v, want %q", got.ID, err, first.ID)
	}
	if _, err := c.GetCharge(ctx, domain.Attempt{ID: "nope"}); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Errorf("GetCharge(nope) = %v, want domain.ErrChargeNotFound", err)
	}
}
