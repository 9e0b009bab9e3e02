package repository_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// sqliteClients is how many pay flows run at once: paydbench's default.
const sqliteClients = 16

// TestSQLiteConcurrentPays runs 16 clients through payd's write path on
// SQLite at once (register, create an order, take the idempotency key,
// claim, settle, complete the record, read back) and checks that no call
// fails: no SQLITE_BUSY reaches a caller.
//
// With SQLite's busy handler off, every statement of one payd that met
// another payd connection on the write lock would fail at once: passing
// that way too shows writers queue in payd's pool, never in SQLite's
// sleep-and-retry busy loop.
func TestSQLiteConcurrentPays(t *testing.T) {
	opens := map[string]func(ctx context.Context, path string) (*repository.DB, error){
		"payd's settings": func(ctx context.Context, path string) (*repository.DB, error) {
			return repository.Open(ctx, "sqlite://"+path)
		},
		"busy handler off": repository.OpenSQLiteNoWait,
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			db, err := open(t.Context(), filepath.Join(t.TempDir(), "payd.db"))
			if err != nil {
				t.Fatalf("open = %v", err)
			}
			defer db.Close()
			if err := repository.Migrate(t.Context(), db); err != nil {
				t.Fatalf("Migrate = %v", err)
			}
			const perClient = 8
			errs := make(chan error, sqliteClients*perClient)
			var wg sync.WaitGroup
			for c := range sqliteClients {
				wg.Go(func() {
					for i := range perClient {
						if err := payFlow(t.Context(), db, fmt.Sprintf("c%d-%d", c, i)); err != nil {
							errs <- err
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			n := 0
			for err := range errs {
				if n++; n <= 5 {
					t.Errorf("pay flow = %v", err)
				}
			}
			if n > 0 {
				t.Fatalf("%d of %d pay flows failed", n, sqliteClients*perClient)
			}
		})
	}
}

// payFlow is what one new pay asks of the database, in payd's order.
func payFlow(ctx context.Context, db *repository.DB, name string) error {
	var (
		tx       = repository.NewTransactor(db)
		orders   = repository.NewOrderStore(db)
		attempts = repository.NewAttemptStore(db)
		records  = repository.NewRecordStore(db)
	)
	now := t0
	c := domain.Customer{ID: newID(), Email: name + "@example.com", Name: "Ada", TokenHash: fmt.Sprintf("%064x", seq.Add(1)), CreatedAt: now}
	if err := repository.NewCustomerStore(db).Create(ctx, c); err != nil {
		return fmt.Errorf("create customer: %w", err)
	}
	o := pendingOrder(c.ID)
	if err := orders.Create(ctx, o); err != nil {
		return fmt.Errorf("create order: %w", err)
	}
	r := newRecord("pay-" + name)
	r.Scope, r.OrderID = domain.CustomerScope(c.ID), o.ID
	if err := records.Insert(ctx, r); err != nil {
		return fmt.Errorf("insert record: %w", err)
	}
	if _, err := orders.FindByID(ctx, o.ID); err != nil {
		return fmt.Errorf("find order: %w", err)
	}
	a := domain.Attempt{ID: newID(), OrderID: o.ID, RequestID: name, Status: domain.AttemptStarted, PaymentMethod: "pm_ok",
		Amount: o.Amount, Currency: o.Currency, CreatedAt: now, UpdatedAt: now, LeasedUntil: now.Add(time.Minute), InFlightUntil: now.Add(time.Minute)}
	err := tx.InTx(ctx, func(ctx context.Context) error {
		claimed, err := orders.Claim(ctx, o.ID, name, o.Version, now)
		if err != nil || !claimed {
			return errors.Join(err, errors.New("not claimed"))
		}
		return attempts.Create(ctx, a)
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	err = tx.InTx(ctx, func(ctx context.Context) error {
		if ok, err := attempts.Succeed(ctx, a.ID, "ch_"+name, now); err != nil || !ok {
			return errors.Join(err, errors.New("attempt not settled"))
		}
		paid, err := orders.MarkPaid(ctx, o.ID, name, testCause, now)
		if err != nil || !paid {
			return errors.Join(err, errors.New("not paid"))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if _, err := records.Complete(ctx, r.Scope, r.Key, domain.RecordSucceeded, 200, []byte(`{}`), false, now); err != nil {
		return fmt.Errorf("complete record: %w", err)
	}
	got, err := orders.FindByID(ctx, o.ID)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if got.Status != domain.StatusPaid {
		return fmt.Errorf("order %s is %s, want paid", o.ID, got.Status)
	}
	return nil
}
