package e2e

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// TestReplicaReconcileScheduleOnce runs scheduled reconciliation
// (PAYD_RECONCILE_EVERY=1s) in three payd processes on one database and
// checks that each window was reconciled exactly once across them: one
// run per window, no run without its window, every window finished by its
// run, each window overlapping the last by a period, the replicas' logs
// together reporting each window once — and that the schedule really
// reconciles: a charge made behind payd's back is found, once.
func TestReplicaReconcileScheduleOnce(t *testing.T) {
	const windows = 5
	every := time.Second
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Parallel() // mostly waiting for the schedule's windows
		rs := startReplicas(t, 3, on(dialect), premigrated(), withEnv(env{"PAYD_RECONCILE_EVERY": every.String(), "PAYD_LEASE": "10m"}))
		_, token := rs.procs[0].register(newEmail())
		stranger := rs.procs[1].order(token, "5.00")
		ch, err := provider.NewClient(rs.prov.url).Charge(t.Context(), domain.ChargeRequest{IdempotencyKey: uuid.NewString(), OrderID: stranger,
			Amount: decimal.RequireFromString("5.00"), Currency: "USD", PaymentMethod: "pm_ok"})
		if err != nil || ch.Status != domain.ChargeSucceeded {
			t.Fatalf("Charge behind payd's back = %+v, %v; want succeeded", ch, err)
		}

		eventually(t, time.Minute, "the replicas did not reconcile enough windows", func() bool {
			return rs.count("reconcile_windows WHERE run_id IS NOT NULL") >= windows
		})
		for _, p := range rs.procs {
			p.stop() // nothing moves while the books are read
		}

		var rows []struct {
			From, To string
			RunID    *string
		}
		scanRows(t, rs.db, &rows, "SELECT window_from AS `from`, window_to AS `to`, run_id FROM reconcile_windows ORDER BY window_to")
		var runs []struct{ ID, To string }
		scanRows(t, rs.db, &runs, "SELECT id, window_to AS `to` FROM reconciliation_runs WHERE source = 'schedule'")
		byWindow := map[time.Time][]string{}
		for _, r := range runs {
			byWindow[dbTime(t, r.To)] = append(byWindow[dbTime(t, r.To)], r.ID)
		}
		type window struct {
			From, To time.Time
			RunID    *string
		}
		var ws []window
		for _, r := range rows {
			ws = append(ws, window{dbTime(t, r.From), dbTime(t, r.To), r.RunID})
		}
		finished := 0
		for i, w := range ws {
			got := byWindow[w.To]
			switch {
			case w.RunID == nil && len(got) != 0:
				t.Errorf("window ending %v is unfinished yet has runs %v", w.To, got)
			case w.RunID != nil && (len(got) != 1 || got[0] != *w.RunID):
				t.Errorf("window ending %v (run %s) was reconciled by runs %v, want exactly its run", w.To, *w.RunID, got)
			}
			if w.RunID != nil {
				finished++
			}
			if !w.To.Equal(w.To.Truncate(every)) || !w.From.Equal(w.To.Add(-2*every)) {
				t.Errorf("window [%v, %v) is not the two periods before a multiple of %v", w.From, w.To, every)
			}
			if i > 0 && !w.From.Before(ws[i-1].To) {
				t.Errorf("window [%v, %v) does not overlap the last, which ended %v", w.From, w.To, ws[i-1].To)
			}
		}
		if finished < windows || len(runs) != finished {
			t.Errorf("finished windows = %d, scheduled runs = %d; want the same, at least %d", finished, len(runs), windows)
		}
		if n := rs.jobRows("reconcile_schedule"); n != int64(finished) {
			t.Errorf("the replicas' logs report %d scheduled runs, want %d (one per window)", n, finished)
		}
		if n := rs.count("discrepancies WHERE type = 'missing_local_payment' AND order_id = ?", stranger); n != 1 {
			t.Errorf("missing_local_payment for the charge behind payd's back = %d, want 1", n)
		}
		if n := rs.count("reconciliation_runs WHERE source = 'schedule' AND new_found > 0"); n != 1 {
			t.Errorf("scheduled runs that found something new = %d, want 1 (the first to see the charge)", n)
		}
	})
}

// dbTime reads a timestamp as either database hands it over as text.
func dbTime(t *testing.T, s string) time.Time {
	t.Helper()
	for _, layout := range []string{"2006-01-02 15:04:05.999999", time.RFC3339Nano} {
		if v, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return v.UTC()
		}
	}
	t.Fatalf("timestamp %q is in no known layout", s)
	return time.Time{}
}
