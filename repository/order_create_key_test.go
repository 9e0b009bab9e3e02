package repository_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestCreateRequestIsUnique: one customer's orders created under one key
// collapse into one, even when the creations race; other customers and
// orders without a key are unaffected.
func TestCreateRequestIsUnique(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		store := repository.NewOrderStore(db)
		ann, ben := newCustomer(t, db), newCustomer(t, db)

		var created atomic.Int32
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				o := pendingOrder(ann.ID)
				o.CreateRequestID = "key-1"
				switch err := store.Create(t.Context(), o); {
				case err == nil:
					created.Add(1)
				case !errors.Is(err, domain.ErrOrderExists):
					t.Errorf("Create(key-1) = %v, want nil or ErrOrderExists", err)
				}
			})
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Errorf("orders created under one key = %d, want 1", n)
		}
		got, err := store.FindByCreateRequest(t.Context(), domain.CustomerScope(ann.ID), "key-1")
		if err != nil || got.CreateRequestID != "key-1" || len(got.Items) != 2 {
			t.Errorf("FindByCreateRequest(key-1) = %+v, %v; want the order with its items", got, err)
		}
		if _, err := store.FindByCreateRequest(t.Context(), domain.CustomerScope(ben.ID), "key-1"); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("FindByCreateRequest(other customer) = %v, want ErrOrderNotFound", err)
		}
		o := pendingOrder(ben.ID)
		o.CreateRequestID = "key-1"
		if err := store.Create(t.Context(), o); err != nil {
			t.Errorf("Create(other customer, same key) = %v, want nil", err)
		}
		for range 2 {
			if err := store.Create(t.Context(), pendingOrder(ann.ID)); err != nil {
				t.Errorf("Create(no key) = %v, want nil", err)
			}
		}
	})
}
