//go:build paydfault

package repository_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// lastUnits races 50 guest orders of one unit each for a product with 5
// left, and says how many were created, how many were refused out of
// stock, the other errors, and the stock left.
func lastUnits(t *testing.T, db *repository.DB) (sold, refused int, failures []error, left int64) {
	t.Helper()
	if _, err := repository.NewProductStore(db).Create(t.Context(), newProductRow("last", new(int64(5)))); err != nil {
		t.Fatal(err)
	}
	orders := repository.NewOrderStore(db)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range 50 {
		wg.Go(func() {
			o := pendingOrder("")
			o.Creator = domain.ScopeMerchant // a guest's order: no customer to make
			o.Items = []domain.Item{{SKU: "last", Name: "Product last", Quantity: 1, UnitPrice: dec("12.34"), StockTaken: 1}}
			o.Amount = domain.Total(o.Items)
			err := orders.Create(t.Context(), o)
			mu.Lock()
			defer mu.Unlock()
			var short *domain.OutOfStockError
			switch {
			case err == nil:
				sold++
			case errors.As(err, &short) && short.SKU == "last":
				refused++
			default:
				failures = append(failures, err)
			}
		})
	}
	wg.Wait()
	p, err := repository.NewProductStore(db).FindBySKU(t.Context(), "last")
	if err != nil || p.Stock == nil {
		t.Fatalf("FindBySKU(last) = %+v, %v", p, err)
	}
	return sold, refused, failures, *p.Stock
}

// TestStockUnguardedMutant proves the last-units race tells the take's
// guard from its mutant (repository.Mutate("stock_unguarded"), test
// builds only). Guarded, 50 buyers for the last 5 units make 5 orders and
// 45 out_of_stock refusals. Unguarded, every take matches: the CHECK
// (stock >= 0) still keeps the stock from going below 0, but each buyer
// past the last unit fails on it, an error that is no
// *domain.OutOfStockError (payd answers it 500, which the nemesis's
// no_5xx_but_503_retry_after reports), and none is refused out of stock.
func TestStockUnguardedMutant(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		sold, refused, failures, left := lastUnits(t, dbtest.Open(t, d))
		if sold != 5 || refused != 45 || len(failures) > 0 || left != 0 {
			t.Fatalf("guarded: sold %d, refused %d, failed %d (%v), left %d; want 5, 45, 0, 0", sold, refused, len(failures), failures, left)
		}

		if err := repository.Mutate("stock_unguarded"); err != nil {
			t.Fatal(err)
		}
		defer repository.UnmutateStock()
		sold, refused, failures, left = lastUnits(t, dbtest.Open(t, d))
		if left < 0 {
			t.Fatalf("unguarded: the stock went below 0 (%d): the CHECK did not hold", left)
		}
		if refused == 45 && len(failures) == 0 {
			t.Fatal("unguarded: the race still ended in 45 out_of_stock refusals: it cannot tell the guarded take from the unguarded one")
		}
		if sold != 5 || refused != 0 || len(failures) != 45 {
			t.Errorf("unguarded: sold %d, refused %d, failed %d, left %d; want 5 sold, and the 45 others failing on the CHECK", sold, refused, len(failures), left)
		}
		if len(failures) > 0 {
			t.Logf("unguarded: sold %d, refused out of stock %d, failed %d (e.g. %v), left %d", sold, refused, len(failures), failures[0], left)
		}
	})
}
