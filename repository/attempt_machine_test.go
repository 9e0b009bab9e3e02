package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// attemptStep is the store's statement for one event of the attempt state
// machine, run on attempt a at now.
type attemptStep func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error)

// attemptSteps maps every event of domain's attempt table to the named
// transition that performs it. Adopt is told the status the attempt
// stands in, as its callers pass the status they read.
var attemptSteps = map[domain.AttemptEvent]attemptStep{
	domain.AttemptReplyLost: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.MarkUnknown(ctx, a.ID, "ch_machine", now)
	},
	domain.AttemptCharged: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Succeed(ctx, a.ID, "ch_machine", now)
	},
	domain.AttemptNotCharged: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Fail(ctx, a.ID, "ch_machine", "card_declined", now)
	},
	domain.AttemptMismatched: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Hold(ctx, a.ID, "ch_machine", now)
	},
	domain.AttemptChargedLate: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Adopt(ctx, a.ID, a.Status, "ch_machine", now)
	},
	domain.AttemptApplied: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Apply(ctx, a.ID, "ch_machine", now)
	},
	domain.AttemptRejected: func(ctx context.Context, s *repository.AttemptStore, a domain.Attempt, now time.Time) (bool, error) {
		return s.Reject(ctx, a.ID, now)
	},
}

// attemptIn stores an attempt standing in status.
func attemptIn(t *testing.T, db *repository.DB, s *repository.AttemptStore, status domain.AttemptStatus) domain.Attempt {
	t.Helper()
	a := newAttempt(t, s, newOrder(t, db), machineRequest, t0)
	if err := db.Gorm().Exec("UPDATE payment_attempts SET status = ? WHERE id = ?", string(status), a.ID).Error; err != nil {
		t.Fatal(err)
	}
	return findAttempt(t, s, a.ID)
}

// TestAttemptMachineMatchesTable runs every event of the attempt state
// machine from every status, on both databases, and checks the store's
// named transitions against domain's table: an event applies exactly
// where the table allows it, moving the one row to the status the table
// names; anywhere else the statement matches nothing and the row is left
// as it was.
func TestAttemptMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		later := t0.Add(time.Minute)
		for _, ev := range domain.AttemptEvents {
			step, ok := attemptSteps[ev]
			if !ok {
				t.Fatalf("event %s has no store statement in this test", ev)
			}
			for _, from := range domain.AttemptStatuses {
				a := attemptIn(t, db, s, from)
				applied, err := step(t.Context(), s, a, later)
				if err != nil {
					t.Fatalf("%s from %s: %v", ev, from, err)
				}
				want, allowed := domain.NextAttempt(from, ev)
				got := findAttempt(t, s, a.ID)
				switch {
				case allowed && !applied:
					t.Errorf("%s from %s did not apply; the table says it leads to %s", ev, from, want)
				case !allowed && applied:
					t.Errorf("%s from %s applied (now %s); the table has no such transition", ev, from, got.Status)
				case allowed && (got.Status != want || !got.UpdatedAt.Equal(later)):
					t.Errorf("%s from %s led to %s (updated %v), the table says %s (updated %v)", ev, from, got.Status, got.UpdatedAt, want, later)
				case !allowed && fmt.Sprint(got) != fmt.Sprint(a):
					t.Errorf("%s from %s refused but changed the row: %+v, was %+v", ev, from, got, a)
				}
			}
		}
	})
}
