package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// The overview's rollup (ADR 0065, migration 00029). Counting 90 days of
// attempts and ledger entries, at ten million orders, reads tens of
// millions of index entries: seconds, not milliseconds. So each UTC hour
// that is over is counted once, by a background job, into
// stats_attempt_hours (attempts by status) and stats_ledger_hours
// (entries by kind and currency), and the overview adds up those rows for
// the whole hours of its window and counts the rest, at most its two ends
// and the hours not yet rolled, from the tables as before.
//
// A ledger entry never changes, and every row is written with its
// created_at of the moment, so an hour that ended rollupSettle ago gets no
// new rows. An attempt's status does change after its hour is rolled (a
// lost reply resolved, a late charge adopted, an operator's decision):
// each pass finds the attempts changed since the last pass began, less a
// margin for a transaction still open then, through payment_attempts_status
// (status, updated_at, created_at), and counts their hours again.
//
// One replica rolls at a time, under a lease in the state row (the
// guarded UPDATE of every job), so an hour is never counted by two passes
// at once. Counting an hour again is idempotent: its rows are replaced in
// one transaction, and the overview sees the old counts or the new ones.

// rollupNever is the state's times before the first pass (migration 00029).
var rollupNever = time.Unix(0, 0).UTC()

// RollupPass is how one pass of the rollup runs.
type RollupPass struct {
	Now time.Time
	// Settle: an hour is rolled once it ended this long ago.
	Settle time.Duration
	// Margin: the attempts changed this long before the last pass began
	// are looked at again.
	Margin time.Duration
	// Lease is how long the pass may hold the rollup before another
	// replica may take it.
	Lease time.Duration
	// MaxHours bounds the hours one pass rolls for the first time.
	MaxHours int
}

var (
	rollupTake    = `UPDATE stats_rollup SET leased_until = ? WHERE id = 1 AND (leased_until IS NULL OR leased_until <= ?)`
	rollupRelease = `UPDATE stats_rollup SET leased_until = NULL WHERE id = 1 AND leased_until = ?`
	rollupState   = `SELECT rolled_through, changes_seen FROM stats_rollup WHERE id = 1`

	// rollupFirst: the earliest row at or after a time, of either table
	// (each a MIN read from its created_at index).
	rollupFirst = `SELECT (SELECT MIN(created_at) FROM payment_attempts WHERE created_at >= ?),
		(SELECT MIN(created_at) FROM ledger_entries WHERE created_at >= ?)`

	// rollupChanged: the hours, among those rolled, of the attempts
	// changed since a time; payment_attempts_status holds all three
	// columns, so the index alone answers.
	rollupChanged = `SELECT DISTINCT SUBSTR(created_at, 1, 13) FROM payment_attempts
		WHERE status IN ` + sqlStatuses(domain.AttemptStatuses...) + ` AND updated_at >= ? AND created_at < ?`

	rollupClearAttempts = `DELETE FROM stats_attempt_hours WHERE hour = ?`
	rollupClearLedger   = `DELETE FROM stats_ledger_hours WHERE hour = ?`
	rollupAttempts      = `INSERT INTO stats_attempt_hours (hour, status, n)
		SELECT ?, status, COUNT(*) FROM payment_attempts WHERE created_at >= ? AND created_at < ? GROUP BY status`
	rollupLedger = `INSERT INTO stats_ledger_hours (hour, kind, currency, n, amount_minor)
		SELECT ?, kind, currency, COUNT(*), SUM(amount_minor) FROM ledger_entries
		WHERE created_at >= ? AND created_at < ? AND kind IN ` + statsLedgerKinds + ` GROUP BY kind, currency`
	rollupAdvance = `UPDATE stats_rollup SET rolled_through = ? WHERE id = 1`
	rollupSeen    = `UPDATE stats_rollup SET changes_seen = ? WHERE id = 1`
)

// Roll runs one pass of the rollup: the hours over since the last pass,
// at most p.MaxHours of them, then again the hours of the attempts
// changed since. It returns how many hours it counted; 0, and no error,
// when another replica holds the rollup.
func (s *StatsStore) Roll(ctx context.Context, p RollupPass) (int, error) {
	until := p.Now.Add(p.Lease)
	taken, err := s.db.guarded(ctx, act{"take the stats rollup", ""}, rollupTake, ts(until), ts(p.Now))
	if err != nil || !taken {
		return 0, err
	}
	defer s.db.exec(context.WithoutCancel(ctx), rollupRelease, ts(until)) //nolint:errcheck // the lease ends by itself

	var through, seen utcTime
	if err := s.db.queryRow(ctx, rollupState).Scan(&through, &seen); err != nil {
		return 0, fmt.Errorf("read the stats rollup: %w", err)
	}
	rolledBefore := through.time()
	horizon := p.Now.Add(-p.Settle).Truncate(time.Hour)

	// Hours rolled for the first time. An empty stretch (the years before
	// the first order, a shop idle for a weekend) is stepped over to the
	// next hour that has rows, not counted hour by hour.
	hours := 0
	for hour := rolledBefore; hours < p.MaxHours; hour = hour.Add(time.Hour) {
		next, found, err := s.firstRow(ctx, hour)
		if err != nil {
			return hours, err
		}
		if !found || !next.Before(horizon) {
			next = horizon
		}
		if next = next.Truncate(time.Hour); next.After(hour) {
			if _, err := s.db.exec(ctx, rollupAdvance, ts(next)); err != nil {
				return hours, fmt.Errorf("advance the stats rollup: %w", err)
			}
			hour = next
		}
		if !hour.Before(horizon) {
			break
		}
		if err := s.rollHour(ctx, hour, true); err != nil {
			return hours, err
		}
		hours++
	}

	// Hours rolled before this pass whose attempts changed since the last
	// began; the first pass has none.
	if seen.time().After(rollupNever) {
		changed, err := s.changedHours(ctx, seen.time().Add(-p.Margin), rolledBefore)
		if err != nil {
			return hours, err
		}
		for _, h := range changed {
			if err := s.rollHour(ctx, h, false); err != nil {
				return hours, err
			}
			hours++
		}
	}
	if _, err := s.db.exec(ctx, rollupSeen, ts(p.Now)); err != nil {
		return hours, fmt.Errorf("advance the stats rollup: %w", err)
	}
	return hours, nil
}

// firstRow is when the first attempt or ledger entry at or after t was
// created, and whether there is one.
func (s *StatsStore) firstRow(ctx context.Context, t time.Time) (time.Time, bool, error) {
	var attempt, entry sql.Null[utcTime]
	if err := s.db.queryRow(ctx, rollupFirst, ts(t), ts(t)).Scan(&attempt, &entry); err != nil {
		return time.Time{}, false, fmt.Errorf("read the stats rollup's first hour: %w", err)
	}
	switch {
	case attempt.Valid && entry.Valid && entry.V.time().Before(attempt.V.time()):
		return entry.V.time(), true, nil
	case attempt.Valid:
		return attempt.V.time(), true, nil
	case entry.Valid:
		return entry.V.time(), true, nil
	}
	return time.Time{}, false, nil
}

// changedHours lists the hours before through that hold an attempt
// changed at or after since.
func (s *StatsStore) changedHours(ctx context.Context, since, through time.Time) ([]time.Time, error) {
	rows, err := s.db.query(ctx, rollupChanged, ts(since), ts(through))
	if err != nil {
		return nil, fmt.Errorf("read the stats rollup's changed hours: %w", err)
	}
	defer rows.Close()
	var hours []time.Time
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return nil, fmt.Errorf("read the stats rollup's changed hours: %w", classify(err))
		}
		h, err := time.ParseInLocation(statsKeyLayout[domain.BucketHour], key, time.UTC)
		if err != nil {
			return nil, fmt.Errorf("read the stats rollup's changed hours: %q: %w", key, err)
		}
		hours = append(hours, h)
	}
	return hours, classify(rows.Err())
}

// rollHour counts hour h again, replacing what the rollup held for it, in
// one transaction; advance also moves rolled_through past it.
func (s *StatsStore) rollHour(ctx context.Context, h time.Time, advance bool) error {
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		end := h.Add(time.Hour)
		for _, st := range []struct {
			query string
			args  []any
		}{
			{rollupClearAttempts, []any{ts(h)}},
			{rollupClearLedger, []any{ts(h)}},
			{rollupAttempts, []any{ts(h), ts(h), ts(end)}},
			{rollupLedger, []any{ts(h), ts(h), ts(end)}},
		} {
			if _, err := s.db.exec(ctx, st.query, st.args...); err != nil {
				return err
			}
		}
		if !advance {
			return nil
		}
		_, err := s.db.exec(ctx, rollupAdvance, ts(end))
		return err
	})
	if err != nil {
		return fmt.Errorf("roll the stats of %s: %w", h.Format(time.RFC3339), err)
	}
	return nil
}

// rolledThrough is the end of the hours rolled: every hour before it is
// in the rollup.
func (s *StatsStore) rolledThrough(ctx context.Context) (time.Time, error) {
	var through, seen utcTime
	err := s.db.queryRow(ctx, rollupState).Scan(&through, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read stats: the rollup: %w", err)
	}
	return through.time(), nil
}
