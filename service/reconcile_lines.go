package service

import (
	"context"
	"errors"

	"github.com/payd/payd/domain"
)

// lineDisagrees says how a settlement file's charge line ch, under the key
// of payd's attempt a, contradicts who the charge belongs to; empty when
// nothing does. A file is nobody's word (as for its refunds): a line that
// names a real attempt's key but another charge or another order than the
// attempt's does not bear out that payment. The line is held to payd's
// record of the attempt (its order, and its charge once known) and, when
// payd knows no charge of the attempt yet and can ask (Charges), to the
// provider's record of the line's charge: its key and its order, as a
// refund resolution asks who owns a charge before it gives it back.
func (s *Reconciler) lineDisagrees(ctx context.Context, ch domain.Charge, a domain.Attempt) (string, error) {
	switch {
	case ch.OrderID != "" && ch.OrderID != a.OrderID:
		return "the settlement file's line under attempt " + a.ID + " names order " + truncate(ch.OrderID, 64) + ", not the attempt's " + a.OrderID, nil
	case a.ProviderChargeID != "" && ch.ID != a.ProviderChargeID:
		return "the settlement file's line under attempt " + a.ID + " names charge " + truncate(ch.ID, 64) + ", not the attempt's " + truncate(a.ProviderChargeID, 64), nil
	case a.ProviderChargeID != "" || s.Charges == nil:
		return "", nil
	}
	truth, err := s.Charges.FindCharge(ctx, ch.ID)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return "the provider has no charge " + truncate(ch.ID, 64) + ", which the settlement file's line under attempt " + a.ID + " names", nil
	case err != nil:
		return "", err
	case truth.IdempotencyKey != "" && truth.IdempotencyKey != a.ID:
		return "the provider's charge " + truncate(ch.ID, 64) + " is under key " + truncate(truth.IdempotencyKey, 64) + ", not attempt " + a.ID + " as the settlement file says", nil
	case truth.OrderID != "" && truth.OrderID != a.OrderID:
		return "the provider says charge " + truncate(ch.ID, 64) + " pays order " + truncate(truth.OrderID, 64) + ", not the attempt's " + a.OrderID, nil
	}
	return "", nil
}
