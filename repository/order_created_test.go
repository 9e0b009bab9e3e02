package repository_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestTakeCreated: the order a store created is handed out once, exactly
// as FindByID reads it back (timestamps cut to the database's
// microseconds, money and items as stored), and only by the store that
// created it.
func TestTakeCreated(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := pendingOrder(newCustomer(t, db).ID)
		at := t0.Add(987 * time.Nanosecond) // finer than the database keeps
		o.CreatedAt, o.UpdatedAt, o.ExpiresAt = at, at, at.Add(time.Hour)
		o.Items[0].UnitPrice, o.CreateRequestID, o.CreateFingerprint = dec("4.5"), "create-1", "fp-1"
		o.Amount = domain.Total(o.Items)
		if err := s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		if _, ok := repository.NewOrderStore(db).TakeCreated(o.ID); ok {
			t.Errorf("another store (another replica) handed out an order it did not create")
		}
		got, ok := s.TakeCreated(o.ID)
		if !ok {
			t.Fatalf("TakeCreated(%s) = false right after Create", o.ID)
		}
		if read := findOrder(t, db, o.ID); !reflect.DeepEqual(got, read) {
			t.Errorf("TakeCreated = %+v\nFindByID    = %+v", got, read)
		}
		if _, ok := s.TakeCreated(o.ID); ok {
			t.Errorf("TakeCreated handed the same order out twice")
		}
	})
}

// TestClaimVersionGuard: a claim at a version the order is no longer at
// matches nothing and writes nothing (neither the order nor, through
// PayBatch, an attempt); at its version it claims; domain.AnyVersion
// claims whatever the version.
func TestClaimVersionGuard(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s, b := repository.NewOrderStore(db), repository.NewPayBatch(db)
		o := newOrder(t, db)
		// Claimed and released by another request: pending again, at version 3.
		if ok, err := s.Claim(t.Context(), o.ID, "req-0", o.Version, t0); !ok || err != nil {
			t.Fatalf("Claim(v%d) = %v, %v", o.Version, ok, err)
		}
		if ok, err := s.Release(t.Context(), o.ID, "req-0", testCause, t0); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		if ok, err := s.Claim(t.Context(), o.ID, "req-1", o.Version, t0); ok || err != nil {
			t.Errorf("OrderStore.Claim(stale v%d) = %v, %v, want false", o.Version, ok, err)
		}
		if ok, err := b.Claim(t.Context(), attemptFor(o, "req-1"), o.Version, t0); ok || err != nil {
			t.Errorf("PayBatch.Claim(stale v%d) = %v, %v, want false", o.Version, ok, err)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPending || got.Version != 3 || got.PayRequestID != "" {
			t.Errorf("after stale claims: %s v%d request %q, want pending v3 and no request", got.Status, got.Version, got.PayRequestID)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 0 {
			t.Errorf("a stale PayBatch.Claim recorded %d attempts", len(as))
		}
		if ok, err := b.Claim(t.Context(), attemptFor(o, "req-2"), 3, t0); !ok || err != nil {
			t.Errorf("PayBatch.Claim(v3) = %v, %v, want true", ok, err)
		}
		other := newOrder(t, db)
		if ok, err := s.Claim(t.Context(), other.ID, "req-3", domain.AnyVersion, t0); !ok || err != nil {
			t.Errorf("Claim(AnyVersion) = %v, %v, want true", ok, err)
		}
	})
}
