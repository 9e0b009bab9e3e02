package repository_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestCheckpointResumesAndFences: a checkpoint taken again returns the run
// and its pages as saved, findings and all; the owner it was taken from
// saves no more pages and cannot drop it; its new owner drops it once.
func TestCheckpointResumesAndFences(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		store := repository.NewCheckpointStore(db)
		ctx := t.Context()
		key, runID := uuid.NewString(), newID()
		cp, err := store.Take(ctx, key, "owner-a", runID, t0, t0)
		if err != nil {
			t.Fatalf("Take = %v", err)
		}
		if cp.RunID != runID || !cp.CreatedAt.Equal(t0) || len(cp.Pages) != 0 {
			t.Fatalf("new checkpoint = %+v, want run %s created at %s with no pages", cp, runID, t0)
		}
		found := domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: "ch_1", ChargeID: "ch_1", OrderID: "o1",
			ProviderAmount: dec("12.30"), LocalAmount: dec("0"), Currency: "EUR", Note: "n", DetectedAt: t0}
		pages := []domain.CheckpointPage{
			{N: 1, After: "ch_500", Matched: 499, Keys: []string{"k1", "k2"}, Found: []domain.Discrepancy{found}},
			{N: 2, After: "", Last: true, Matched: 3, Keys: []string{"k3"}},
		}
		for _, p := range pages {
			if err := store.Save(ctx, key, "owner-a", p, t0); err != nil {
				t.Fatalf("Save page %d = %v", p.N, err)
			}
		}
		// Another run with its own ID asks for the same key: it resumes
		// the first's run, not its own.
		again, err := store.Take(ctx, key, "owner-b", newID(), t0.Add(time.Hour), t0.Add(time.Minute))
		if err != nil {
			t.Fatalf("Take again = %v", err)
		}
		if again.RunID != runID || !again.CreatedAt.Equal(t0) || !again.Done() || again.After() != "" || len(again.Pages) != 2 {
			t.Fatalf("taken again = %+v, want run %s with its two pages, done", again, runID)
		}
		p1 := again.Pages[0]
		if p1.N != 1 || p1.After != "ch_500" || p1.Last || p1.Matched != 499 || len(p1.Keys) != 2 || len(p1.Found) != 1 {
			t.Fatalf("page 1 = %+v", p1)
		}
		if f := p1.Found[0]; f.Type != found.Type || f.ChargeID != "ch_1" || !f.ProviderAmount.Equal(found.ProviderAmount) ||
			f.Currency != "EUR" || !f.DetectedAt.Equal(t0) || f.Note != "n" {
			t.Errorf("page 1's finding = %+v, want %+v", f, found)
		}
		if err := again.Check(); err != nil {
			t.Errorf("Check = %v", err)
		}
		// The owner it was taken from is fenced off.
		if err := store.Save(ctx, key, "owner-a", domain.CheckpointPage{N: 3}, t0); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Save by the old owner = %v, want ErrRunTakenOver", err)
		}
		if dropped, err := store.Drop(ctx, key, "owner-a"); err != nil || dropped {
			t.Errorf("Drop by the old owner = %v, %v, want false", dropped, err)
		}
		if dropped, err := store.Drop(ctx, key, "owner-b"); err != nil || !dropped {
			t.Fatalf("Drop by the owner = %v, %v, want true", dropped, err)
		}
		fresh, err := store.Take(ctx, key, "owner-c", "run-new", t0, t0)
		if err != nil || fresh.RunID != "run-new" || len(fresh.Pages) != 0 {
			t.Errorf("Take after Drop = %+v, %v, want a new checkpoint without pages", fresh, err)
		}
	})
}

// TestCheckpointTakenOnceAtATime: processes that take one key at once all
// get the same run, and exactly one of them (the last to take it) can save
// a page.
func TestCheckpointTakenOnceAtATime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		store := repository.NewCheckpointStore(db)
		ctx := t.Context()
		key := uuid.NewString()
		const n = 8
		runs := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				cp, err := store.Take(ctx, key, "owner-"+string(rune('a'+i)), newID(), t0, t0)
				runs[i], errs[i] = cp.RunID, err
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Take %d = %v", i, errs[i])
			}
			if runs[i] != runs[0] {
				t.Fatalf("Take %d got run %s, Take 0 run %s: one key, one run", i, runs[i], runs[0])
			}
		}
		saved := 0
		for i := range n {
			err := store.Save(ctx, key, "owner-"+string(rune('a'+i)), domain.CheckpointPage{N: 1, After: "x"}, t0)
			switch {
			case err == nil:
				saved++
			case !errors.Is(err, domain.ErrRunTakenOver):
				t.Errorf("Save %d = %v", i, err)
			}
		}
		if saved != 1 {
			t.Errorf("%d owners saved a page, want 1", saved)
		}
	})
}
