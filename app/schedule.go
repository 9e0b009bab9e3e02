package app

import (
	"log/slog"
	"time"

	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// reconcileJobs is the scheduled reconciliation job when
// PAYD_RECONCILE_EVERY is set (none otherwise). Every replica runs it; the
// window claim (ADR 0021) lets one of them reconcile each window.
func reconcileJobs(cfg Config, db *repository.DB, r *service.Reconciler, log *slog.Logger, obs service.Observer) []service.Job {
	if cfg.ReconcileEvery <= 0 {
		return nil
	}
	s := &service.ReconcileSchedule{Reconciler: r, Windows: repository.NewWindowStore(db), Every: cfg.ReconcileEvery,
		Lease: scheduleLease, Timeout: scheduleTimeout, Now: now, Log: log}
	return []service.Job{{Name: "reconcile_schedule", Every: s.TickEvery(), Run: s.Tick, Log: log, Observer: obs}}
}

// A scheduled run is cut off after scheduleTimeout, well inside the lease
// of its window claim, so no other replica takes a window over while its
// run may still commit; and if one did, the run's guarded finish would
// roll it back.
const (
	scheduleTimeout = 2 * time.Minute
	scheduleLease   = 5 * time.Minute
)
