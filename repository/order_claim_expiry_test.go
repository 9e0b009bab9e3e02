package repository_test

import (
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestOrderClaimRefusesExpired: the claim's own WHERE clause refuses an
// order at or past its expires_at, while it is still pending (the expiry
// job has not run), and leaves the row untouched; a microsecond before, it
// claims.
func TestOrderClaimRefusesExpired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := newOrder(t, db) // expires at t0 + 1h
		for _, at := range []time.Time{o.ExpiresAt, o.ExpiresAt.Add(time.Minute)} {
			if ok, err := s.Claim(t.Context(), o.ID, "req-1", o.Version, at); ok || err != nil {
				t.Errorf("Claim(at %v, expires %v) = %v, %v, want false", at, o.ExpiresAt, ok, err)
			}
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPending || got.Version != 1 {
			t.Errorf("order after refused claims = %s v%d, want pending v1", got.Status, got.Version)
		}
		if ok, err := s.Claim(t.Context(), o.ID, "req-1", o.Version, o.ExpiresAt.Add(-time.Microsecond)); !ok || err != nil {
			t.Errorf("Claim(just before expiry) = %v, %v, want true", ok, err)
		}
	})
}
