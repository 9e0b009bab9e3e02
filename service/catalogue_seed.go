package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/payd/payd/domain"
)

// SeedIfEmpty creates products when the catalogue holds none, active or
// not, and returns how many it created: 0 when the catalogue already had
// products. Each product passes the same rules as a merchant's creation.
// A SKU another process created meanwhile (two replicas starting on one
// empty database) is left as that process made it.
func (s *Catalogue) SeedIfEmpty(ctx context.Context, products []domain.NewProduct) (int, error) {
	some, err := s.Store.ListAll(ctx, "", 1)
	if err != nil {
		return 0, fmt.Errorf("seed the catalogue: %w", err)
	}
	if len(some) > 0 {
		return 0, nil
	}
	made := 0
	for _, n := range products {
		switch _, err := s.Create(ctx, n); {
		case errors.Is(err, domain.ErrSKUTaken):
		case err != nil:
			return made, fmt.Errorf("seed the catalogue with %s: %w", n.SKU, err)
		default:
			made++
		}
	}
	return made, nil
}
