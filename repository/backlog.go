package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Backlog is what payd has left to settle, counted over the whole
// database: every replica reads the same numbers.
type Backlog struct {
	OrdersProcessing     int64
	DiscrepanciesOpen    int64     // open or resolving
	OldestUnknownAttempt time.Time // created_at of the oldest unknown attempt; zero when none
	WebhookEventsPending int64     // stored, not yet applied
	DisputesOpen         int64     // disputes the bank has not decided
	HoldsOpen            int64     // authorized orders: money held, not captured yet
	NextHoldLapse        time.Time // the earliest capture_before of a hold; zero when none
	OldestHold           time.Time // when the oldest open hold was authorized (its hold's entry); zero when none
}

// backlogQuery is eight indexed reads in one round trip: orders by
// orders_status_id, discrepancies by discrepancies_status, unknown attempts
// by payment_attempts_status (a range of the few unknown rows), unapplied
// events by webhook_events_pending (migration 00013), open disputes by
// disputes_status (the books' migration), open holds and their next lapse
// by orders_hold (00033), and the oldest one's hold entry by
// ledger_entries_order. None scans a table.
const backlogQuery = `SELECT
	(SELECT COUNT(*) FROM orders WHERE status = ?),
	(SELECT COUNT(*) FROM discrepancies WHERE status IN (?, ?)),
	(SELECT MIN(created_at) FROM payment_attempts WHERE status = ?),
	(SELECT COUNT(*) FROM webhook_events WHERE processed_at IS NULL),
	(SELECT COUNT(*) FROM disputes WHERE status = ?),
	(SELECT COUNT(*) FROM orders WHERE status = ?),
	(SELECT MIN(capture_before) FROM orders WHERE status = ?),
	(SELECT MIN(l.created_at) FROM orders o JOIN ledger_entries l ON l.order_id = o.id AND l.kind = ?
	  WHERE o.status = ?)`

var backlogArgs = []any{string(domain.StatusProcessing), string(domain.DiscrepancyOpen), string(domain.DiscrepancyResolving),
	string(domain.AttemptUnknown), string(domain.DisputeOpen),
	string(domain.StatusAuthorized), string(domain.StatusAuthorized), string(domain.LedgerHold), string(domain.StatusAuthorized)}

// ReadBacklog reads the backlog (the metrics' gauges, ADR 0022).
func ReadBacklog(ctx context.Context, db *DB) (Backlog, error) {
	var (
		b                         Backlog
		oldest, lapse, oldestHold *utcTime
	)
	row := db.queryRow(ctx, backlogQuery, backlogArgs...)
	if err := row.Scan(&b.OrdersProcessing, &b.DiscrepanciesOpen, &oldest, &b.WebhookEventsPending, &b.DisputesOpen,
		&b.HoldsOpen, &lapse, &oldestHold); err != nil {
		return Backlog{}, fmt.Errorf("read backlog: %w", err)
	}
	b.OldestUnknownAttempt, b.NextHoldLapse, b.OldestHold = zeroIfNil(oldest), zeroIfNil(lapse), zeroIfNil(oldestHold)
	return b, nil
}
