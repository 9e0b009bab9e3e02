package service

import (
	"context"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// exceedsRemainingPrefix starts the reference of the
// dispute_exceeds_remaining a dispute opening for more than is left of its
// charge records, beside the dispute's own disputed (referenced by the
// dispute's ID); (type, reference) keeps each once.
const exceedsRemainingPrefix = "exceeds_remaining:"

// overRemaining records a discrepancy when dispute d, just opened, is for
// more than is left of its charge in payd's books: the charge's amount
// less what payd's ledger holds refunded of it (payd's refunds and those
// made outside it). A charge refunded in full and then disputed in full
// would otherwise be booked without a word, and the customer may get the
// money twice: the operator answers the dispute at the provider with the
// refund as evidence. Nothing is said when payd's ledger holds no charge
// entry for it (payd cannot tell what is left; other discrepancies cover a
// charge payd does not know). It runs in the dispute's transaction and
// returns the discrepancy when it is new.
func (s *Disputes) overRemaining(ctx context.Context, d domain.Dispute) (*domain.Discrepancy, error) {
	if s.Ledger == nil || s.Discrepancies == nil {
		return nil, nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, d.OrderID)
	if err != nil {
		return nil, err
	}
	charged, refunded := decimal.Zero, decimal.Zero
	for _, e := range entries {
		if e.ChargeID != d.ChargeID || e.Currency != d.Currency {
			continue
		}
		switch e.Kind {
		case domain.LedgerCharge:
			charged = charged.Add(e.Amount)
		case domain.LedgerRefund, domain.LedgerOutsideRefund:
			refunded = refunded.Add(e.Amount)
		case domain.LedgerRefundReversed:
			refunded = refunded.Sub(e.Amount)
		}
	}
	left := charged.Sub(refunded)
	if !charged.IsPositive() || d.Amount.LessThanOrEqual(left) {
		return nil, nil
	}
	scale := d.Currency.Scale()
	disc := domain.Discrepancy{
		Type: domain.DisputeExceedsRemaining, Reference: exceedsRemainingPrefix + d.ProviderDisputeID, OrderID: d.OrderID, ChargeID: d.ChargeID,
		ProviderAmount: d.Amount, LocalAmount: left, Currency: d.Currency,
		Note: "dispute " + truncate(d.ProviderDisputeID, 64) + " is for " + d.Amount.StringFixed(scale) + " " + string(d.Currency) +
			", more than is left of the charge in payd's books (" + left.StringFixed(scale) + ": charged " + charged.StringFixed(scale) +
			", refunded " + refunded.StringFixed(scale) + "); the customer may get the money twice: answer the dispute at the provider with the refund as evidence",
	}
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(disc, s.Now))
	if err != nil || !isNew {
		return nil, err
	}
	return &stored, nil
}
