package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/payd/payd/domain"
)

// disputeRefusal words a refund's refusal err for a disputed charge as
// payd's records of the charge's disputes tell it: the provider reports
// money disputed and not given back both while a dispute is open and
// after it was lost, and an operator told "under an open dispute" of a
// dispute that is over looks for something to answer at the provider.
// When none of the charge's disputes that order orderID keeps is open and
// one was lost, the refusal is domain.ErrChargeDisputeLost (still a
// domain.ErrChargeDisputed); otherwise, and for any other error, err is
// returned as it is. A failure to read the disputes leaves err as well:
// the refusal stands either way, only its wording is at stake.
func (s *Refunds) disputeRefusal(ctx context.Context, orderID, chargeID string, err error) error {
	if !errors.Is(err, domain.ErrChargeDisputed) || errors.Is(err, domain.ErrChargeDisputeLost) ||
		s == nil || s.Disputes == nil || orderID == "" || chargeID == "" {
		return err
	}
	ds, lerr := s.Disputes.ListByOrder(ctx, orderID)
	if lerr != nil {
		return err
	}
	lost := false
	for _, d := range ds {
		if d.ChargeID != chargeID {
			continue
		}
		switch d.Status {
		case domain.DisputeOpen:
			return err // an open one decides: its money may still come back
		case domain.DisputeLost:
			lost = true
		}
	}
	if !lost {
		return err
	}
	return fmt.Errorf("%w: charge %s: %w", domain.ErrChargeDisputeLost, truncate(chargeID, 64), err)
}
