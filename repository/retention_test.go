package repository_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// retentionFixture writes rows of the tables retention deletes from,
// each named by what it is, around a cutoff.
type retentionFixture struct {
	t  *testing.T
	db *repository.DB
}

// stored is t as payd stores a timestamp (fixed width, UTC): a bare
// time.Time would reach SQLite in another text form.
func stored(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

func (f retentionFixture) exec(query string, args ...any) {
	f.t.Helper()
	if err := f.db.Gorm().WithContext(f.t.Context()).Exec(query, args...).Error; err != nil {
		f.t.Fatalf("%s: %v", query, err)
	}
}

// inbox writes provider event id, received at at and applied at
// processed (nil: not applied).
func (f retentionFixture) inbox(id string, at time.Time, processed *time.Time) {
	f.inboxOf(id, "o1", at, processed)
}

// inboxOf is inbox for order orderID.
func (f retentionFixture) inboxOf(id, orderID string, at time.Time, processed *time.Time) {
	var applied *string
	if processed != nil {
		p := stored(*processed)
		applied = &p
	}
	f.exec(`INSERT INTO webhook_events (id, type, order_id, payload, outcome, received_at, processed_at) VALUES (?, 'charge.succeeded', ?, ?, 'applied', ?, ?)`,
		id, orderID, []byte(`{}`), stored(at), applied)
}

// event writes notification event id, created at at.
func (f retentionFixture) event(id string, at time.Time, fannedOut bool) {
	f.exec(`INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, refunded_minor, order_updated_at,
		charged_minor, books_refunded_minor, disputed_minor, lost_minor, fanned_out, created_at)
		VALUES (?, ?, 1, 'order.paid', 'pay_request', '', 'paid', 0, ?, 100, 0, 0, 0, ?, ?)`, id, "order-"+id, stored(at), fannedOut, stored(at))
}

// delivery writes delivery id of event to an endpoint of its own, last changed at
// at, in status, with attempts logged requests.
func (f retentionFixture) delivery(id, event, status string, at time.Time, attempts int) {
	f.exec(`INSERT INTO notify_deliveries (id, endpoint_id, event_id, order_id, seq, status, attempts, next_attempt_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`, id, "endpoint-"+id, event, "order-"+event, status, attempts, stored(at), stored(at), stored(at))
	for n := 1; n <= attempts; n++ {
		f.exec(`INSERT INTO notify_attempts (id, delivery_id, n, started_at, duration_us, status, error, request_head, response)
			VALUES (?, ?, ?, ?, 1000, 204, '', 'POST /hook', '')`, newID(), id, n, stored(at))
	}
}

func (f retentionFixture) ids(query string) []string {
	f.t.Helper()
	var ids []string
	if err := f.db.Gorm().WithContext(f.t.Context()).Raw(query).Scan(&ids).Error; err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// TestRetention: what is older than the cutoff goes, in batches, and only
// that: applied provider events (not those still to apply), deliveries
// that ended (delivered or failed, not pending) with their attempt logs
// (no other delivery's), and events fanned out that no delivery refers to
// any more (not one a kept delivery refers to, nor one not fanned out).
func TestRetention(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		f := retentionFixture{t, db}
		s := repository.NewRetentionStore(db)
		cutoff := t0
		old, recent := cutoff.Add(-time.Hour), cutoff.Add(time.Hour)

		f.inbox("evt_old_applied_1", old, &old)
		f.inbox("evt_old_applied_2", old, &old)
		f.inbox("evt_old_applied_3", old, &old)
		f.inbox("evt_old_unapplied", old, nil)
		f.inbox("evt_recently_applied", old, &recent)
		f.inbox("evt_recent", recent, &recent)
		// An order with an open discrepancy keeps what the provider told
		// of it, however old, for whoever resolves it; resolved, it goes.
		f.inboxOf("evt_open_discrepancy", "o_open", old, &old)
		f.inboxOf("evt_resolved_discrepancy", "o_resolved", old, &old)
		f.exec(`INSERT INTO discrepancies (id, type, reference, order_id, status, detected_at) VALUES ('dc_open', 'missing_local_payment', 'ch_open', 'o_open', 'open', ?)`, stored(old))
		f.exec(`INSERT INTO discrepancies (id, type, reference, order_id, status, detected_at) VALUES ('dc_resolved', 'missing_local_payment', 'ch_resolved', 'o_resolved', 'resolved', ?)`, stored(old))

		f.event("ev_old_done", old, true)               // its deliveries go: then it goes
		f.event("ev_old_no_endpoint", old, true)        // fanned out to nobody
		f.event("ev_old_pending", old, true)            // still being delivered
		f.event("ev_old_delivered_recently", old, true) // in a kept delivery log
		f.event("ev_old_unfanned", old, false)
		f.event("ev_recent", recent, true)

		f.delivery("d_old_delivered", "ev_old_done", "delivered", old, 2)
		f.delivery("d_old_failed", "ev_old_done", "failed", old, 3)
		f.delivery("d_old_pending", "ev_old_pending", "pending", old, 1)
		f.delivery("d_recent_delivered", "ev_old_delivered_recently", "delivered", recent, 1)

		if n, err := s.PurgeInbox(t.Context(), cutoff, 2); n != 2 || err != nil {
			t.Errorf("PurgeInbox(limit 2) = %d, %v; want 2", n, err)
		}
		if n, err := s.PurgeInbox(t.Context(), cutoff, 2); n != 2 || err != nil {
			t.Errorf("PurgeInbox(limit 2), again = %d, %v; want the last 2", n, err)
		}
		// Events first: none goes while a delivery refers to it.
		if n, err := s.PurgeEvents(t.Context(), cutoff, 10); n != 1 || err != nil {
			t.Errorf("PurgeEvents before the deliveries = %d, %v; want 1 (the one fanned out to nobody)", n, err)
		}
		if dn, an, err := s.PurgeDeliveries(t.Context(), cutoff, 10); dn != 2 || an != 5 || err != nil {
			t.Errorf("PurgeDeliveries = %d deliveries, %d attempts, %v; want 2 and 5", dn, an, err)
		}
		if n, err := s.PurgeEvents(t.Context(), cutoff, 10); n != 1 || err != nil {
			t.Errorf("PurgeEvents after the deliveries = %d, %v; want 1", n, err)
		}
		for _, again := range []func() (int64, error){
			func() (int64, error) { return s.PurgeInbox(t.Context(), cutoff, 10) },
			func() (int64, error) { return s.PurgeEvents(t.Context(), cutoff, 10) },
			func() (int64, error) { n, _, err := s.PurgeDeliveries(t.Context(), cutoff, 10); return n, err },
		} {
			if n, err := again(); n != 0 || err != nil {
				t.Errorf("a pass with nothing left = %d, %v; want 0", n, err)
			}
		}

		want := map[string][]string{
			"SELECT id FROM webhook_events":           {"evt_old_unapplied", "evt_open_discrepancy", "evt_recent", "evt_recently_applied"},
			"SELECT id FROM notify_events":            {"ev_old_delivered_recently", "ev_old_pending", "ev_old_unfanned", "ev_recent"},
			"SELECT id FROM notify_deliveries":        {"d_old_pending", "d_recent_delivered"},
			"SELECT delivery_id FROM notify_attempts": {"d_old_pending", "d_recent_delivered"},
		}
		for q, w := range want {
			if got := f.ids(q); !slices.Equal(got, w) {
				t.Errorf("%s after retention = %v, want %v", q, got, w)
			}
		}

		oldest, err := repository.ReadRetentionOldest(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		if !oldest.WebhookEvents.Equal(recent) || !oldest.NotifyDeliveries.Equal(recent) || !oldest.NotifyEvents.Equal(old) {
			t.Errorf("oldest retained = %+v, want inbox %v, deliveries %v, events %v", oldest, recent, recent, old)
		}
	})
}

// TestRetentionReplicas: five replicas running retention at once over
// many due rows delete each row once: the rows each deleted add up to the
// rows due, and nothing fails.
func TestRetentionReplicas(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		f := retentionFixture{t, db}
		s := repository.NewRetentionStore(db)
		old := t0.Add(-time.Hour)
		const rows, replicas = 60, 5
		for i := range rows {
			f.inbox(fmt.Sprintf("evt_%d", i), old, &old)
			f.event(fmt.Sprintf("ev_%d", i), old, true)
			f.delivery(fmt.Sprintf("d_%d", i), fmt.Sprintf("ev_%d", i), "delivered", old, 1)
		}
		var inbox, deliveries, attempts, events atomic.Int64
		var wg sync.WaitGroup
		for range replicas {
			wg.Go(func() {
				for {
					a, err := s.PurgeInbox(t.Context(), t0, 7)
					if err != nil {
						t.Errorf("PurgeInbox = %v", err)
						return
					}
					b, c, err := s.PurgeDeliveries(t.Context(), t0, 7)
					if err != nil {
						t.Errorf("PurgeDeliveries = %v", err)
						return
					}
					e, err := s.PurgeEvents(t.Context(), t0, 7)
					if err != nil {
						t.Errorf("PurgeEvents = %v", err)
						return
					}
					inbox.Add(a)
					deliveries.Add(b)
					attempts.Add(c)
					events.Add(e)
					if a+b+c+e == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		for name, n := range map[string]int64{"inbox rows": inbox.Load(), "deliveries": deliveries.Load(), "attempts": attempts.Load(), "events": events.Load()} {
			if n != rows {
				t.Errorf("replicas deleted %d %s in all, want %d", n, name, rows)
			}
		}
	})
}
