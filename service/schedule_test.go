package service_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// schedule is w's scheduled reconciliation over windows (w's window
// store unless given). The window store shares the reconciler's database
// handle, so finishing a window joins the run's transaction.
func (w *world) schedule(t *testing.T, windows service.WindowStore) *service.ReconcileSchedule {
	if windows == nil {
		windows = repository.NewWindowStore(w.db)
	}
	return &service.ReconcileSchedule{Reconciler: w.reconciler, Windows: windows, Every: time.Hour,
		Lease: 5 * time.Minute, Timeout: time.Minute, Now: w.clock.Now}
}

// scheduledRuns lists the runs the schedule recorded, newest first.
func (w *world) scheduledRuns(t *testing.T) []domain.ReconciliationRun {
	t.Helper()
	page, err := repository.NewRunStore(dbtest.OpenURL(t, w.url)).List(t.Context(), domain.RunFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.ReconciliationRun
	for _, r := range page.Runs {
		if r.Source == "schedule" {
			out = append(out, r)
		}
	}
	return out
}

// TestScheduleOncePerWindow: three replicas ticking at once run the
// window once; ticking again in the same period runs nothing; the next
// period's window is run once and overlaps the last by a period; and the
// schedule reconciles for real (a charge behind payd's back is found).
func TestScheduleOncePerWindow(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		o := w.order(t, w.customer(t), "9.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "9.00")
		w.clock.Advance(time.Hour) // the charge lies inside the last closed period
		replicas := []*service.ReconcileSchedule{w.schedule(t, nil), w.replica().schedule(t, nil), w.replica().schedule(t, nil)}
		tickAll := func() int64 {
			var ran atomic.Int64
			var wg sync.WaitGroup
			for _, s := range replicas {
				wg.Go(func() {
					n, err := s.Tick(t.Context())
					if err != nil {
						t.Errorf("Tick = %v", err)
					}
					ran.Add(n)
				})
			}
			wg.Wait()
			return ran.Load()
		}
		if n := tickAll(); n != 1 {
			t.Fatalf("three replicas ticking at once ran %d windows, want 1", n)
		}
		if n := tickAll(); n != 0 {
			t.Errorf("ticking again in the same period ran %d, want 0", n)
		}
		w.clock.Advance(time.Hour)
		if n := tickAll(); n != 1 {
			t.Errorf("the next period ran %d windows, want 1", n)
		}
		runs := w.scheduledRuns(t)
		if len(runs) != 2 {
			t.Fatalf("scheduled runs = %d, want 2", len(runs))
		}
		last, first := runs[0], runs[1]
		if !last.To.Equal(first.To.Add(time.Hour)) || !last.From.Equal(first.To.Add(-time.Hour)) || !first.From.Equal(first.To.Add(-2*time.Hour)) {
			t.Errorf("windows [%v, %v) then [%v, %v), want two periods each, the second overlapping the first by one", first.From, first.To, last.From, last.To)
		}
		if first.New != 1 || last.Found != 1 || last.New != 0 {
			t.Errorf("runs found %d new then %d (%d new), want 1 new, then the same 1 again", first.New, last.Found, last.New)
		}
	})
}

// stealingWindows lets another replica take the window over right after
// this replica claimed it, as if this replica's lease had lapsed mid-run.
type stealingWindows struct {
	*repository.WindowStore
	clock interface{ Now() time.Time }
}

func (s stealingWindows) Claim(ctx context.Context, from, to time.Time, owner string, now, until time.Time) (bool, error) {
	won, err := s.WindowStore.Claim(ctx, from, to, owner, now, until)
	if err != nil || !won {
		return won, err
	}
	later := s.clock.Now().Add(time.Hour)
	if took, err := s.WindowStore.Claim(ctx, from, to, "thief", later, later.Add(time.Hour)); err != nil || !took {
		return false, errors.Join(err, errors.New("the thief did not get the window"))
	}
	return true, nil
}

// TestScheduleRunRolledBackWhenTakenOver: a replica whose claim was taken
// over while it ran records nothing — no run, no finding — and the window
// is the new claimer's to finish.
func TestScheduleRunRolledBackWhenTakenOver(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		o := w.order(t, w.customer(t), "9.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "9.00")
		w.clock.Advance(time.Hour)
		store := repository.NewWindowStore(w.db)
		s := w.schedule(t, stealingWindows{WindowStore: store, clock: w.clock})
		if n, err := s.Tick(t.Context()); n != 0 || err == nil {
			t.Fatalf("Tick after a takeover = %d, %v; want 0 and an error", n, err)
		}
		if runs := w.scheduledRuns(t); len(runs) != 0 {
			t.Errorf("scheduled runs = %d, want 0 (rolled back)", len(runs))
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Errorf("discrepancies = %d, want 0 (rolled back with the run)", len(ds))
		}
		_, to := s.Window(w.clock.Now())
		win, err := store.Find(t.Context(), to)
		if err != nil || win.ClaimedBy != "thief" || win.RunID != "" {
			t.Errorf("window = %+v, %v; want claimed by the thief, unfinished", win, err)
		}
	})
}

// failingWindows fails the first finish, as a lost connection would.
type failingWindows struct {
	*repository.WindowStore
	failed *atomic.Bool
}

func (f failingWindows) Finish(ctx context.Context, to time.Time, owner, runID string, now time.Time) (bool, error) {
	if f.failed.CompareAndSwap(false, true) {
		return false, errors.New("connection lost")
	}
	return f.WindowStore.Finish(ctx, to, owner, runID, now)
}

// TestScheduleRetriesAFailedWindow: a run that fails gives its window back
// at once, and the next tick (no lease to wait out) runs it.
func TestScheduleRetriesAFailedWindow(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		s := w.schedule(t, failingWindows{WindowStore: repository.NewWindowStore(w.db), failed: &atomic.Bool{}})
		if n, err := s.Tick(t.Context()); n != 0 || err == nil {
			t.Fatalf("Tick with a failing finish = %d, %v; want 0 and an error", n, err)
		}
		if n, err := s.Tick(t.Context()); n != 1 || err != nil {
			t.Fatalf("Tick after the failure = %d, %v; want 1 (the window given back)", n, err)
		}
		if runs := w.scheduledRuns(t); len(runs) != 1 {
			t.Errorf("scheduled runs = %d, want 1", len(runs))
		}
	})
}
