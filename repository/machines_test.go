package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// storeMachine is one of domain's machines with the store statements that
// perform its events, for checkMachine.
type storeMachine[S ~string, E ~string] struct {
	m *domain.Machine[S, E]
	// in stores a row standing in status from, set up so that only its
	// status decides whether ev's statement may move it, and returns its
	// ID.
	in func(t *testing.T, from S, ev E) string
	// steps performs each event on the row id at now.
	steps map[E]func(ctx context.Context, id string, now time.Time) (bool, error)
	// read returns the row's status and the whole row, printed.
	read func(t *testing.T, id string) (S, string)
}

// checkMachine runs every event of c's machine from every status and
// checks the store's guarded statements against domain's table: an event
// applies exactly where the table has an entry and leads to the status it
// names; anywhere else the statement matches nothing and the row is left
// as it was.
func checkMachine[S ~string, E ~string](t *testing.T, c storeMachine[S, E]) {
	t.Helper()
	later := t0.Add(time.Minute)
	for _, ev := range c.m.Events() {
		step, ok := c.steps[ev]
		if !ok {
			t.Fatalf("%s event %s has no store statement in this test", c.m.Name(), ev)
		}
		for _, from := range c.m.Statuses() {
			id := c.in(t, from, ev)
			_, before := c.read(t, id)
			applied, err := step(t.Context(), id, later)
			if err != nil {
				t.Fatalf("%s %s from %s: %v", c.m.Name(), ev, from, err)
			}
			want, allowed := c.m.Next(from, ev)
			got, after := c.read(t, id)
			switch {
			case allowed && !applied:
				t.Errorf("%s %s from %s did not apply; the table says it leads to %s", c.m.Name(), ev, from, want)
			case !allowed && applied:
				t.Errorf("%s %s from %s applied (now %s); the table has no such transition", c.m.Name(), ev, from, got)
			case allowed && got != want:
				t.Errorf("%s %s from %s led to %s, the table says %s", c.m.Name(), ev, from, got, want)
			case !allowed && after != before:
				t.Errorf("%s %s from %s refused but changed the row: %s, was %s", c.m.Name(), ev, from, after, before)
			}
		}
	}
}

// force sets columns of one row, bypassing the stores: the state a test
// starts a transition from.
func force(t *testing.T, db *repository.DB, query string, args ...any) {
	t.Helper()
	if err := db.Gorm().Exec(query, args...).Error; err != nil {
		t.Fatal(err)
	}
}

// TestRefundMachineMatchesTable: the refund store's guards are domain's
// refund machine, on both databases.
func TestRefundMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewRefundStore(db)
		keys := map[string]string{} // refund ID → provider key
		checkMachine(t, storeMachine[domain.RefundStatus, domain.RefundEvent]{
			m: domain.RefundMachine,
			in: func(t *testing.T, from domain.RefundStatus, _ domain.RefundEvent) string {
				r := createRefund(t, s, newRefund(newOrder(t, db).ID, t0))
				force(t, db, "UPDATE refunds SET status = ?, provider_refund_id = NULL WHERE id = ?", string(from), r.ID)
				keys[r.ID] = r.ProviderKey
				return r.ID
			},
			steps: map[domain.RefundEvent]func(context.Context, string, time.Time) (bool, error){
				domain.RefundEventSucceed: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Finish(ctx, id, domain.RefundSucceeded, "re_machine", now)
				},
				domain.RefundEventFail: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Finish(ctx, id, domain.RefundFailed, "", now)
				},
				domain.RefundEventIdentify: func(ctx context.Context, id string, _ time.Time) (bool, error) {
					return s.RecordProviderID(ctx, id, "re_machine")
				},
				domain.RefundEventReverse: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Reverse(ctx, id, now)
				},
			},
			read: func(t *testing.T, id string) (domain.RefundStatus, string) {
				r := findRefund(t, s, keys[id])
				return r.Status, fmt.Sprintf("%+v", r)
			},
		})
	})
}

// TestDiscrepancyMachineMatchesTable: the discrepancy store's guards are
// domain's discrepancy machine, on both databases. Every row carries the
// resolution the steps name, so only the status decides.
func TestDiscrepancyMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDiscrepancyStore(db)
		const action = "refund"
		checkMachine(t, storeMachine[domain.DiscrepancyStatus, domain.DiscrepancyEvent]{
			m: domain.DiscrepancyMachine,
			in: func(t *testing.T, from domain.DiscrepancyStatus, _ domain.DiscrepancyEvent) string {
				disc := record(t, s, newDiscrepancy("ch_"+newID(), newID(), t0))
				force(t, db, "UPDATE discrepancies SET status = ?, resolution = ? WHERE id = ?", string(from), action, disc.ID)
				return disc.ID
			},
			steps: map[domain.DiscrepancyEvent]func(context.Context, string, time.Time) (bool, error){
				domain.DiscrepancyEventResolve: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Resolve(ctx, id, action, "resolved", now)
				},
				domain.DiscrepancyEventClaim: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Claim(ctx, id, action, now)
				},
				domain.DiscrepancyEventSettle: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Settle(ctx, id, action, "settled", now)
				},
				domain.DiscrepancyEventUnclaim: func(ctx context.Context, id string, _ time.Time) (bool, error) {
					return s.Unclaim(ctx, id, action)
				},
			},
			read: func(t *testing.T, id string) (domain.DiscrepancyStatus, string) {
				got, err := s.FindByID(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				return got.Status, fmt.Sprintf("%+v", got)
			},
		})
	})
}

// TestRecordMachineMatchesTable: the idempotency record store's guards are
// domain's record machine, on both databases. Each row is set up so that
// the conditions the table does not hold (the lease, the expiry, the pay
// call's order) let the event's statement run: a lease that ran out for a
// take-over, a live one for a release, a record gone for a replacement.
func TestRecordMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewRecordStore(db)
		later := t0.Add(time.Minute)
		scope := domain.CustomerScope("c1")
		checkMachine(t, storeMachine[domain.RecordStatus, domain.RecordEvent]{
			m: domain.RecordMachine,
			in: func(t *testing.T, from domain.RecordStatus, ev domain.RecordEvent) string {
				r := newRecord("key-" + newID()) // its lease runs out before later
				switch ev {
				case domain.RecordEventRelease:
					r.LockedUntil = later.Add(lease)
				case domain.RecordEventReplace:
					r.ExpiresAt = t0
				}
				insertRecord(t, s, r)
				force(t, db, "UPDATE idempotency_records SET status = ? WHERE scope = ? AND idem_key = ?", string(from), scope, r.Key)
				return r.Key
			},
			steps: map[domain.RecordEvent]func(context.Context, string, time.Time) (bool, error){
				domain.RecordEventSucceed: func(ctx context.Context, key string, now time.Time) (bool, error) {
					return s.Complete(ctx, scope, key, domain.RecordSucceeded, 200, []byte(`{}`), false, now)
				},
				domain.RecordEventFail: func(ctx context.Context, key string, now time.Time) (bool, error) {
					return s.CompleteInBackground(ctx, scope, key, "o1", domain.RecordFailed, 402, []byte(`{}`), domain.CompletedInBackground, now)
				},
				domain.RecordEventRetry: func(ctx context.Context, key string, now time.Time) (bool, error) {
					return s.Retry(ctx, scope, key, now, now.Add(lease))
				},
				domain.RecordEventTakeOver: func(ctx context.Context, key string, now time.Time) (bool, error) {
					return s.TakeOver(ctx, scope, key, now, now.Add(lease))
				},
				domain.RecordEventRelease: func(ctx context.Context, key string, now time.Time) (bool, error) {
					return s.ReleaseLease(ctx, scope, key, time.Time{}, now)
				},
				domain.RecordEventReplace: func(ctx context.Context, key string, now time.Time) (bool, error) {
					r := newRecord(key)
					r.CreatedAt, r.UpdatedAt, r.LockedUntil, r.ExpiresAt = now, now, now.Add(lease), now.Add(24*time.Hour)
					err := s.Insert(ctx, r)
					if err == domain.ErrKeyInUse {
						return false, nil
					}
					return err == nil, err
				},
			},
			read: func(t *testing.T, key string) (domain.RecordStatus, string) {
				r := findRecord(t, s, scope, key)
				return r.Status, fmt.Sprintf("%+v", r)
			},
		})
	})
}

// TestDisputeMachineMatchesTable: the dispute store's guards are domain's
// dispute machine, on both databases.
func TestDisputeMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		ids := map[string]string{} // dispute ID → provider's ID
		checkMachine(t, storeMachine[domain.DisputeStatus, domain.DisputeEvent]{
			m: domain.DisputeMachine,
			in: func(t *testing.T, from domain.DisputeStatus, _ domain.DisputeEvent) string {
				disp := openDispute(t, s, newDispute(newOrder(t, db).ID, "ch_"+newID()))
				force(t, db, "UPDATE disputes SET status = ? WHERE id = ?", string(from), disp.ID)
				ids[disp.ID] = disp.ProviderDisputeID
				return disp.ID
			},
			steps: map[domain.DisputeEvent]func(context.Context, string, time.Time) (bool, error){
				domain.DisputeEventWin: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Close(ctx, id, domain.DisputeEventWin, now)
				},
				domain.DisputeEventLose: func(ctx context.Context, id string, now time.Time) (bool, error) {
					return s.Close(ctx, id, domain.DisputeEventLose, now)
				},
			},
			read: func(t *testing.T, id string) (domain.DisputeStatus, string) {
				got := findDispute(t, s, ids[id])
				return got.Status, fmt.Sprintf("%+v", got)
			},
		})
	})
}
