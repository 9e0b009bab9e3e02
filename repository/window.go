package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// windowRow is a row of reconcile_windows: one window of scheduled
// reconciliation, claimed by one replica at a time.
type windowRow struct {
	WindowTo    utcTime  `gorm:"column:window_to"`
	WindowFrom  utcTime  `gorm:"column:window_from"`
	ClaimedBy   string   `gorm:"column:claimed_by"`
	LockedUntil utcTime  `gorm:"column:locked_until"`
	Claims      int      `gorm:"column:claims"`
	RunID       *string  `gorm:"column:run_id"`
	CreatedAt   utcTime  `gorm:"column:created_at"`
	FinishedAt  *utcTime `gorm:"column:finished_at"`
}

// TableName tells GORM the table.
func (windowRow) TableName() string { return "reconcile_windows" }

func (r windowRow) toDomain() domain.ReconcileWindow {
	w := domain.ReconcileWindow{From: r.WindowFrom.time(), To: r.WindowTo.time(), ClaimedBy: r.ClaimedBy,
		LockedUntil: r.LockedUntil.time(), Claims: r.Claims, FinishedAt: timePtr(r.FinishedAt)}
	if r.RunID != nil {
		w.RunID = *r.RunID
	}
	return w
}

// WindowStore keeps the windows of scheduled reconciliation (ADR 0021).
// A window is done once: claimed by an INSERT (the primary key on its end
// lets one replica in), taken over only by a guarded UPDATE once the
// claimer's lease has lapsed without a run, and finished by a guarded
// UPDATE in the run's own transaction that only the current claimer can
// make.
type WindowStore struct{ db *DB }

// NewWindowStore returns a WindowStore on db.
func NewWindowStore(db *DB) *WindowStore { return &WindowStore{db: db} }

// Claim takes window [from, to) for owner until until, and reports whether
// it did: the first claimer inserts the row; later ones find it and may
// take it only if nobody finished it and its lease has lapsed (the claimer
// died or gave it back).
func (s *WindowStore) Claim(ctx context.Context, from, to time.Time, owner string, now, until time.Time) (bool, error) {
	row := windowRow{WindowTo: ts(to), WindowFrom: ts(from), ClaimedBy: owner, LockedUntil: ts(until), Claims: 1, CreatedAt: ts(now)}
	err := s.db.create(ctx, &row)
	if err == nil {
		return true, nil
	}
	if !isUniqueViolation(err) {
		return false, fmt.Errorf("claim reconcile window ending %v: %w", to, err)
	}
	return s.guarded(ctx, "take over", to, takeOverWindow, owner, ts(until), ts(to), ts(now))
}

// Finish records that owner's run runID reconciled the window ending at
// to, and reports whether owner still held it. Called inside the run's
// transaction, false rolls the run back: a claimer whose lease lapsed and
// was taken over records nothing.
func (s *WindowStore) Finish(ctx context.Context, to time.Time, owner, runID string, now time.Time) (bool, error) {
	return s.guarded(ctx, "finish", to, finishWindow, runID, ts(now), ts(to), owner)
}

// Release gives an unfinished window back at once (its run failed), so
// the next tick of any replica may claim it again without waiting out the
// lease.
func (s *WindowStore) Release(ctx context.Context, to time.Time, owner string, now time.Time) (bool, error) {
	return s.guarded(ctx, "release", to, releaseWindow, ts(now.Add(-time.Microsecond)), ts(to), owner)
}

// The window's guarded statements.
const (
	// takeOverWindow is Claim's, for a window claimed before: only an
	// unfinished one whose lease has lapsed.
	takeOverWindow = `UPDATE reconcile_windows
		SET claimed_by = ?, locked_until = ?, claims = claims + 1
		WHERE window_to = ? AND run_id IS NULL AND locked_until < ?`

	// finishWindow is Finish's: only by its claimer, once.
	finishWindow = `UPDATE reconcile_windows
		SET run_id = ?, finished_at = ?
		WHERE window_to = ? AND claimed_by = ? AND run_id IS NULL`

	// releaseWindow is Release's: only by its claimer, unfinished.
	releaseWindow = `UPDATE reconcile_windows
		SET locked_until = ?
		WHERE window_to = ? AND claimed_by = ? AND run_id IS NULL`
)

// guarded runs one of the window's guarded statements (DB.guarded), naming
// the window by its end in an error, written out only if there is one.
func (s *WindowStore) guarded(ctx context.Context, does string, to time.Time, query string, args ...any) (bool, error) {
	n, err := s.db.exec(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("%s reconcile window ending %v: %w", does, to, err)
	}
	return n == 1, nil
}

// Find returns the window ending at to, or domain.ErrWindowNotFound.
func (s *WindowStore) Find(ctx context.Context, to time.Time) (domain.ReconcileWindow, error) {
	var row windowRow
	if err := s.db.conn(ctx).Where("window_to = ?", ts(to)).Take(&row).Error; err != nil {
		return domain.ReconcileWindow{}, fmt.Errorf("find reconcile window ending %v: %w", to, notFound(err, domain.ErrWindowNotFound))
	}
	return row.toDomain(), nil
}
