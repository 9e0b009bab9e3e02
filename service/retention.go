package service

import (
	"context"
	"errors"
	"time"
)

// The tables retention deletes from (docs/adr/0062-retention.md), as
// Observer.Retained and the retention metrics name them. What payd's
// books are — orders, attempts, ledger, audit, refunds, disputes,
// discrepancies — is never among them.
const (
	RetainedWebhookEvents    = "webhook_events"    // provider events applied
	RetainedNotifyDeliveries = "notify_deliveries" // deliveries to the shop that ended
	RetainedNotifyAttempts   = "notify_attempts"   // the requests of those deliveries
	RetainedNotifyEvents     = "notify_events"     // events no delivery refers to any more
	// RetainedCheckpoints: reconciliation runs that stopped and were never
	// asked for again, with their pages (ADR 0068).
	RetainedCheckpoints = "reconciliation_checkpoints"
)

// RetainedTables lists them.
var RetainedTables = []string{RetainedWebhookEvents, RetainedNotifyDeliveries, RetainedNotifyAttempts, RetainedNotifyEvents, RetainedCheckpoints}

// RetentionPurger deletes, a batch at a time, what is older than the
// retention (repository.RetentionStore). Each batch is one guarded
// statement (a transaction for a delivery and its attempt log), so
// replicas running it at once delete each row once.
type RetentionPurger interface {
	// PurgeInbox deletes up to limit provider events applied before before.
	PurgeInbox(ctx context.Context, before time.Time, limit int) (int64, error)
	// PurgeDeliveries deletes up to limit deliveries that ended before
	// before, and their attempt logs.
	PurgeDeliveries(ctx context.Context, before time.Time, limit int) (deliveries, attempts int64, err error)
	// PurgeEvents deletes up to limit events fanned out before before that
	// no delivery refers to.
	PurgeEvents(ctx context.Context, before time.Time, limit int) (int64, error)
	// PurgeCheckpoints deletes up to limit checkpoints of reconciliation
	// runs last written before before, and their pages.
	PurgeCheckpoints(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Retain is the retention job: each pass deletes a batch of each kind of
// row older than retention, deliveries before the events they refer to,
// and tells obs (optional) how many of each. It returns the rows deleted
// in all, so a pass that filled a batch runs again at once (Job.Loop). A
// kind that fails does not stop the others: the errors are returned
// together.
func Retain(store RetentionPurger, retention time.Duration, now func() time.Time, obs Observer) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		before := now().UTC().Add(-retention)
		var total int64
		tell := func(table string, n int64) {
			if n > 0 {
				observing(obs).Retained(table, n)
				total += n
			}
		}
		inbox, inboxErr := store.PurgeInbox(ctx, before, jobBatch)
		tell(RetainedWebhookEvents, inbox)
		deliveries, attempts, deliveriesErr := store.PurgeDeliveries(ctx, before, jobBatch)
		tell(RetainedNotifyDeliveries, deliveries)
		tell(RetainedNotifyAttempts, attempts)
		events, eventsErr := store.PurgeEvents(ctx, before, jobBatch)
		tell(RetainedNotifyEvents, events)
		checkpoints, checkpointsErr := store.PurgeCheckpoints(ctx, before, jobBatch)
		tell(RetainedCheckpoints, checkpoints)
		return total, errors.Join(inboxErr, deliveriesErr, eventsErr, checkpointsErr)
	}
}
