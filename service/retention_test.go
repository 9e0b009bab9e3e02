package service_test

import (
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// retained records what Observer.Retained was told.
type retained struct {
	service.NopObserver
	mu sync.Mutex
	n  map[string]int64
}

func (r *retained) Retained(table string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[table] += n
}

// TestRetainJob: a pass of the retention job deletes, per table, what is
// older than the retention counted back from the job's clock, tells the
// observer how many rows of each table went, and returns the total; what
// is younger stays.
func TestRetainJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		const retention = 30 * 24 * time.Hour
		stamp := func(t time.Time) string { return t.Format("2006-01-02 15:04:05.000000") }
		old, young := stamp(now.Add(-retention-time.Minute)), stamp(now.Add(-retention+time.Minute))
		exec := func(q string, args ...any) {
			t.Helper()
			if err := db.Gorm().WithContext(t.Context()).Exec(q, args...).Error; err != nil {
				t.Fatal(err)
			}
		}
		for id, at := range map[string]string{"evt_old": old, "evt_young": young} {
			exec(`INSERT INTO webhook_events (id, type, payload, received_at, processed_at) VALUES (?, 'charge.succeeded', ?, ?, ?)`, id, []byte(`{}`), at, at)
		}
		for id, at := range map[string]string{"ev_old": old, "ev_young": young} {
			exec(`INSERT INTO notify_events (id, order_id, seq, type, cause, order_status, refunded_minor, order_updated_at,
				charged_minor, books_refunded_minor, disputed_minor, lost_minor, fanned_out, created_at)
				VALUES (?, ?, 1, 'order.paid', 'pay_request', 'paid', 0, ?, 100, 0, 0, 0, 1, ?)`, id, "o-"+id, at, at)
			exec(`INSERT INTO notify_deliveries (id, endpoint_id, event_id, order_id, seq, status, attempts, next_attempt_at, created_at, updated_at)
				VALUES (?, 'e1', ?, ?, 1, 'delivered', 1, ?, ?, ?)`, "d-"+id, id, "o-"+id, at, at, at)
			exec(`INSERT INTO notify_attempts (id, delivery_id, n, started_at, duration_us, status, request_head, response)
				VALUES (?, ?, 1, ?, 10, 204, 'POST /', '')`, "a-"+id, "d-"+id, at)
		}
		// Two checkpoints of runs nobody asked for again, one written to
		// within the retention; each has a page, which goes with it.
		for key, at := range map[string]string{"ck_old": old, "ck_young": young} {
			exec(`INSERT INTO reconciliation_checkpoints (resume_key, run_id, owner, run_created_at, updated_at) VALUES (?, ?, 'p1', ?, ?)`,
				key, "run-"+key, at, at)
			exec(`INSERT INTO reconciliation_checkpoint_pages (resume_key, page, after_page, last_page, body) VALUES (?, 1, '', ?, '{}')`, key, false)
		}

		obs := &retained{n: map[string]int64{}}
		run := service.Retain(repository.NewRetentionStore(db), retention, func() time.Time { return now }, obs)
		n, err := run(t.Context())
		if err != nil || n != 5 {
			t.Fatalf("retention pass = %d, %v; want 5 rows (one of each table)", n, err)
		}
		for _, table := range service.RetainedTables {
			if obs.n[table] != 1 {
				t.Errorf("observer told %d rows of %s, want 1 (told %v)", obs.n[table], table, obs.n)
			}
		}
		for table, key := range map[string]string{"webhook_events": "id", "notify_events": "id", "notify_deliveries": "id", "notify_attempts": "id",
			"reconciliation_checkpoints": "resume_key", "reconciliation_checkpoint_pages": "resume_key"} {
			var ids []string
			if err := db.Gorm().Raw(`SELECT ` + key + ` FROM ` + table).Scan(&ids).Error; err != nil {
				t.Fatal(err)
			}
			if len(ids) != 1 {
				t.Errorf("%s after retention = %v, want only the young row", table, ids)
			}
		}
		if n, err := run(t.Context()); n != 0 || err != nil {
			t.Errorf("second pass = %d, %v; want 0", n, err)
		}
	})
}
