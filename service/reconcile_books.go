package service

import (
	"context"

	"github.com/payd/payd/domain"
)

// RefundBooks repairs an order from its ledger and asks the provider about
// a refund of payd's it does not list (Refunds; ADR 0055).
type RefundBooks interface {
	Heal(ctx context.Context, orderID string, src domain.LedgerSource) (bool, error)
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
// that has refunds, and every order whose refunds the run saw
// (touched): a difference between an order's confirmed refunds and its
// ledger is repaired and reported as order_books_repaired.
func (s *Reconciler) healOrders(ctx context.Context, run domain.ReconciliationRun, touched map[string]bool) error {
	if s.Books == nil || run.DryRun {
		return nil
	}
	ids := map[string]bool{}
	for id := range touched {
		ids[id] = true
	}
	for after := ""; ; {
		page, err := s.Orders.ListPaidBetween(ctx, run.From, run.To, after, 500)
		if err != nil {
			return err
		}
		for _, o := range page {
			if o.RefundedAmount.IsPositive() || o.Status == domain.StatusRefunded {
				ids[o.ID] = true
			}
		}
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].ID
	}
	for id := range ids {
		if _, err := s.Books.Heal(ctx, id, domain.SourceReconciliation); err != nil {
			return err
		}
	}
	return nil
}
