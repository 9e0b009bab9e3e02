package repository_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestWindowClaimOnce: of many replicas claiming one window at once,
// exactly one gets it; nobody takes it while the lease runs; after the
// lease lapses exactly one of many takes it over, and from then on only
// the new owner can finish it; a finished window is never claimed again.
func TestWindowClaimOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewWindowStore(dbtest.Open(t, d))
		to := t0.Truncate(time.Hour)
		from := to.Add(-2 * time.Hour)
		claimAll := func(now time.Time) (winners []string) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			var failed atomic.Int32
			for range 12 {
				wg.Go(func() {
					owner := newID()
					won, err := s.Claim(t.Context(), from, to, owner, now, now.Add(time.Minute))
					if err != nil {
						t.Errorf("Claim = %v", err)
						failed.Add(1)
					}
					if won {
						mu.Lock()
						winners = append(winners, owner)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			return winners
		}
		first := claimAll(t0)
		if len(first) != 1 {
			t.Fatalf("concurrent claims won by %d, want 1", len(first))
		}
		if again := claimAll(t0.Add(30 * time.Second)); len(again) != 0 {
			t.Errorf("claims within the lease won by %d, want 0", len(again))
		}
		later := claimAll(t0.Add(2 * time.Minute))
		if len(later) != 1 {
			t.Fatalf("claims after the lease won by %d, want 1 (a takeover)", len(later))
		}
		if ok, err := s.Finish(t.Context(), to, first[0], newID(), t0); ok || err != nil {
			t.Errorf("Finish by the lapsed owner = %v, %v; want false", ok, err)
		}
		if ok, err := s.Release(t.Context(), to, first[0], t0); ok || err != nil {
			t.Errorf("Release by the lapsed owner = %v, %v; want false", ok, err)
		}
		run := newID()
		if ok, err := s.Finish(t.Context(), to, later[0], run, t0.Add(2*time.Minute)); !ok || err != nil {
			t.Fatalf("Finish by the owner = %v, %v; want true", ok, err)
		}
		if ok, _ := s.Finish(t.Context(), to, later[0], newID(), t0.Add(2*time.Minute)); ok {
			t.Errorf("Finish twice = true, want false")
		}
		if won := claimAll(t0.Add(time.Hour)); len(won) != 0 {
			t.Errorf("claims of a finished window won by %d, want 0", len(won))
		}
		w, err := s.Find(t.Context(), to)
		if err != nil || w.RunID != run || w.Claims != 2 || !w.From.Equal(from) || w.FinishedAt == nil {
			t.Errorf("Find = %+v, %v; want finished by run %s after 2 claims, from %v", w, err, run, from)
		}
		if _, err := s.Find(t.Context(), to.Add(time.Hour)); !errors.Is(err, domain.ErrWindowNotFound) {
			t.Errorf("Find(unknown) = %v, want %v", err, domain.ErrWindowNotFound)
		}
	})
}

// TestWindowRelease: a window given back after a failed run is claimable
// at once, before its lease would have lapsed.
func TestWindowRelease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewWindowStore(dbtest.Open(t, d))
		to := t0.Truncate(time.Hour)
		owner := newID()
		if won, err := s.Claim(t.Context(), to.Add(-time.Hour), to, owner, t0, t0.Add(time.Hour)); !won || err != nil {
			t.Fatalf("Claim = %v, %v; want true", won, err)
		}
		if ok, err := s.Release(t.Context(), to, owner, t0); !ok || err != nil {
			t.Fatalf("Release = %v, %v; want true", ok, err)
		}
		if won, err := s.Claim(t.Context(), to.Add(-time.Hour), to, newID(), t0, t0.Add(time.Hour)); !won || err != nil {
			t.Errorf("Claim after Release = %v, %v; want true", won, err)
		}
	})
}
