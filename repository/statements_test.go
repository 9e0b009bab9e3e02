package repository_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestStatementCounts pins how many SQL statements each store call sends:
// GORM must add no hidden SELECT or transaction around them.
func TestStatementCounts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		orders, records := repository.NewOrderStore(db), repository.NewRecordStore(db)
		customers, attempts := repository.NewCustomerStore(db), repository.NewAttemptStore(db)
		inbox, discrepancies := repository.NewInboxStore(db), repository.NewDiscrepancyStore(db)
		refunds, runs := repository.NewRefundStore(db), repository.NewRunStore(db)
		o := newOrder(t, db)
		paid := paidOrder(t, db)
		known := record(t, discrepancies, newDiscrepancy("ch_known", paid.ID, t0))
		counter := dbtest.CountStatements(db)

		tests := []struct {
			name string
			call func(ctx context.Context) error
			want int64
		}{
			{"OrderStore.Create", func(ctx context.Context) error { return orders.Create(ctx, pendingOrder(o.CustomerID)) }, 2},
			{"OrderStore.FindByID", func(ctx context.Context) error { _, err := orders.FindByID(ctx, o.ID); return err }, 1},
			{"OrderStore.List", func(ctx context.Context) error { _, err := orders.List(ctx, domain.OrderFilter{}); return err }, 2},
			{"OrderStore.Claim", func(ctx context.Context) error {
				_, err := orders.Claim(ctx, o.ID, "r", domain.AnyVersion, t0)
				return err
			}, 1},
			// The change and its event, in the caller's transaction (outside
			// one they go as a batch, one packet on MySQL).
			{"OrderStore.MarkPaid", func(ctx context.Context) error {
				return repository.NewTransactor(db).InTx(ctx, func(ctx context.Context) error {
					_, err := orders.MarkPaid(ctx, o.ID, "r", testCause, t0)
					return err
				})
			}, 2},
			{"CustomerStore.FindByTokenHash", func(ctx context.Context) error {
				_, err := customers.FindByTokenHash(ctx, "x")
				return ignore(err, domain.ErrCustomerNotFound)
			}, 1},
			{"AttemptStore.Create", func(ctx context.Context) error {
				return attempts.Create(ctx, domain.Attempt{ID: newID(), OrderID: o.ID, RequestID: "r", Status: domain.AttemptStarted,
					PaymentMethod: "pm_ok", Amount: o.Amount, Currency: o.Currency, CreatedAt: t0, UpdatedAt: t0})
			}, 1},
			{"AttemptStore.MarkUnknown", func(ctx context.Context) error { _, err := attempts.MarkUnknown(ctx, "a", "", t0); return err }, 1},
			{"AttemptStore.Succeed", func(ctx context.Context) error { _, err := attempts.Succeed(ctx, "a", "", t0); return err }, 1},
			{"AttemptStore.Fail", func(ctx context.Context) error { _, err := attempts.Fail(ctx, "a", "", "", t0); return err }, 1},
			{"AttemptStore.Hold", func(ctx context.Context) error { _, err := attempts.Hold(ctx, "a", "", t0); return err }, 1},
			{"AttemptStore.Adopt", func(ctx context.Context) error {
				_, err := attempts.Adopt(ctx, "a", domain.AttemptFailed, "", t0)
				return err
			}, 1},
			{"AttemptStore.Apply", func(ctx context.Context) error { _, err := attempts.Apply(ctx, "a", "", t0); return err }, 1},
			{"AttemptStore.Reject", func(ctx context.Context) error { _, err := attempts.Reject(ctx, "a", t0); return err }, 1},
			{"OrderStore.MoveRefund(reserve)", func(ctx context.Context) error {
				_, err := orders.MoveRefund(ctx, paid.ID, domain.MoveReserve, 100, t0)
				return err
			}, 1},
			{"OrderStore.MoveRefund(settle)", func(ctx context.Context) error {
				_, err := orders.MoveRefund(ctx, paid.ID, domain.MoveSettle, 100, t0)
				return err
			}, 1},
			{"OrderStore.MoveRefund(release)", func(ctx context.Context) error {
				_, err := orders.MoveRefund(ctx, paid.ID, domain.MoveRelease, 100, t0)
				return err
			}, 1},
			{"AttemptStore.Lease", func(ctx context.Context) error {
				_, err := attempts.Lease(ctx, "a", t0, t0.Add(time.Second))
				return err
			}, 1},
			{"InboxStore.Receive(new)", func(ctx context.Context) error {
				_, _, err := inbox.Receive(ctx, webhookEvent("msg_1", o.ID))
				return err
			}, 1},
			{"InboxStore.Receive(seen)", func(ctx context.Context) error {
				_, _, err := inbox.Receive(ctx, webhookEvent("msg_1", o.ID))
				return err
			}, 2},
			{"InboxStore.MarkProcessed", func(ctx context.Context) error { return inbox.MarkProcessed(ctx, "msg_1", "applied", t0) }, 1},
			{"DiscrepancyStore.Record(new)", func(ctx context.Context) error {
				_, _, err := discrepancies.Record(ctx, newDiscrepancy("ch_new", o.ID, t0))
				return err
			}, 1},
			{"DiscrepancyStore.Record(known)", func(ctx context.Context) error {
				_, _, err := discrepancies.Record(ctx, newDiscrepancy("ch_known", o.ID, t0))
				return err
			}, 2},
			{"DiscrepancyStore.Resolve", func(ctx context.Context) error {
				_, err := discrepancies.Resolve(ctx, known.ID, "ignore", "", t0)
				return err
			}, 1},
			{"RefundStore.Create", func(ctx context.Context) error { return refunds.Create(ctx, newRefund(paid.ID, t0)) }, 1},
			{"RefundStore.Finish", func(ctx context.Context) error {
				_, err := refunds.Finish(ctx, "r", domain.RefundFailed, "", t0)
				return err
			}, 1},
			{"RunStore.AddFinding", func(ctx context.Context) error { return runs.AddFinding(ctx, "run", known.ID) }, 1},
			{"RecordStore.Insert", func(ctx context.Context) error { return records.Insert(ctx, newRecord("k")) }, 1},
			{"RecordStore.Find", func(ctx context.Context) error {
				_, err := records.Find(ctx, domain.CustomerScope("c1"), "k")
				return err
			}, 1},
			{"RecordStore.Complete", func(ctx context.Context) error {
				_, err := records.Complete(ctx, domain.CustomerScope("c1"), "k", domain.RecordSucceeded, 200, []byte("{}"), false, t0)
				return err
			}, 1},
		}
		for _, tt := range tests {
			counter.Reset()
			if err := tt.call(t.Context()); err != nil {
				t.Errorf("%s = %v", tt.name, err)
			}
			if got := counter.Load(); got != tt.want {
				t.Errorf("%s sent %d statements, want %d", tt.name, got, tt.want)
			}
		}
	})
}

func ignore(err, want error) error {
	if err != nil && !errors.Is(err, want) {
		return err
	}
	return nil
}
