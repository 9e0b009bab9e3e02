package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/payd/payd/domain"
)

// Job is one unit of background work, run over and over. Every job is a
// batch of guarded statements (DELETE ... WHERE expired, UPDATE ... WHERE
// status='pending'), so several payd replicas running the same job on one
// database never do a unit of work twice: the second statement to reach a
// row finds its guard false and affects nothing.
type Job struct {
	Name  JobName
	Every time.Duration
	Run   func(ctx context.Context) (int64, error) // returns how many rows it handled
	Log   *slog.Logger
	// Observer, optional, is told of every pass that handled rows.
	Observer Observer
}

// Loop runs the job every j.Every until ctx ends. A full batch runs again at
// once, so a backlog drains without waiting for the next tick.
func (j Job) Loop(ctx context.Context) {
	t := time.NewTicker(j.Every)
	defer t.Stop()
	for {
		n, err := j.Run(ctx)
		if err != nil && ctx.Err() == nil && j.Log != nil {
			j.Log.Warn("background job failed", "job", j.Name, "err", err)
		}
		if n > 0 {
			// One line per batch that did something: summed over every
			// replica's log, it says how often each unit of work was done.
			if j.Log != nil {
				j.Log.Info("background job done", "job", j.Name, "rows", n)
			}
			observing(j.Observer).JobDone(j.Name, n)
		}
		if n >= jobBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// JobName names a background job: the job label of
// payd_background_jobs_rows_total and of its log lines.
type JobName string

// The background jobs.
const (
	JobPurgeIdempotency  JobName = "purge_idempotency"
	JobExpireOrders      JobName = "expire_orders"
	JobRecoverPayments   JobName = "recover_payments"
	JobReconcileSchedule JobName = "reconcile_schedule"
	JobNotify            JobName = "notify" // the merchant's endpoints told of new events (notify.Worker)
	JobRetention         JobName = "retention"
	JobStatsRollup       JobName = "stats_rollup" // the overview's hours counted once (ADR 0065)
	JobHolds             JobName = "holds"        // abandoned captures and voids finished, lapsed holds voided (ADR 0060)
)

// JobNames lists every background job.
var JobNames = []JobName{JobPurgeIdempotency, JobExpireOrders, JobRecoverPayments, JobReconcileSchedule, JobNotify, JobRetention, JobStatsRollup, JobHolds}

// jobBatch is how many rows one pass of a job handles at most.
const jobBatch = 500

// PurgeRecords deletes expired idempotency records, a batch at a time.
func PurgeRecords(records RecordPurger, now func() time.Time) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		return records.PurgeExpired(ctx, now().UTC(), jobBatch)
	}
}

// ExpireOrders moves pending orders past their TTL to expired, a batch at
// a time, and tells obs (optional) of each order it changed.
func ExpireOrders(orders OrderStore, now func() time.Time, obs Observer) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		ids, err := orders.ExpireDue(ctx, domain.Cause{Kind: domain.CauseExpiry}, now().UTC(), jobBatch)
		for _, id := range ids {
			observing(obs).OrderChanged(id)
		}
		return int64(len(ids)), err
	}
}
