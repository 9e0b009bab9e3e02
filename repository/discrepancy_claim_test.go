package repository_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestDiscrepancyClaim: of operators racing to resolve one discrepancy with
// different actions, exactly one claims it; only that action may settle it;
// an unclaimed discrepancy is open again.
func TestDiscrepancyClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		store := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		disc, _, err := store.Record(t.Context(), newDiscrepancy("ch_claim", newID(), t0))
		if err != nil {
			t.Fatal(err)
		}
		actions := []string{"apply", "refund", "ignore"}
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 15 {
			wg.Go(func() {
				action := actions[i%3]
				ok, err := store.Claim(t.Context(), disc.ID, action, t0)
				if err != nil {
					t.Errorf("Claim(%s) = %v", action, err)
				}
				if ok {
					wins.Add(1)
					winner.Store(action)
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("claims won = %d, want 1", n)
		}
		won := winner.Load().(string)
		for _, a := range actions {
			if a == won {
				continue
			}
			if ok, err := store.Settle(t.Context(), disc.ID, a, "", t0); ok || err != nil {
				t.Errorf("Settle(%s) of a claim by %s = %v, %v; want false, nil", a, won, ok, err)
			}
		}
		if ok, err := store.Unclaim(t.Context(), disc.ID, won); !ok || err != nil {
			t.Fatalf("Unclaim(%s) = %v, %v; want true", won, ok, err)
		}
		if got, _ := store.FindByID(t.Context(), disc.ID); got.Status != domain.DiscrepancyOpen || got.Resolution != "" {
			t.Errorf("after Unclaim: status %q resolution %q, want open and none", got.Status, got.Resolution)
		}
		if ok, _ := store.Claim(t.Context(), disc.ID, "ignore", t0); !ok {
			t.Fatal("Claim after Unclaim = false, want true")
		}
		if ok, err := store.Settle(t.Context(), disc.ID, "ignore", "accepted", t0); !ok || err != nil {
			t.Fatalf("Settle(ignore) = %v, %v; want true", ok, err)
		}
		got, _ := store.FindByID(t.Context(), disc.ID)
		if got.Status != domain.DiscrepancyResolved || got.Resolution != "ignore" || got.Note != "accepted" || got.ResolvedAt == nil {
			t.Errorf("settled = %+v, want resolved by ignore with its note and time", got)
		}
	})
}
