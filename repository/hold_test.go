package repository_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// heldMugs stores a manual-capture order of qty mugs, claimed by req-1
// and authorized until capture_before.
func heldMugs(t *testing.T, db *repository.DB, qty int64, captureBefore time.Time) domain.Order {
	t.Helper()
	s := repository.NewOrderStore(db)
	o := pendingOrder(newCustomer(t, db).ID)
	o.Items = []domain.Item{{SKU: "mug", Name: "Mug", Quantity: qty, UnitPrice: dec("12.00")}}
	o.Amount = domain.Total(o.Items)
	o.CaptureMethod = domain.CaptureManual
	createOrder(t, db, o)
	if ok, err := s.Claim(t.Context(), o.ID, "req-1", domain.AnyVersion, t0); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if ok, err := s.MarkAuthorized(t.Context(), o.ID, "req-1", captureBefore, domain.Cause{Kind: domain.CausePayRequest, Ref: "req-1"}, t0); !ok || err != nil {
		t.Fatalf("MarkAuthorized = %v, %v", ok, err)
	}
	return findOrder(t, db, o.ID)
}

// claimHold records action a as its order's hold owner, in one
// transaction, as the service does: false when another owns it.
func claimHold(ctx context.Context, db *repository.DB, a domain.HoldAction, now time.Time) (bool, error) {
	orders, actions := repository.NewOrderStore(db), repository.NewHoldActionStore(db)
	var won bool
	err := repository.NewTransactor(db).InTx(ctx, func(ctx context.Context) error {
		var err error
		if won, err = orders.ClaimHold(ctx, a, now); err != nil || !won {
			return err
		}
		return actions.Create(ctx, a)
	})
	return won, err
}

func holdAction(o domain.Order, k domain.HoldActionKind, request string) domain.HoldAction {
	a := domain.HoldAction{ID: newID(), OrderID: o.ID, Kind: k, Currency: o.Currency, RequestID: request,
		Status: domain.HoldActionStarted, CreatedAt: t0, UpdatedAt: t0, LeasedUntil: t0.Add(time.Minute)}
	if k == domain.HoldCapture {
		a.Amount = o.Amount
	}
	return a
}

// TestMarkAuthorized: a manual order's pay leaves it authorized until
// capture_before, for the request that claimed it only, with its
// order.authorized event.
func TestMarkAuthorized(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		before := t0.Add(7 * 24 * time.Hour)
		o := heldMugs(t, db, 2, before)
		if o.Status != domain.StatusAuthorized || o.CaptureMethod != domain.CaptureManual || o.CaptureBefore == nil ||
			!o.CaptureBefore.Equal(before) || o.HoldAction != "" || o.PaidAt != nil || o.Version != 3 {
			t.Errorf("authorized order = %+v; want authorized until %v, version 3, not paid", o, before)
		}
		if ok, err := s.MarkAuthorized(t.Context(), o.ID, "req-1", before, testCause, t0); ok || err != nil {
			t.Errorf("MarkAuthorized again = %v, %v; want false", ok, err)
		}
		events, err := s.EventsOf(t.Context(), o.ID)
		if err != nil || len(events) != 1 || events[0].Type != domain.NotifyOrderAuthorized || events[0].OrderStatus != domain.StatusAuthorized {
			t.Errorf("events = %+v, %v; want one order.authorized", events, err)
		}
		other := pendingOrder(newCustomer(t, db).ID)
		createOrder(t, db, other)
		if ok, err := s.Claim(t.Context(), other.ID, "req-1", domain.AnyVersion, t0); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := s.MarkAuthorized(t.Context(), other.ID, "req-2", before, testCause, t0); ok || err != nil {
			t.Errorf("MarkAuthorized by another request = %v, %v; want false", ok, err)
		}
	})
}

// TestHoldRace: 20 captures and voids of one hold at once, each claiming
// it with its own action, on both databases: exactly one owns it and one
// action is recorded; the hold then ends once, by its owner only.
func TestHoldRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := heldMugs(t, db, 2, t0.Add(time.Hour))
		stores := make([]*repository.DB, 20)
		for i := range stores {
			stores[i] = db
		}
		winner, actions := holdRace(t, o, stores)
		s := repository.NewOrderStore(db)
		if got := findOrder(t, db, o.ID); got.HoldAction != winner.ID || got.Status != domain.StatusAuthorized {
			t.Errorf("after the race the order = %s owned by %q; want authorized, owned by the winner %s", got.Status, got.HoldAction, winner.ID)
		}
		var count int64
		if err := db.Gorm().Raw(`SELECT COUNT(*) FROM hold_actions WHERE order_id = ?`, o.ID).Scan(&count).Error; err != nil || count != 1 {
			t.Errorf("%d hold actions recorded (%v), want 1", count, err)
		}
		for _, a := range actions {
			if a.ID == winner.ID {
				continue
			}
			if ok, err := s.EndHold(t.Context(), a, a.Amount, testCause, t0); ok || err != nil {
				t.Fatalf("a loser ended the hold: %v, %v", ok, err)
			}
		}
		captured := decimal.Zero
		if winner.Kind == domain.HoldCapture {
			captured = dec("20.00")
		}
		if ok, err := s.EndHold(t.Context(), winner, captured, testCause, t0); !ok || err != nil {
			t.Fatalf("the winner's EndHold = %v, %v", ok, err)
		}
		if ok, err := s.EndHold(t.Context(), winner, captured, testCause, t0); ok || err != nil {
			t.Errorf("the winner's EndHold again = %v, %v; want false", ok, err)
		}
		got := findOrder(t, db, o.ID)
		want := domain.StatusCancelled
		if winner.Kind == domain.HoldCapture {
			want = domain.StatusPaid
		}
		if got.Status != want || got.HoldAction != "" || !got.CapturedAmount.Equal(captured) {
			t.Errorf("after %s the order = %s, owner %q, captured %s; want %s, none, %s", winner.Kind, got.Status, got.HoldAction, got.CapturedAmount, want, captured)
		}
		if ok, err := claimHold(t.Context(), db, holdAction(got, domain.HoldVoid, "late"), t0); ok || err != nil {
			t.Errorf("a claim of an ended hold = %v, %v; want false", ok, err)
		}
	})
}

// holdRace claims o's hold with one action per store at once, captures and
// voids in turn, and returns the one that won and all of them; it fails
// the test unless exactly one won.
func holdRace(t *testing.T, o domain.Order, dbs []*repository.DB) (domain.HoldAction, []domain.HoldAction) {
	t.Helper()
	actions := make([]domain.HoldAction, len(dbs))
	won := make([]bool, len(dbs))
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		k := domain.HoldCapture
		if i%2 == 1 {
			k = domain.HoldVoid
		}
		actions[i] = holdAction(o, k, fmt.Sprintf("req-%d", i))
		wg.Go(func() { won[i], errs[i] = claimHold(t.Context(), db, actions[i], t0) })
	}
	wg.Wait()
	var winners []domain.HoldAction
	for i := range dbs {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if won[i] {
			winners = append(winners, actions[i])
		}
	}
	if len(winners) != 1 {
		t.Fatalf("order %s: %d claims of one hold won, want 1", o.ID, len(winners))
	}
	return winners[0], actions
}

// TestClaimHoldGuards: a capture only before capture_before, a void or a
// lapse after it too; nothing claims an order that is not held.
func TestClaimHoldGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := heldMugs(t, db, 1, t0.Add(time.Hour))
		late := t0.Add(time.Hour)
		if ok, err := claimHold(t.Context(), db, holdAction(o, domain.HoldCapture, "cap"), late); ok || err != nil {
			t.Errorf("a capture at capture_before = %v, %v; want refused", ok, err)
		}
		if ok, err := claimHold(t.Context(), db, holdAction(o, domain.HoldLapse, ""), late); !ok || err != nil {
			t.Errorf("a lapse at capture_before = %v, %v; want claimed", ok, err)
		}
		paid := paidMugs(t, db, 1)
		if ok, err := claimHold(t.Context(), db, holdAction(paid, domain.HoldVoid, "void"), t0); ok || err != nil {
			t.Errorf("a void of a paid order = %v, %v; want refused", ok, err)
		}
		due, err := repository.NewOrderStore(db).DueHolds(t.Context(), late, 10)
		if err != nil || len(due) != 0 {
			t.Errorf("DueHolds with the only due hold owned = %v, %v; want none", due, err)
		}
	})
}
