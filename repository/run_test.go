package repository_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func newRun(source string) domain.ReconciliationRun {
	return domain.ReconciliationRun{ID: newID(), Source: source, From: t0.Add(-24 * time.Hour), To: t0, CreatedAt: t0}
}

func findRun(t *testing.T, s *repository.RunStore, id string) domain.ReconciliationRun {
	t.Helper()
	r, err := s.FindByID(t.Context(), id)
	if err != nil {
		t.Fatalf("FindByID(run %s) = %v", id, err)
	}
	return r
}

func TestRunCreateAndFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRunStore(dbtest.Open(t, d))
		run := newRun("csv")
		run.DryRun = true
		if err := s.Create(t.Context(), run); err != nil {
			t.Fatalf("Create(run) = %v", err)
		}
		want := run
		want.Discrepancies = []domain.Discrepancy{}
		if got := findRun(t, s, run.ID); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("FindByID = %+v, want %+v", got, want)
		}

		finished := t0.Add(time.Minute)
		run.Matched, run.Found, run.New, run.FinishedAt = 40, 3, 2, &finished
		if err := s.Finish(t.Context(), run); err != nil {
			t.Fatalf("Finish = %v", err)
		}
		got := findRun(t, s, run.ID)
		if got.Matched != 40 || got.Found != 3 || got.New != 2 || got.FinishedAt == nil || !got.FinishedAt.Equal(finished) || !got.DryRun {
			t.Errorf("after Finish: %+v, want matched 40, found 3, new 2, finished %v, dry run", got, finished)
		}

		missing := newRun("provider")
		missing.FinishedAt = &finished
		if err := s.Finish(t.Context(), missing); !errors.Is(err, domain.ErrRunNotFound) {
			t.Errorf("Finish(unknown run) = %v, want %v", err, domain.ErrRunNotFound)
		}
		run.FinishedAt = nil
		if err := s.Finish(t.Context(), run); err == nil {
			t.Errorf("Finish(no finish time) = nil error, want an error")
		}
		if _, err := s.FindByID(t.Context(), newID()); !errors.Is(err, domain.ErrRunNotFound) {
			t.Errorf("FindByID(unknown) = %v, want %v", err, domain.ErrRunNotFound)
		}
	})
}

// TestRunFindings: a run lists the discrepancies it saw, each once, oldest
// first, including ones an earlier run recorded; another run's findings
// stay its own.
func TestRunFindings(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s, discrepancies := repository.NewRunStore(db), repository.NewDiscrepancyStore(db)
		earlier, rerun := newRun("provider"), newRun("provider")
		for _, r := range []domain.ReconciliationRun{earlier, rerun} {
			if err := s.Create(t.Context(), r); err != nil {
				t.Fatalf("Create(run) = %v", err)
			}
		}
		known := newDiscrepancy("ch_known", newID(), t0)
		known.RunID = earlier.ID
		known = record(t, discrepancies, known)
		fresh := newDiscrepancy("ch_new", newID(), t0.Add(time.Second))
		fresh.RunID = rerun.ID
		fresh = record(t, discrepancies, fresh)

		adds := [][2]string{
			{earlier.ID, known.ID},
			{rerun.ID, fresh.ID}, {rerun.ID, known.ID}, {rerun.ID, fresh.ID}, // fresh twice: idempotent
		}
		for _, a := range adds {
			if err := s.AddFinding(t.Context(), a[0], a[1]); err != nil {
				t.Errorf("AddFinding(%s, %s) = %v", a[0], a[1], err)
			}
		}
		got := findRun(t, s, rerun.ID)
		if want := []domain.Discrepancy{known, fresh}; fmt.Sprint(got.Discrepancies) != fmt.Sprint(want) {
			t.Errorf("FindByID(rerun).Discrepancies = %+v\nwant %+v", got.Discrepancies, want)
		}
		if got := findRun(t, s, earlier.ID); len(got.Discrepancies) != 1 || got.Discrepancies[0].ID != known.ID {
			t.Errorf("FindByID(earlier).Discrepancies = %+v, want [%s]", got.Discrepancies, known.ID)
		}
	})
}
