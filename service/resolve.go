package service

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Resolutions an operator may choose for a discrepancy.
const (
	ResolveApply  = "apply"  // make payd's books follow the provider's (through the guarded transitions)
	ResolveRefund = "refund" // give the provider's charge back in full
	ResolveIgnore = "ignore" // accept the difference, with a note
)

// Resolver carries out operators' resolutions of discrepancies. Each is
// idempotent: the discrepancy moves open → resolved by a guarded UPDATE
// only after its action succeeded, and the action itself is guarded (a
// transition that already happened affects nothing; a refund's provider key
// is derived from the charge).
type Resolver struct {
	Tx            Transactor
	Orders        OrderStore
	Attempts      AttemptStore
	Discrepancies DiscrepancyStore
	Checkout      *Checkout
	Recoverer     *Recoverer
	Refunds       *Refunds
	Now           func() time.Time
}

// Resolve applies action to discrepancy id and returns it resolved.
func (s *Resolver) Resolve(ctx context.Context, id, action, note string) (domain.Discrepancy, error) {
	d, err := s.Discrepancies.FindByID(ctx, id)
	if err != nil {
		return domain.Discrepancy{}, err
	}
	if d.Status == domain.DiscrepancyResolved {
		if d.Resolution == action {
			return d, nil // what was asked is already done
		}
		return domain.Discrepancy{}, domain.ErrAlreadyResolved
	}
	switch action {
	case ResolveApply:
		err = s.apply(ctx, d)
	case ResolveRefund:
		err = s.refund(ctx, d)
	case ResolveIgnore:
	default:
		return domain.Discrepancy{}, &domain.ValidationError{Field: "action", Reason: "must be apply, refund or ignore"}
	}
	if err != nil {
		return domain.Discrepancy{}, err
	}
	if _, err := s.Discrepancies.Resolve(ctx, d.ID, action, note, s.Now().UTC()); err != nil {
		return domain.Discrepancy{}, err
	}
	return s.Discrepancies.FindByID(ctx, d.ID)
}

// apply makes the order paid by the provider's charge (a missing local
// payment), or asks the provider again about a stuck payment.
func (s *Resolver) apply(ctx context.Context, d domain.Discrepancy) error {
	switch d.Type {
	case domain.StuckProcessing:
		a, err := s.Attempts.FindByID(ctx, d.AttemptID)
		if err != nil {
			return err
		}
		return s.Recoverer.resolve(ctx, a)
	case domain.MissingLocalPayment:
		if d.AttemptID == "" {
			return fmt.Errorf("%w: the charge names no attempt of payd's, so there is no order to apply it to; refund or ignore it", domain.ErrResolutionNotApplicable)
		}
		return s.applyPayment(ctx, d)
	}
	return fmt.Errorf("%w: apply fits missing_local_payment and stuck_processing", domain.ErrResolutionNotApplicable)
}

// applyPayment marks the order paid by the attempt the provider charged:
// claimed for the attempt's request if it was released, the attempt moved
// to succeeded, then paid — one transaction of guarded statements.
func (s *Resolver) applyPayment(ctx context.Context, d domain.Discrepancy) error {
	a, err := s.Attempts.FindByID(ctx, d.AttemptID)
	if err != nil {
		return err
	}
	now := s.Now().UTC()
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.Orders.Claim(ctx, a.OrderID, a.RequestID, now); err != nil {
			return err
		}
		from := []domain.AttemptStatus{domain.AttemptStarted, domain.AttemptUnknown, domain.AttemptFailed}
		if _, err := s.Attempts.Finish(ctx, a.ID, from, domain.AttemptSucceeded, d.ChargeID, "", now); err != nil {
			return err
		}
		paid, err := s.Orders.MarkPaid(ctx, a.OrderID, a.RequestID, now)
		if err != nil {
			return err
		}
		if !paid {
			o, err := s.Orders.FindByID(ctx, a.OrderID)
			if err != nil {
				return err
			}
			if o.Status != domain.StatusPaid || o.PayRequestID != a.RequestID {
				return fmt.Errorf("%w: the order is %s; refund the charge instead", domain.ErrResolutionNotApplicable, o.Status)
			}
		}
		return nil
	})
	if err == nil && s.Checkout != nil {
		s.Checkout.changed(a.OrderID)
	}
	return err
}

// refund gives the discrepancy's charge back in full.
func (s *Resolver) refund(ctx context.Context, d domain.Discrepancy) error {
	if d.ChargeID == "" {
		return fmt.Errorf("%w: there is no provider charge to refund", domain.ErrResolutionNotApplicable)
	}
	r, err := s.Refunds.RefundCharge(ctx, d.OrderID, d.ChargeID, d.ProviderAmount, d.Currency, "resolve "+string(d.Type))
	if err != nil {
		return err
	}
	if r.Status == domain.RefundFailed {
		return fmt.Errorf("%w: refund %s", domain.ErrRefundRefused, r.ID)
	}
	return nil
}
