package service

import (
	"context"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// ProductStore is what the catalogue keeps its products in
// (repository.ProductStore).
type ProductStore interface {
	Create(ctx context.Context, p domain.Product) (domain.Product, error)
	FindBySKU(ctx context.Context, sku string) (domain.Product, error)
	ListActive(ctx context.Context, after string, limit int) ([]domain.Product, error)
	ListAll(ctx context.Context, after string, limit int) ([]domain.Product, error)
	Update(ctx context.Context, sku string, change func(domain.Product) (domain.Product, error)) (domain.Product, error)
	AdjustStock(ctx context.Context, sku string, adjust int64, now time.Time) (domain.Product, error)
}

// Catalogue is the merchant's products: only the merchant writes them,
// anyone reads the active ones
// (docs/adr/0058-the-merchant-key-and-the-catalogue.md). Every rule of a
// product is domain's; every change of stock is the store's one guarded
// statement.
type Catalogue struct {
	Store    ProductStore
	MaxPrice decimal.Decimal // the largest unit price (PAYD_MAX_AMOUNT)
	Now      func() time.Time
}

// Create adds a new, active product. Bad input is a domain.ValidationErrors
// and nothing is written; a SKU already in the catalogue is
// domain.ErrSKUTaken.
func (s *Catalogue) Create(ctx context.Context, n domain.NewProduct) (domain.Product, error) {
	p, err := n.Product(s.MaxPrice, s.Now().UTC())
	if err != nil {
		return domain.Product{}, err
	}
	return s.Store.Create(ctx, p)
}

// Update changes what ch names of product sku, active or not.
func (s *Catalogue) Update(ctx context.Context, sku string, ch domain.ProductChange) (domain.Product, error) {
	if err := ch.Check(); err != nil { // before the read: bad input is told even for an unknown SKU
		return domain.Product{}, err
	}
	if !domain.ValidSKU(sku) {
		return domain.Product{}, domain.ErrProductNotFound
	}
	return s.Store.Update(ctx, sku, func(p domain.Product) (domain.Product, error) {
		return p.Apply(ch, s.MaxPrice, s.Now().UTC())
	})
}

// AdjustStock adds adjust to product sku's counted stock (a negative one
// takes). The stock never goes below 0: domain.ErrInsufficientStock, and
// nothing changes. An unlimited stock is not adjusted:
// domain.ErrStockUnlimited.
func (s *Catalogue) AdjustStock(ctx context.Context, sku string, adjust int64) (domain.Product, error) {
	if err := domain.StockChange(adjust); err != nil {
		return domain.Product{}, err
	}
	if !domain.ValidSKU(sku) {
		return domain.Product{}, domain.ErrProductNotFound
	}
	return s.Store.AdjustStock(ctx, sku, adjust, s.Now().UTC())
}

// Get returns product sku, active or not (the merchant's view).
func (s *Catalogue) Get(ctx context.Context, sku string) (domain.Product, error) {
	if !domain.ValidSKU(sku) {
		return domain.Product{}, domain.ErrProductNotFound
	}
	return s.Store.FindBySKU(ctx, sku)
}

// Shown returns product sku as buyers see it: an inactive product is
// domain.ErrProductNotFound, as an unknown one is.
func (s *Catalogue) Shown(ctx context.Context, sku string) (domain.Product, error) {
	p, err := s.Get(ctx, sku)
	if err != nil {
		return domain.Product{}, err
	}
	if !p.Active {
		return domain.Product{}, domain.ErrProductNotFound
	}
	return p, nil
}

// List returns up to limit active products by SKU, after SKU after.
func (s *Catalogue) List(ctx context.Context, after string, limit int) ([]domain.Product, error) {
	return s.Store.ListActive(ctx, after, limit)
}

// ListAll returns up to limit products by SKU, active or not, after SKU
// after: the operators' view.
func (s *Catalogue) ListAll(ctx context.Context, after string, limit int) ([]domain.Product, error) {
	return s.Store.ListAll(ctx, after, limit)
}
