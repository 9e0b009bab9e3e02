package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// countingProducts is a product store that counts what reaches it and
// holds nothing.
type countingProducts struct {
	ProductStore
	calls int
}

func (s *countingProducts) Create(_ context.Context, p domain.Product) (domain.Product, error) {
	s.calls++
	return p, nil
}

func (s *countingProducts) Update(context.Context, string, func(domain.Product) (domain.Product, error)) (domain.Product, error) {
	s.calls++
	return domain.Product{}, domain.ErrProductNotFound
}

func (s *countingProducts) AdjustStock(context.Context, string, int64, time.Time) (domain.Product, error) {
	s.calls++
	return domain.Product{}, domain.ErrProductNotFound
}

// TestCatalogueRefusesBeforeTheStore: bad input is refused before the
// store is asked anything, so nothing is written; a SKU no product could
// have is not found, without a query; a bad body is told before an
// unknown SKU.
func TestCatalogueRefusesBeforeTheStore(t *testing.T) {
	store := &countingProducts{}
	c := &Catalogue{Store: store, MaxPrice: decimal.NewFromInt(100), Now: time.Now}
	ctx := t.Context()
	var invalid *domain.ValidationError
	if _, err := c.Create(ctx, domain.NewProduct{SKU: "a b", Name: "X", UnitPrice: "1", Currency: "USD"}); !errors.As(err, &invalid) {
		t.Errorf("Create(bad SKU) = %v, want a validation error", err)
	}
	empty := ""
	if _, err := c.Update(ctx, "nosuch/", domain.ProductChange{Name: &empty}); !errors.As(err, &invalid) || invalid.Field != "name" {
		t.Errorf("Update(bad SKU, empty name) = %v, want the name refused first", err)
	}
	if _, err := c.Update(ctx, "nosuch/", domain.ProductChange{Name: new("Y")}); !errors.Is(err, domain.ErrProductNotFound) {
		t.Errorf("Update(bad SKU) = %v, want ErrProductNotFound", err)
	}
	if _, err := c.AdjustStock(ctx, "ok", 0); !errors.As(err, &invalid) || invalid.Field != "adjust" {
		t.Errorf("AdjustStock(0) = %v, want adjust refused", err)
	}
	if _, err := c.AdjustStock(ctx, "a b", -1); !errors.Is(err, domain.ErrProductNotFound) {
		t.Errorf("AdjustStock(bad SKU) = %v, want ErrProductNotFound", err)
	}
	if store.calls != 0 {
		t.Errorf("the store was asked %d times, want 0", store.calls)
	}
	if _, err := c.Create(ctx, domain.NewProduct{SKU: "ok", Name: "X", UnitPrice: "1", Currency: "USD"}); err != nil || store.calls != 1 {
		t.Errorf("Create(valid) = %v after %d store calls, want it stored once", err, store.calls)
	}
}
