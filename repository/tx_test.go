package repository_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

var errBoom = errors.New("boom")

func TestInTxCommitsAndRollsBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		tx, orders := repository.NewTransactor(db), repository.NewOrderStore(db)
		customer := newCustomer(t, db)
		exists := func(id string) bool {
			_, err := orders.FindByID(t.Context(), id)
			return err == nil
		}

		committed := pendingOrder(customer.ID)
		err := tx.InTx(t.Context(), func(ctx context.Context) error { return orders.Create(ctx, committed) })
		if err != nil || !exists(committed.ID) {
			t.Errorf("InTx(create) = %v, order stored %v; want nil, true", err, exists(committed.ID))
		}

		failed := pendingOrder(customer.ID)
		err = tx.InTx(t.Context(), func(ctx context.Context) error {
			if err := orders.Create(ctx, failed); err != nil {
				return err
			}
			// Inside the transaction the order is visible ...
			if _, err := orders.FindByID(ctx, failed.ID); err != nil {
				return fmt.Errorf("read own write: %w", err)
			}
			return errBoom
		})
		// ... and after the rollback it is gone.
		if !errors.Is(err, errBoom) || exists(failed.ID) {
			t.Errorf("InTx(create, fail) = %v, order stored %v; want %v, false", err, exists(failed.ID), errBoom)
		}

		panicked := pendingOrder(customer.ID)
		func() {
			defer func() { recover() }()
			tx.InTx(t.Context(), func(ctx context.Context) error {
				orders.Create(ctx, panicked)
				panic("boom")
			})
		}()
		if exists(panicked.ID) {
			t.Errorf("InTx(create, panic) left the order stored")
		}
	})
}

// TestInTxNested: an inner InTx joins the outer transaction, so the outer
// rollback undoes the inner work too.
func TestInTxNested(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		tx, orders := repository.NewTransactor(db), repository.NewOrderStore(db)
		o := newOrder(t, db)
		err := tx.InTx(t.Context(), func(ctx context.Context) error {
			err := tx.InTx(ctx, func(ctx context.Context) error {
				_, err := orders.Claim(ctx, o.ID, "req-1", o.Version, t0)
				return err
			})
			if err != nil {
				return err
			}
			return errBoom
		})
		if got := findOrder(t, db, o.ID); !errors.Is(err, errBoom) || got.Status != domain.StatusPending {
			t.Errorf("nested InTx then outer failure = %v, order %s; want %v, pending", err, got.Status, errBoom)
		}
	})
}

// TestInTxStaysOnItsDatabase: a transaction in the context belongs to one
// database; stores of another database ignore it.
func TestInTxStaysOnItsDatabase(t *testing.T) {
	a, b := dbtest.Open(t, migrations.SQLite), dbtest.Open(t, migrations.SQLite)
	o := newOrder(t, b)
	err := repository.NewTransactor(a).InTx(t.Context(), func(ctx context.Context) error {
		_, err := repository.NewOrderStore(b).Claim(ctx, o.ID, "req-1", o.Version, t0)
		if err != nil {
			return err
		}
		return errBoom // rolls back a's transaction, not b's autocommitted claim
	})
	if got := findOrder(t, b, o.ID); !errors.Is(err, errBoom) || got.Status != domain.StatusProcessing {
		t.Errorf("claim on b inside a's InTx = %v, order %s; want %v, processing", err, got.Status, errBoom)
	}
}

// TestInTxConcurrent: 100 goroutines each read and then write in one
// transaction. On SQLite a deferred transaction would fail to upgrade its
// read lock (SQLITE_BUSY); BEGIN IMMEDIATE makes them queue instead.
func TestInTxConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		tx, orders, attempts := repository.NewTransactor(db), repository.NewOrderStore(db), repository.NewAttemptStore(db)
		const n = 100
		shared := newOrder(t, db)
		own := make([]domain.Order, n)
		for i := range own {
			own[i] = newOrder(t, db)
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				err := tx.InTx(t.Context(), func(ctx context.Context) error {
					if _, err := orders.FindByID(ctx, shared.ID); err != nil {
						return err
					}
					if ok, err := orders.Claim(ctx, own[i].ID, "req", own[i].Version, t0); !ok || err != nil {
						return fmt.Errorf("claim: %v, %w", ok, err)
					}
					return attempts.Create(ctx, domain.Attempt{
						ID: newID(), OrderID: own[i].ID, RequestID: "req", Status: domain.AttemptStarted,
						PaymentMethod: "pm_ok", Amount: own[i].Amount, Currency: own[i].Currency, CreatedAt: t0, UpdatedAt: t0,
					})
				})
				if err != nil {
					t.Errorf("InTx(read, claim, create attempt) #%d = %v", i, err)
				}
			})
		}
		wg.Wait()
		for _, o := range own {
			if got := findOrder(t, db, o.ID); got.Status != domain.StatusProcessing {
				t.Errorf("order %s: %s, want processing", o.ID, got.Status)
			}
		}
	})
}

// TestInTxSeesConcurrentCommit: inside a transaction, a guarded UPDATE that
// matches nothing is followed by a re-read that shows why, even when the
// transaction read the row before another request changed it (READ
// COMMITTED on MySQL). SQLite needs no test: its transactions hold the
// write lock, so nobody else commits meanwhile.
func TestInTxSeesConcurrentCommit(t *testing.T) {
	db := dbtest.Open(t, migrations.MySQL)
	tx, orders := repository.NewTransactor(db), repository.NewOrderStore(db)
	o := newOrder(t, db)
	err := tx.InTx(t.Context(), func(ctx context.Context) error {
		if _, err := orders.FindByID(ctx, o.ID); err != nil { // takes a snapshot under REPEATABLE READ
			return err
		}
		if ok, err := orders.Claim(t.Context(), o.ID, "req-other", o.Version, t0); !ok || err != nil { // another request, outside
			return fmt.Errorf("outside Claim = %v, %w", ok, err)
		}
		if ok, err := orders.Claim(ctx, o.ID, "req-mine", domain.AnyVersion, t0); ok || err != nil {
			return fmt.Errorf("Claim(req-mine) = %v, %v, want false", ok, err)
		}
		got, err := orders.FindByID(ctx, o.ID)
		if err != nil {
			return err
		}
		if got.Status != domain.StatusProcessing || got.PayRequestID != "req-other" {
			return fmt.Errorf("re-read in tx = %s by %q, want processing by req-other", got.Status, got.PayRequestID)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestInTxHoldsWrittenOutStatements: the statements a store writes out go
// on the transaction's connection, beside GORM's, so a rollback undoes
// them and, before it, the transaction reads what they wrote while
// everyone else reads the row as it was.
func TestInTxHoldsWrittenOutStatements(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		tx, orders := repository.NewTransactor(db), repository.NewOrderStore(db)
		o := newOrder(t, db)
		err := tx.InTx(t.Context(), func(ctx context.Context) error {
			if ok, err := orders.Claim(ctx, o.ID, "r1", domain.AnyVersion, t0); err != nil || !ok {
				return fmt.Errorf("Claim = %v, %v; want true, nil", ok, err)
			}
			if got, err := orders.FindByID(ctx, o.ID); err != nil || got.Status != domain.StatusProcessing {
				return fmt.Errorf("FindByID in the transaction = %v, %v; want processing", got.Status, err)
			}
			if got, err := orders.FindByID(t.Context(), o.ID); err != nil || got.Status != domain.StatusPending {
				return fmt.Errorf("FindByID outside the transaction = %v, %v; want pending", got.Status, err)
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InTx(claim, fail) = %v, want %v", err, errBoom)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPending || got.Version != o.Version {
			t.Errorf("after the rollback the order is %s at version %d, want pending at %d", got.Status, got.Version, o.Version)
		}
	})
}
