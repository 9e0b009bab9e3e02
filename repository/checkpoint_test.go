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
// and its pages as saved, the charges to decide again and all; the owner
// it was taken from saves no more pages, holds nothing and cannot record
// it; its new owner records it once, and a checkpoint taken after that
// says the run is recorded, with no pages. Dropped, it is gone.
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
		disagreed := domain.Charge{ID: "ch_1", IdempotencyKey: "k1", OrderID: "o1", Amount: dec("12.30"), Currency: "EUR",
			PaymentMethod: "pm_ok", Status: domain.ChargeSucceeded, RefundedAmount: dec("1.30"), DisputedAmount: dec("0"), CreatedAt: t0}
		pages := []domain.CheckpointPage{
			{N: 1, After: "ch_500", Matched: 499, Keys: []string{"k1", "k2"}, Recheck: []domain.Charge{disagreed}},
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
		if again.RunID != runID || !again.CreatedAt.Equal(t0) || !again.Done() || again.After() != "" || len(again.Pages) != 2 ||
			again.Recorded || !again.Saved.Equal(t0) {
			t.Fatalf("taken again = %+v, want run %s with its two pages, done", again, runID)
		}
		p1 := again.Pages[0]
		if p1.N != 1 || p1.After != "ch_500" || p1.Last || p1.Matched != 499 || len(p1.Keys) != 2 || len(p1.Recheck) != 1 {
			t.Fatalf("page 1 = %+v", p1)
		}
		if c := p1.Recheck[0]; c.ID != "ch_1" || c.IdempotencyKey != "k1" || c.OrderID != "o1" || !c.Amount.Equal(disagreed.Amount) ||
			c.Currency != "EUR" || c.Status != domain.ChargeSucceeded || !c.RefundedAmount.Equal(disagreed.RefundedAmount) ||
			!c.CreatedAt.Equal(t0) || c.PaymentMethod != "pm_ok" {
			t.Errorf("page 1's charge to decide again = %+v, want %+v", c, disagreed)
		}
		if err := again.Check(); err != nil {
			t.Errorf("Check = %v", err)
		}
		// The owner it was taken from is fenced off.
		if err := store.Save(ctx, key, "owner-a", domain.CheckpointPage{N: 3}, t0); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Save by the old owner = %v, want ErrRunTakenOver", err)
		}
		if err := store.Hold(ctx, key, "owner-a", t0); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Hold by the old owner = %v, want ErrRunTakenOver", err)
		}
		if err := store.Record(ctx, key, "owner-a", t0); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Record by the old owner = %v, want ErrRunTakenOver", err)
		}
		if dropped, err := store.Drop(ctx, key, "owner-a"); err != nil || dropped {
			t.Errorf("Drop by the old owner = %v, %v, want false", dropped, err)
		}
		if err := store.Hold(ctx, key, "owner-b", t0); err != nil {
			t.Errorf("Hold by the owner = %v", err)
		}
		if err := store.Record(ctx, key, "owner-b", t0.Add(time.Minute)); err != nil {
			t.Fatalf("Record by the owner = %v", err)
		}
		if err := store.Record(ctx, key, "owner-b", t0.Add(time.Minute)); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Record again = %v, want ErrRunTakenOver: a run is recorded once", err)
		}
		done, err := store.Take(ctx, key, "owner-c", newID(), t0, t0.Add(2*time.Minute))
		if err != nil || !done.Recorded || done.RunID != runID || len(done.Pages) != 0 {
			t.Fatalf("Take after Record = %+v, %v; want run %s, recorded, no pages", done, err, runID)
		}
		if err := store.Save(ctx, key, "owner-c", domain.CheckpointPage{N: 1}, t0); !errors.Is(err, domain.ErrRunTakenOver) {
			t.Errorf("Save to a recorded run = %v, want ErrRunTakenOver", err)
		}
		if dropped, err := store.Drop(ctx, key, "owner-c"); err != nil || !dropped {
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
