package service

import (
	"context"
	"maps"
	"slices"

	"github.com/payd/payd/domain"
)

// RefundBooks repairs an order from its ledger and asks the provider about
// a refund of payd's it does not list (Refunds; ADR 0055).
type RefundBooks interface {
	Heal(ctx context.Context, orderID string, src domain.LedgerSource) (bool, error)
	HealAll(ctx context.Context, orderIDs []string, src domain.LedgerSource) error
	Recheck(ctx context.Context, r domain.Refund, src domain.LedgerSource) (bool, error)
}

// recheck asks the provider about each of payd's succeeded refunds its
// list did not show: one it says failed after confirming it is reversed
// (Refunds.Reversed), and its refund_missing_at_provider finding is
// dropped, the refund_reversed discrepancy saying what happened instead.
func (s *Reconciler) recheck(ctx context.Context, check *refundCheck) error {
	if s.Books == nil || len(check.missing) == 0 {
		return nil
	}
	drop := map[int]bool{}
	for i, r := range check.missing {
		reversed, err := s.Books.Recheck(ctx, r, domain.SourceReconciliation)
		if err != nil {
			return err
		}
		drop[i] = reversed
	}
	kept := check.found[:0:0]
	outside := map[int]domain.ProviderRefund{}
	for i, d := range check.found {
		if drop[i] {
			continue
		}
		if pr, ok := check.outside[i]; ok {
			outside[len(kept)] = pr
		}
		kept = append(kept, d)
	}
	check.found, check.outside, check.missing = kept, outside, nil
	return nil
}

// healOrders repairs from its ledger every order of the run's window
// that has refunds and every order whose refunds the run saw (ids, the
// two together): a difference between an order's confirmed refunds and
// its ledger is repaired and reported as order_books_repaired.
func (s *Reconciler) healOrders(ctx context.Context, run domain.ReconciliationRun, ids map[string]bool) error {
	if s.Books == nil || run.DryRun {
		return nil
	}
	return s.Books.HealAll(ctx, slices.Sorted(maps.Keys(ids)), domain.SourceReconciliation)
}
