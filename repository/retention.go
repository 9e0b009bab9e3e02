package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/migrations"
)

// Retention (PAYD_RETENTION, docs/adr/0062-retention.md): the rows that
// only record how payd talked to others, once they are older than the
// retention, go in batches of one guarded DELETE each, as the idempotency
// purge does (ADR 61). Orders, attempts, ledger, audit, refunds, disputes
// and discrepancies are the books and are kept.
//
// Each DELETE's condition is the whole guard, so replicas running the same
// pass at once delete each row once: the later statement finds it gone.

// RetentionStore deletes what is past retention.
type RetentionStore struct{ db *DB }

// NewRetentionStore returns a RetentionStore on db.
func NewRetentionStore(db *DB) *RetentionStore { return &RetentionStore{db: db} }

// RetentionOldest is, for each table retention deletes from, when its
// oldest row retention counts became old (the time the retention counts
// from); zero: there is none.
type RetentionOldest struct {
	WebhookEvents    time.Time // applied (processed_at)
	NotifyDeliveries time.Time // ended (updated_at)
	// NotifyEvents is the oldest fanned-out event's created_at, whether
	// or not a delivery still keeps it (reading which are kept would read
	// them all): an event stays while a delivery refers to it.
	NotifyEvents time.Time
	// Checkpoints is the oldest reconciliation checkpoint's last write.
	Checkpoints time.Time
}

var (
	// inboxGone: a provider event applied before the cutoff. An event not
	// yet applied stays, however old; so does one about an order with a
	// discrepancy not yet resolved: whoever resolves it reads what the
	// provider said (the order's timeline). Once it is resolved, the next
	// pass takes the events.
	inboxGone = `processed_at IS NOT NULL AND processed_at < ?` + inboxUnclaimed

	// inboxUnclaimed: no unresolved discrepancy of the event's order.
	inboxUnclaimed = ` AND NOT EXISTS (SELECT 1 FROM discrepancies d
		WHERE d.order_id = webhook_events.order_id AND d.status <> ` + sqlStatus(domain.DiscrepancyResolved) + `)`

	// deliveryGone: a delivery that ended (delivered, or failed for good)
	// before the cutoff. A pending one stays; a redelivered one is pending
	// again and stays.
	deliveryGone = `status IN ` + sqlStatuses(endedDeliveries...) + ` AND updated_at < ?`

	// endedDeliveries are the statuses a delivery ends in. Each is read
	// apart (status = ?) so that the (status, updated_at) index gives its
	// rows in order: an IN list would sort them.
	endedDeliveries = []domain.DeliveryStatus{domain.DeliveryDelivered, domain.DeliveryFailed}

	// eventGone: an event fanned out before the cutoff whose deliveries
	// are all gone: every endpoint received it (or gave up) longer ago
	// than the retention. One still delivering, or still in a delivery
	// log, stays; so does one not yet fanned out.
	eventGone = `fanned_out = 1 AND created_at < ?
		AND NOT EXISTS (SELECT 1 FROM notify_deliveries d WHERE d.event_id = notify_events.id)`

	// deleteGoneAttempts removes the attempt logs of the deliveries given
	// that are gone: never the log of a delivery that is still there.
	deleteGoneAttempts = `DELETE FROM notify_attempts WHERE delivery_id IN ?
		AND NOT EXISTS (SELECT 1 FROM notify_deliveries d WHERE d.id = notify_attempts.delivery_id)`
)

// batchDelete is a DELETE of a batch of table's rows where gone holds,
// first by order, of at most as many rows as its last argument: DELETE
// ... ORDER BY ... LIMIT on MySQL; on SQLite, whose DELETE takes no LIMIT,
// the batch is chosen by rowid. One statement, one commit, for a batch.
func batchDelete(d migrations.Dialect, table, gone, order string) string {
	if d == migrations.MySQL {
		return `DELETE FROM ` + table + ` WHERE ` + gone + ` ORDER BY ` + order + ` LIMIT ?`
	}
	return `DELETE FROM ` + table + ` WHERE rowid IN
		(SELECT rowid FROM ` + table + ` WHERE ` + gone + ` ORDER BY ` + order + ` LIMIT ?)`
}

// PurgeInbox deletes up to limit provider events applied before before.
func (s *RetentionStore) PurgeInbox(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := s.db.exec(ctx, batchDelete(s.db.dialect, "webhook_events", inboxGone, "processed_at"), ts(before), batchSize(limit))
	if err != nil {
		return 0, fmt.Errorf("purge webhook inbox: %w", err)
	}
	return n, nil
}

// PurgeDeliveries deletes up to limit deliveries to the merchant's
// endpoints that ended before before, and their attempt logs, in one
// transaction. It reports the deliveries and the attempts deleted.
func (s *RetentionStore) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (deliveries, attempts int64, err error) {
	var ids []string
	for _, status := range endedDeliveries {
		var some []string
		err = s.db.conn(ctx).Raw(`SELECT id FROM notify_deliveries WHERE status = ? AND updated_at < ? ORDER BY updated_at LIMIT ?`,
			string(status), ts(before), batchSize(limit)-len(ids)).Scan(&some).Error
		if err != nil {
			return 0, 0, fmt.Errorf("purge deliveries: %w", err)
		}
		if ids = append(ids, some...); len(ids) >= batchSize(limit) {
			break
		}
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		gone := s.db.conn(ctx).Exec(`DELETE FROM notify_deliveries WHERE id IN ? AND `+deliveryGone, ids, ts(before))
		if gone.Error != nil {
			return gone.Error
		}
		logs := s.db.conn(ctx).Exec(deleteGoneAttempts, ids)
		if logs.Error != nil {
			return logs.Error
		}
		deliveries, attempts = gone.RowsAffected, logs.RowsAffected // set on the run that commits
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge deliveries: %w", err)
	}
	return deliveries, attempts, nil
}

// PurgeEvents deletes up to limit notification events fanned out before
// before that no delivery refers to any more.
func (s *RetentionStore) PurgeEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := s.db.exec(ctx, batchDelete(s.db.dialect, "notify_events", eventGone, "created_at"), ts(before), batchSize(limit))
	if err != nil {
		return 0, fmt.Errorf("purge notification events: %w", err)
	}
	return n, nil
}

// PurgeCheckpoints deletes up to limit checkpoints of reconciliation runs
// last written before before (a run nobody asked for again: ADR 0068),
// and their pages, in one transaction. A checkpoint its run wrote since is
// kept: the DELETE holds it to the same cutoff.
func (s *RetentionStore) PurgeCheckpoints(ctx context.Context, before time.Time, limit int) (int64, error) {
	var keys []string
	err := s.db.conn(ctx).Raw(`SELECT resume_key FROM reconciliation_checkpoints WHERE updated_at < ? ORDER BY updated_at LIMIT ?`,
		ts(before), batchSize(limit)).Scan(&keys).Error
	if err != nil || len(keys) == 0 {
		return 0, classify(err)
	}
	var n int64
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		gone := s.db.conn(ctx).Exec(`DELETE FROM reconciliation_checkpoints WHERE resume_key IN ? AND updated_at < ?`, keys, ts(before))
		if gone.Error != nil {
			return gone.Error
		}
		pages := s.db.conn(ctx).Exec(`DELETE FROM reconciliation_checkpoint_pages WHERE resume_key IN ?
			AND NOT EXISTS (SELECT 1 FROM reconciliation_checkpoints c WHERE c.resume_key = reconciliation_checkpoint_pages.resume_key)`, keys)
		n = gone.RowsAffected
		return pages.Error
	})
	if err != nil {
		return 0, fmt.Errorf("purge reconciliation checkpoints: %w", err)
	}
	return n, nil
}

// ReadRetentionOldest reads RetentionOldest: one read of an index's first
// entries per table.
func ReadRetentionOldest(ctx context.Context, db *DB) (RetentionOldest, error) {
	var out RetentionOldest
	for _, q := range []struct {
		query string
		into  *time.Time
	}{
		{`SELECT MIN(processed_at) FROM webhook_events WHERE processed_at IS NOT NULL` + inboxUnclaimed, &out.WebhookEvents},
		// Per status: MIN of the index's second column for one value of
		// its first is one look-up; for an IN list it would read them all.
		{`SELECT MIN(t) FROM (SELECT MIN(updated_at) AS t FROM notify_deliveries WHERE status = ` + sqlStatus(domain.DeliveryDelivered) + `
			UNION ALL SELECT MIN(updated_at) FROM notify_deliveries WHERE status = ` + sqlStatus(domain.DeliveryFailed) + `) ended`, &out.NotifyDeliveries},
		{`SELECT MIN(created_at) FROM notify_events WHERE fanned_out = 1`, &out.NotifyEvents},
		{`SELECT MIN(updated_at) FROM reconciliation_checkpoints`, &out.Checkpoints},
	} {
		var at *utcTime
		if err := db.queryRow(ctx, q.query).Scan(&at); err != nil {
			return RetentionOldest{}, fmt.Errorf("oldest retained row: %w", err)
		}
		if at != nil {
			*q.into = at.time()
		}
	}
	return out, nil
}
