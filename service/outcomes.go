package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// This file holds the rules of ADR 0010: a charge reported for other money
// than the attempt's is held, never applied; a success the provider stands
// by pays the order even after payd recorded the attempt as failed or held.

// sameMoney reports whether the provider's charge is for the attempt's
// amount and currency.
func sameMoney(a domain.Attempt, ch domain.Charge) bool {
	return ch.Currency == string(a.Currency) && ch.Amount.Equal(a.Amount)
}

// mismatchError is what a pay call answers for a held attempt.
func mismatchError(a domain.Attempt) error {
	return fmt.Errorf("%w: the provider reported attempt %s for other money", domain.ErrAmountMismatch, a.ID)
}

// hold settles attempt a whose charge the provider reported succeeded for
// another amount or currency. Nothing is applied: the attempt becomes held
// (with the charge, failure code amount_mismatch) and an amount_mismatch
// discrepancy is recorded, in one transaction. The order stays claimed by
// the request, so no other charge can start, and an operator decides:
// refund (the order is released) or apply (the order is paid). The money is
// not refunded automatically because the report that disagrees is the only
// account payd has of how much was taken.
func (s *Checkout) hold(ctx context.Context, o domain.Order, a domain.Attempt, ch domain.Charge, src domain.LedgerSource) (domain.Order, error) {
	now := s.Now().UTC()
	var held, isNew bool
	var disc domain.Discrepancy
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		held, isNew, disc = false, false, domain.Discrepancy{} // InTx may run fn again after a conflict: start clean
		var err error
		if held, err = s.Attempts.Hold(ctx, a.ID, ch.ID, now); err != nil {
			return err
		}
		if held && ch.Status == domain.ChargeSucceeded {
			// The money moved, though not as asked: the ledger holds what
			// the provider charged (a currency payd cannot read is left to
			// the discrepancy). A hold for other money moved nothing yet:
			// the discrepancy alone tells of it.
			if e, ok := providerChargeEntry(a, o.ID, ch, src, now); ok {
				if err := s.book(ctx, e); err != nil {
					return err
				}
			}
		}
		disc, isNew, err = s.recordMismatch(ctx, a, ch)
		return err
	})
	if err != nil {
		return domain.Order{}, fmt.Errorf("hold attempt %s: %w", a.ID, err)
	}
	if isNew {
		s.obs().DiscrepancyRecorded(ctx, disc) // as stored: its id and status
	}
	if !held {
		// Another report settled the attempt first. A success for the right
		// money stands (the discrepancy shows the operator the
		// contradiction): the pay call answers the paid order, while a
		// webhook or the recoverer learns this report was not applied.
		cur, err := s.Attempts.FindByID(ctx, a.ID)
		if err != nil {
			return domain.Order{}, err
		}
		if cur.Status == domain.AttemptSucceeded {
			if o, err = s.Orders.FindByID(ctx, o.ID); err != nil || src == domain.SourcePayReply {
				return o, err
			}
			return o, mismatchError(a)
		}
	}
	s.observe(ctx, a, PaymentHeld)
	merr := mismatchError(a)
	if src != domain.SourcePayReply && held {
		s.publishSettled(ctx, o, a, merr)
	}
	return o, merr
}

// recordMismatch records what the provider reported about attempt a's
// charge, once per charge (the reconciliation finds the same one under the
// same reference).
func (s *Checkout) recordMismatch(ctx context.Context, a domain.Attempt, ch domain.Charge) (domain.Discrepancy, bool, error) {
	if s.Discrepancies == nil {
		return domain.Discrepancy{}, false, nil
	}
	ref := ch.ID
	if ref == "" {
		ref = a.ID
	}
	d := withProviderAmount(domain.Discrepancy{
		Type: domain.AmountMismatch, Reference: ref, OrderID: a.OrderID, AttemptID: a.ID, ChargeID: ch.ID,
		LocalAmount: a.Amount, Currency: a.Currency,
		Note: "the provider reported the charge for another amount or currency than the attempt; not applied, held for an operator (refund or apply)",
	}, ch.Amount.String(), ch.Currency)
	return s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
}

// errAdoptLost rolls back an adoption that lost its race.
var errAdoptLost = errors.New("adoption lost its race")

// adopt applies the provider's success for attempt id when payd's books
// say the attempt failed (a false decline released the order) or is held:
// the order is claimed again for the attempt's request if it was released,
// the attempt moves to succeeded and the order to paid, in one transaction
// of guarded statements, so it happens only while the order can still take
// this charge. It reports whether payd's books now say the attempt
// succeeded (ours) and whether this call paid the order.
func (s *Checkout) adopt(ctx context.Context, o domain.Order, id, chargeID string, src domain.LedgerSource, now time.Time) (ours, paid bool, err error) {
	cur, err := s.Attempts.FindByID(ctx, id)
	if err != nil {
		return false, false, err
	}
	if _, late := domain.NextAttempt(cur.Status, domain.AttemptChargedLate); !late {
		return false, false, nil // not failed or held: nothing to adopt
	}
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		paid = false // InTx may run fn again after a conflict: start clean
		if cur.Status == domain.AttemptFailed {
			claimed, err := s.Orders.Claim(ctx, o.ID, cur.RequestID, domain.AnyVersion, now)
			if err != nil || !claimed {
				return err // paid by another charge, closed, or being paid: not this charge's order any more
			}
		}
		finished, err := s.Attempts.Adopt(ctx, cur.ID, cur.Status, chargeID, now)
		if err != nil {
			return err
		}
		if !finished {
			return errAdoptLost
		}
		mine := cur
		mine.OrderID = o.ID
		if err := s.book(ctx, chargeEntry(mine, chargeID, src, now)); err != nil {
			return err
		}
		if paid, err = s.Orders.MarkPaid(ctx, o.ID, cur.RequestID, sourceCause(ctx, src, settledRef(src, cur)), now); err == nil && !paid {
			err = errAdoptLost // a held attempt whose order was released meanwhile
		}
		if err != nil {
			return err
		}
		// Refunded at the provider before payd took the charge as the
		// order's payment: counted now (ADR 0030).
		_, err = countOutside(ctx, s.Ledger, s.Orders, o.ID, chargeID, o.Currency, now)
		return err
	})
	if errors.Is(err, errAdoptLost) {
		paid, err = false, nil
	}
	if err != nil || paid {
		return paid, paid, err
	}
	// A concurrent delivery of the same success may have adopted it first.
	ours, err = s.settledAs(ctx, id, chargeID)
	return ours, false, err
}

// settleHeld resolves the open amount_mismatch of an attempt the provider
// now reports for the right money and that has paid its order: the
// discrepancy stays listed on the order, resolved, with why.
func (s *Checkout) settleHeld(ctx context.Context, a domain.Attempt) {
	if s.Discrepancies == nil {
		return
	}
	ds, err := s.Discrepancies.ListByOrder(ctx, a.OrderID)
	if err != nil {
		return // best effort: an operator may still resolve it
	}
	for _, d := range ds {
		if d.Type == domain.AmountMismatch && d.AttemptID == a.ID && d.Status == domain.DiscrepancyOpen {
			_, _ = s.Discrepancies.Resolve(ctx, d.ID, ResolveApply,
				"applied automatically: the provider's record of the charge now agrees with the attempt", s.Now().UTC())
		}
	}
}

// providerStandsBy asks the provider about attempt a's charge and returns
// it only if the provider reports it succeeded for the attempt's amount and
// currency (and, when chargeID is given, as that charge), for the
// attempt's order: a charge the provider says is another order's is a
// *domain.ChargeOwnerError. An operator's
// apply pays an order, so it rests on the provider's word now, never on a
// report payd kept (a held reply that disagreed) or an uploaded file.
func providerStandsBy(ctx context.Context, p PaymentProvider, a domain.Attempt, chargeID string) (domain.Charge, error) {
	ch, err := p.GetCharge(ctx, a)
	if errors.Is(err, domain.ErrChargeNotFound) {
		return domain.Charge{}, fmt.Errorf("%w: the provider has no charge for attempt %s", domain.ErrResolutionNotApplicable, a.ID)
	}
	if err != nil {
		return domain.Charge{}, fmt.Errorf("%w: the provider could not be asked about attempt %s: %w", domain.ErrOutcomeUnknown, a.ID, err)
	}
	switch {
	case ch.Status != domain.ChargeSucceeded:
		return domain.Charge{}, fmt.Errorf("%w: the provider reports attempt %s as %s, not succeeded", domain.ErrResolutionNotApplicable, a.ID, ch.Status)
	case !sameMoney(a, ch):
		return domain.Charge{}, fmt.Errorf("%w: the provider reports attempt %s for %s %s, not the order's %s %s; refund it instead",
			domain.ErrResolutionNotApplicable, a.ID, ch.Amount, ch.Currency, a.Amount, a.Currency)
	case chargeID != "" && ch.ID != chargeID:
		return domain.Charge{}, fmt.Errorf("%w: the provider's charge for attempt %s is %s, not %s", domain.ErrResolutionNotApplicable, a.ID, ch.ID, chargeID)
	case ch.OrderID != "" && ch.OrderID != a.OrderID:
		return domain.Charge{}, &domain.ChargeOwnerError{ChargeID: ch.ID, OrderID: ch.OrderID}
	}
	return ch, nil
}

// ApplyHeld is an operator's apply of a held charge: only once the
// provider, asked now, reports the charge succeeded for the attempt's
// amount and currency does the attempt succeed and the order get paid,
// guarded as any success is. While the provider still reports other money
// apply is refused: the charge is not the order's payment, and refund is
// the operator's tool for it (ADR 0010).
func (s *Checkout) ApplyHeld(ctx context.Context, attemptID, chargeID string) error {
	a, err := s.Attempts.FindByID(ctx, attemptID)
	if err != nil {
		return err
	}
	if a.Status == domain.AttemptSucceeded {
		return nil // applied already
	}
	if a.Status != domain.AttemptHeld {
		return fmt.Errorf("%w: attempt %s is %s, not held; refund or ignore it", domain.ErrResolutionNotApplicable, a.ID, a.Status)
	}
	ch, err := providerStandsBy(ctx, s.Provider, a, chargeID)
	if err != nil {
		return err
	}
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return err
	}
	ours, paid, err := s.adopt(ctx, o, a.ID, ch.ID, domain.SourceOperator, s.Now().UTC())
	if err != nil {
		return err
	}
	if !ours {
		return fmt.Errorf("%w: the order is %s; refund the charge instead", domain.ErrResolutionNotApplicable, o.Status)
	}
	if paid {
		s.changed(o.ID)
		s.observe(ctx, a, PaymentPaid)
	}
	return nil
}

// ReleaseHeld ends a held attempt whose charge an operator refunded: the
// attempt fails (amount_mismatch) and the order is released, so the
// customer may pay again.
func (s *Checkout) ReleaseHeld(ctx context.Context, a domain.Attempt) error {
	now := s.Now().UTC()
	var released bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		released = false // InTx may run fn again after a conflict: start clean
		finished, err := s.Attempts.Reject(ctx, a.ID, now)
		if err != nil || !finished {
			return err
		}
		released, err = s.Orders.Release(ctx, a.OrderID, a.RequestID, causeIn(ctx, domain.Cause{Kind: domain.CauseOperator}), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("release order %s: %w", a.OrderID, err)
	}
	if released {
		s.changed(a.OrderID)
	}
	return nil
}
