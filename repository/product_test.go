package repository_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func newProductRow(sku string, stock *int64) domain.Product {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return domain.Product{SKU: sku, Name: "Product " + sku, UnitPrice: decimal.RequireFromString("12.34"), Currency: "USD",
		Stock: stock, Active: true, CreatedAt: now, UpdatedAt: now}
}

// TestProductStore: a product is stored and read back exactly (price in
// minor units, stock or unlimited); a SKU stored twice is ErrSKUTaken; the
// storefront's list holds the active products by SKU, the operators' list
// all of them; an update changes only what it returns.
func TestProductStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewProductStore(dbtest.Open(t, d))
		ctx := t.Context()
		want := newProductRow("b-1", new(int64(7)))
		if _, err := s.Create(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.FindBySKU(ctx, "b-1")
		if err != nil || got.Name != want.Name || !got.UnitPrice.Equal(want.UnitPrice) || *got.Stock != 7 || !got.Active || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("FindBySKU(b-1) = %+v, %v; want %+v", got, err, want)
		}
		if _, err := s.Create(ctx, newProductRow("b-1", nil)); !errors.Is(err, domain.ErrSKUTaken) {
			t.Errorf("Create(b-1 again) = %v, want ErrSKUTaken", err)
		}
		if _, err := s.Create(ctx, newProductRow("B-1", nil)); err != nil {
			t.Errorf("Create(B-1) = %v: a SKU is case-sensitive on every database", err)
		}
		if _, err := s.FindBySKU(ctx, "nosuch"); !errors.Is(err, domain.ErrProductNotFound) {
			t.Errorf("FindBySKU(nosuch) = %v, want ErrProductNotFound", err)
		}
		if _, err := s.Create(ctx, newProductRow("a-1", nil)); err != nil {
			t.Fatal(err)
		}
		_, err = s.Update(ctx, "a-1", func(p domain.Product) (domain.Product, error) {
			p.Active = false
			p.UnitPrice = decimal.RequireFromString("1.50")
			return p, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := s.FindBySKU(ctx, "a-1"); p.Active || !p.UnitPrice.Equal(decimal.RequireFromString("1.5")) || p.Stock != nil {
			t.Errorf("after Update, a-1 = %+v; want inactive at 1.50, stock unlimited", p)
		}
		list, err := s.ListActive(ctx, "", 10)
		if err != nil || len(list) != 2 || list[0].SKU != "B-1" || list[1].SKU != "b-1" {
			t.Errorf("ListActive = %+v, %v; want B-1, b-1 (a-1 is inactive)", list, err)
		}
		if list, _ := s.ListActive(ctx, "B-1", 10); len(list) != 1 || list[0].SKU != "b-1" {
			t.Errorf("ListActive(after B-1) = %+v, want b-1", list)
		}
		all, err := s.ListAll(ctx, "", 10)
		if err != nil || len(all) != 3 || all[0].SKU != "B-1" || all[1].SKU != "a-1" || all[1].Active || all[2].SKU != "b-1" {
			t.Errorf("ListAll = %+v, %v; want B-1, a-1 (inactive), b-1", all, err)
		}
		if all, _ := s.ListAll(ctx, "B-1", 1); len(all) != 1 || all[0].SKU != "a-1" {
			t.Errorf("ListAll(after B-1, limit 1) = %+v, want a-1", all)
		}
	})
}

// TestAdjustStockGuard: the guarded statement moves a counted stock only
// within 0..MaxStock, and the refusal says why; the CHECK refuses a
// negative stock written any other way.
func TestAdjustStockGuard(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewProductStore(db)
		ctx, now := t.Context(), time.Now()
		for _, p := range []domain.Product{newProductRow("counted", new(int64(3))), newProductRow("unlimited", nil)} {
			if _, err := s.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			sku     string
			adjust  int64
			want    int64
			wantErr error
		}{
			{"counted", -3, 0, nil},
			{"counted", -1, 0, domain.ErrInsufficientStock},
			{"counted", domain.MaxStock, domain.MaxStock, nil},
			{"counted", 1, domain.MaxStock, errInvalid},
			{"counted", -domain.MaxStock, 0, nil},
			{"unlimited", 5, 0, domain.ErrStockUnlimited},
			{"nosuch", 5, 0, domain.ErrProductNotFound},
		}
		for _, tt := range tests {
			p, err := s.AdjustStock(ctx, tt.sku, tt.adjust, now)
			switch {
			case tt.wantErr == errInvalid:
				var v *domain.ValidationError
				if !errors.As(err, &v) || v.Field != "adjust" {
					t.Errorf("AdjustStock(%s, %d) = %v, want a validation error naming adjust", tt.sku, tt.adjust, err)
				}
			case !errors.Is(err, tt.wantErr):
				t.Errorf("AdjustStock(%s, %d) = %v, want %v", tt.sku, tt.adjust, err, tt.wantErr)
			case err == nil && *p.Stock != tt.want:
				t.Errorf("AdjustStock(%s, %d): stock %d, want %d", tt.sku, tt.adjust, *p.Stock, tt.want)
			}
		}
		if err := db.Gorm().Exec("UPDATE products SET stock = -1 WHERE sku = 'counted'").Error; err == nil {
			t.Error("UPDATE products SET stock = -1 was stored; want the CHECK to refuse it")
		}
	})
}

// errInvalid marks a case that wants a *domain.ValidationError.
var errInvalid = errors.New("a validation error")

// TestAdjustStockRace: many adjustments of -1 at once on a stock of k:
// exactly k succeed, the stock ends at 0 and never below, on both
// databases. Without the guard's "stock + ? >= 0" the race oversells.
func TestAdjustStockRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewProductStore(dbtest.Open(t, d))
		ctx := t.Context()
		if _, err := s.Create(ctx, newProductRow("race", new(int64(7)))); err != nil {
			t.Fatal(err)
		}
		const n = 30
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = s.AdjustStock(ctx, "race", -1, time.Now()) })
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, domain.ErrInsufficientStock):
				t.Errorf("adjustment %d = %v, want nil or ErrInsufficientStock", i, err)
			}
		}
		if p, err := s.FindBySKU(ctx, "race"); ok != 7 || err != nil || *p.Stock != 0 {
			t.Errorf("%d adjustments succeeded, stock %v (%v); want 7 and 0", ok, p.Stock, err)
		}
	})
}
