// Package provider is payd's anti-corruption layer towards the payment
// provider: an HTTP client for the provider API and the parsers of its
// webhook events and settlement files. Each translates the provider's wire
// format into payd's own vocabulary (domain.Charge, domain.ProviderEvent,
// ...) once; no wire type escapes this package. The ports payd calls it
// through are declared by their consumer, in service.
package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// ChargePager is a provider's list of charges, a page at a time (the
// sandbox's Client, the Stripe adapter).
type ChargePager interface {
	ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error)
}

// AllCharges follows p's pages to the end and returns every charge
// created in [from, to): for tools and tests that want the whole list. A
// reconciliation run walks the pages instead, holding one at a time.
func AllCharges(ctx context.Context, p ChargePager, from, to time.Time) ([]domain.Charge, error) {
	var all []domain.Charge
	for after := ""; ; {
		page, err := p.ListCharges(ctx, from, to, after)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Charges...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next == after {
			return nil, fmt.Errorf("list charges: %w: the page after %s starts there again", domain.ErrProviderUnavailable, after)
		}
		after = page.Next
	}
}
