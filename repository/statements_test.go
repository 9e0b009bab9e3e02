package repository_test

import (
	"context"
	"errors"
	"testing"

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
		o := newOrder(t, db)
		counter := dbtest.CountStatements(db.Gorm())

		tests := []struct {
			name string
			call func(ctx context.Context) error
			want int64
		}{
			{"OrderStore.Create", func(ctx context.Context) error { return orders.Create(ctx, pendingOrder(o.CustomerID)) }, 2},
			{"OrderStore.FindByID", func(ctx context.Context) error { _, err := orders.FindByID(ctx, o.ID); return err }, 1},
			{"OrderStore.List", func(ctx context.Context) error { _, err := orders.List(ctx, domain.OrderFilter{}); return err }, 2},
			{"OrderStore.Claim", func(ctx context.Context) error { _, err := orders.Claim(ctx, o.ID, "r", t0); return err }, 1},
			{"OrderStore.MarkPaid", func(ctx context.Context) error { _, err := orders.MarkPaid(ctx, o.ID, "r", t0); return err }, 1},
			{"CustomerStore.FindByTokenHash", func(ctx context.Context) error {
				_, err := customers.FindByTokenHash(ctx, "x")
				return ignore(err, domain.ErrCustomerNotFound)
			}, 1},
			{"AttemptStore.Finish", func(ctx context.Context) error {
				_, err := attempts.Finish(ctx, "a", []domain.AttemptStatus{domain.AttemptStarted}, domain.AttemptFailed, "", "", t0)
				return err
			}, 1},
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
