package domain

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// TestHoldClaimable: only an authorized order that no other action holds
// may be claimed, and a capture only before capture_before; a void or a
// lapse may come after it (the provider's word settles a lapsed hold).
func TestHoldClaimable(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Hour), now.Add(-time.Hour)
	held := Order{Status: StatusAuthorized, CaptureMethod: CaptureManual, CaptureBefore: &later}
	lapsed := held
	lapsed.CaptureBefore = &earlier
	busy := held
	busy.HoldAction = "ha_1"
	for _, k := range HoldActionKinds {
		if !held.HoldClaimable(k, now) {
			t.Errorf("%s of a free hold before capture_before refused", k)
		}
		if busy.HoldClaimable(k, now) {
			t.Errorf("%s of a hold another action holds allowed", k)
		}
		if got, want := lapsed.HoldClaimable(k, now), k != HoldCapture; got != want {
			t.Errorf("%s past capture_before = %v, want %v", k, got, want)
		}
		if !k.Event().From()[0].Valid() || len(k.Event().From()) != 1 || k.Event().From()[0] != StatusAuthorized {
			t.Errorf("%s settles by %s, which leaves from %v; want authorized only", k, k.Event(), k.Event().From())
		}
	}
	if (Order{Status: StatusAuthorized}).HoldClaimable(HoldCapture, now) {
		t.Error("a capture of a hold without capture_before allowed")
	}
	for _, s := range Statuses {
		o := Order{Status: s, CaptureMethod: CaptureManual, CaptureBefore: &later}
		if s != StatusAuthorized && o.HoldClaimable(HoldVoid, now) {
			t.Errorf("a void of a %s order allowed", s)
		}
	}
}

// TestCaptured: the money an order's charge took.
func TestCaptured(t *testing.T) {
	d := decimal.RequireFromString
	tests := []struct {
		o    Order
		want string
	}{
		{Order{Status: StatusPaid, Amount: d("12.00"), CaptureMethod: CaptureAutomatic}, "12.00"},
		{Order{Status: StatusRefunded, Amount: d("12.00")}, "12.00"},
		{Order{Status: StatusPending, Amount: d("12.00")}, "0"},
		{Order{Status: StatusAuthorized, Amount: d("12.00"), CaptureMethod: CaptureManual}, "0"},
		{Order{Status: StatusPaid, Amount: d("12.00"), CaptureMethod: CaptureManual, CapturedAmount: d("10.00")}, "10.00"},
		{Order{Status: StatusCancelled, Amount: d("12.00"), CaptureMethod: CaptureManual}, "0"},
		{Order{Status: StatusPaid, Amount: d("12.00"), CaptureMethod: CaptureManual}, "12.00"}, // charged whole, captured nothing
	}
	for _, tt := range tests {
		if got := tt.o.Captured(); !got.Equal(d(tt.want)) {
			t.Errorf("%s %s order of %s: Captured() = %s, want %s", tt.o.CaptureMethod, tt.o.Status, tt.o.Amount, got, tt.want)
		}
	}
}
