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
}

// backlogQuery is five indexed reads in one round trip: orders by
// orders_status_id, discrepancies by discrepancies_status, unknown attempts
// by payment_attempts_status (a range of the few unknown rows), unapplied
// events by webhook_events_pending (migration 00013), open disputes by
// disputes_status (the books' migration). None scans a table.
const backlogQuery = `SELECT
	(SELECT COUNT(*) FROM orders WHERE status = ?),
	(SELECT COUNT(*) FROM discrepancies WHERE status IN (?, ?)),
	(SELECT MIN(created_at) FROM payment_attempts WHERE status = ?),
	(SELECT COUNT(*) FROM webhook_events WHERE processed_at IS NULL),
	(SELECT COUNT(*) FROM disputes WHERE status = ?)`

var backlogArgs = []any{string(domain.StatusProcessing), string(domain.DiscrepancyOpen), string(domain.DiscrepancyResolving),
	string(domain.AttemptUnknown), string(domain.DisputeOpen)}

// ReadBacklog reads the backlog (the metrics' gauges, ADR 0022).
func ReadBacklog(ctx context.Context, db *DB) (Backlog, error) {
	var (
		b      Backlog
		oldest *utcTime
	)
	row := db.queryRow(ctx, backlogQuery, backlogArgs...)
	if err := row.Scan(&b.OrdersProcessing, &b.DiscrepanciesOpen, &oldest, &b.WebhookEventsPending, &b.DisputesOpen); err != nil {
		return Backlog{}, fmt.Errorf("read backlog: %w", err)
	}
	if oldest != nil {
		b.OldestUnknownAttempt = oldest.time()
	}
	return b, nil
}
