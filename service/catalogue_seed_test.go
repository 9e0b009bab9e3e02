package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// seedStore is a product store for SeedIfEmpty: it holds listed, refuses
// the SKUs in taken as another process's, and counts creations.
type seedStore struct {
	ProductStore
	listed  []domain.Product
	taken   map[string]bool
	created []string
}

func (s *seedStore) ListAll(context.Context, string, int) ([]domain.Product, error) {
	return s.listed, nil
}

func (s *seedStore) Create(_ context.Context, p domain.Product) (domain.Product, error) {
	if s.taken[p.SKU] {
		return domain.Product{}, domain.ErrSKUTaken
	}
	s.created = append(s.created, p.SKU)
	return p, nil
}

// TestSeedIfEmpty: an empty catalogue gets every product, a SKU another
// process created meanwhile is left to it; a catalogue holding any
// product, active or not, gets nothing; a product the catalogue's rules
// refuse is an error, as a merchant's would be.
func TestSeedIfEmpty(t *testing.T) {
	seed := []domain.NewProduct{
		{SKU: "a", Name: "A", UnitPrice: "1.00", Currency: "USD"},
		{SKU: "b", Name: "B", UnitPrice: "2.00", Currency: "USD", Stock: new(int64(3))},
	}
	cat := func(s *seedStore) *Catalogue {
		return &Catalogue{Store: s, MaxPrice: decimal.NewFromInt(100), Now: time.Now}
	}
	empty := &seedStore{taken: map[string]bool{"a": true}}
	if n, err := cat(empty).SeedIfEmpty(t.Context(), seed); err != nil || n != 1 || len(empty.created) != 1 || empty.created[0] != "b" {
		t.Errorf("SeedIfEmpty(empty, a taken) = %d, %v, created %v; want 1, b", n, err, empty.created)
	}
	held := &seedStore{listed: []domain.Product{{SKU: "own", Active: false}}}
	if n, err := cat(held).SeedIfEmpty(t.Context(), seed); err != nil || n != 0 || len(held.created) != 0 {
		t.Errorf("SeedIfEmpty(an inactive product held) = %d, %v, created %v; want nothing", n, err, held.created)
	}
	bad := []domain.NewProduct{{SKU: "c", Name: "C", UnitPrice: "-1", Currency: "USD"}}
	var invalid *domain.ValidationError
	if _, err := cat(&seedStore{}).SeedIfEmpty(t.Context(), bad); !errors.As(err, &invalid) {
		t.Errorf("SeedIfEmpty(a negative price) = %v, want the validation error", err)
	}
}
