package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/payd/payd/domain"
)

// WindowStore keeps the windows of scheduled reconciliation.
type WindowStore interface {
	// Claim takes window [from, to) for owner until until; it reports
	// whether owner got it (first, or after the last claimer's lease lapsed
	// with no run recorded).
	Claim(ctx context.Context, from, to time.Time, owner string, now, until time.Time) (bool, error)
	// Finish records runID as the window's run if owner still holds it.
	Finish(ctx context.Context, to time.Time, owner, runID string, now time.Time) (bool, error)
	// Release gives owner's unfinished window back at once.
	Release(ctx context.Context, to time.Time, owner string, now time.Time) (bool, error)
}

// errWindowTaken rolls a scheduled run back: its claim lapsed and another
// replica holds the window now.
var errWindowTaken = errors.New("reconcile window taken over by another replica")

// ReconcileSchedule reconciles on its own every Every (PAYD_RECONCILE_EVERY,
// ADR 0021). Windows end on multiples of Every (UTC) and each covers two
// periods, so it overlaps the last by one whole period: a charge the
// provider settles late, or that a replica's clock placed at a window's
// edge, is seen by the next window too. Every replica ticks; the window
// claim lets one of them run each window, and the run and the window's
// "done" are committed together, so each window is reconciled exactly once.
type ReconcileSchedule struct {
	Reconciler *Reconciler
	// Windows must be on the same database handle as the Reconciler's
	// transactor: finishing a window joins the run's transaction.
	Windows WindowStore
	Every   time.Duration
	// Lease is how long a claim keeps other replicas off a window; a run
	// is cut off (Timeout) well before it lapses.
	Lease   time.Duration
	Timeout time.Duration
	Now     func() time.Time
	Log     *slog.Logger
}

// Window is the window the schedule reconciles at now: the last two
// periods up to the latest multiple of Every.
func (s *ReconcileSchedule) Window(now time.Time) (from, to time.Time) {
	to = now.UTC().Truncate(s.Every)
	return to.Add(-2 * s.Every), to
}

// Tick reconciles the current window if no replica has; it returns 1 when
// this replica ran it. It is the schedule's Job.Run.
func (s *ReconcileSchedule) Tick(ctx context.Context) (int64, error) {
	now := s.Now().UTC()
	from, to := s.Window(now)
	owner := newID()
	won, err := s.Windows.Claim(ctx, from, to, owner, now, now.Add(s.Lease))
	if err != nil || !won {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	run, err := s.Reconciler.Run(rctx, ReconcileRequest{From: from, To: to, Source: "schedule", Resume: "schedule",
		Guard: func(ctx context.Context, run domain.ReconciliationRun) error {
			ok, err := s.Windows.Finish(ctx, to, owner, run.ID, s.Now().UTC())
			if err == nil && !ok {
				err = errWindowTaken
			}
			return err
		}})
	if err != nil {
		// Given back at once, so the next tick of any replica retries it.
		// The release is detached from ctx: at shutdown the claim is still
		// handed back rather than left to its lease.
		rel, cancelRel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelRel()
		if _, relErr := s.Windows.Release(rel, to, owner, s.Now().UTC()); relErr != nil {
			err = errors.Join(err, relErr)
		}
		return 0, fmt.Errorf("scheduled reconciliation %v – %v: %w", from, to, err)
	}
	if s.Log != nil {
		s.Log.InfoContext(ctx, "scheduled reconciliation done", "run_id", run.ID, "from", from, "to", to,
			"matched", run.Matched, "found", run.Found, "new", run.New)
	}
	return 1, nil
}

// TickEvery is how often replicas look for a new window: often enough
// that a window starts soon after it closes, never more than every 30s.
func (s *ReconcileSchedule) TickEvery() time.Duration {
	return min(max(s.Every/4, 100*time.Millisecond), 30*time.Second)
}
