package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// Resolutions an operator may choose for a discrepancy.
const (
	ResolveApply  = "apply"  // make payd's books follow the provider's (through the guarded transitions)
	ResolveRefund = "refund" // give the provider's charge back in full
	ResolveIgnore = "ignore" // accept the difference, with a note
)

// ResolveAuto is the resolution payd records itself when it refunded a
// charge an order could not take as soon as it found it; no operator
// chooses it, but asking to refund such a discrepancy agrees with it.
const ResolveAuto = "auto_refunded"

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
	// Ledger, optional in tests, books a charge an operator applies.
	Ledger LedgerStore
}

// Resolve applies action to discrepancy id and returns it resolved. The
// discrepancy is claimed for the action first (open → resolving), so two
// operators choosing different actions at once cannot both act; the claim
// is settled when the action succeeded and given back when it failed. A
// repeat of the same action — also one that finds the claim of a request
// that died — carries the (idempotent) action out again and settles it.
func (s *Resolver) Resolve(ctx context.Context, id, action, note string) (domain.Discrepancy, error) {
	if action != ResolveApply && action != ResolveRefund && action != ResolveIgnore {
		return domain.Discrepancy{}, &domain.ValidationError{Field: "action", Reason: "must be apply, refund or ignore"}
	}
	d, err := s.Discrepancies.FindByID(ctx, id)
	if err != nil {
		return domain.Discrepancy{}, err
	}
	switch {
	case d.Status == domain.DiscrepancyResolved:
		if d.Resolution == action || (d.Resolution == ResolveAuto && action == ResolveRefund) {
			return d, nil // what was asked is already done
		}
		return domain.Discrepancy{}, domain.ErrAlreadyResolved
	case d.Status == domain.DiscrepancyResolving && d.Resolution != action:
		return domain.Discrepancy{}, domain.ErrAlreadyResolved
	}
	claimed := false
	if d.Status == domain.DiscrepancyOpen {
		if claimed, err = s.Discrepancies.Claim(ctx, d.ID, action, s.Now().UTC()); err != nil {
			return domain.Discrepancy{}, err
		}
		if !claimed {
			return s.Resolve(ctx, id, action, note) // someone else claimed it: decide from what they chose
		}
	}
	if err := s.act(ctx, d, action); err != nil {
		// Only the claimant gives the claim back: a concurrent repeat of
		// the same action failing must not open a discrepancy whose
		// claimant is still at work.
		if claimed {
			if _, uerr := s.Discrepancies.Unclaim(context.WithoutCancel(ctx), d.ID, action); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return domain.Discrepancy{}, err
	}
	if _, err := s.Discrepancies.Settle(ctx, d.ID, action, note, s.Now().UTC()); err != nil {
		return domain.Discrepancy{}, err
	}
	d, err = s.Discrepancies.FindByID(ctx, d.ID)
	if err == nil && d.Status != domain.DiscrepancyResolved {
		err = fmt.Errorf("%w: discrepancy %s is being resolved by another request", domain.ErrOutcomeUnknown, d.ID)
	}
	return d, err
}

func (s *Resolver) act(ctx context.Context, d domain.Discrepancy, action string) error {
	switch action {
	case ResolveApply:
		return s.apply(ctx, d)
	case ResolveRefund:
		return s.refund(ctx, d)
	}
	return nil
}

// apply makes the order paid by the provider's charge (a missing local
// payment), or asks the provider again about a stuck payment.
func (s *Resolver) apply(ctx context.Context, d domain.Discrepancy) error {
	switch d.Type {
	case domain.StuckProcessing:
		return s.recover(ctx, d)
	case domain.MissingLocalPayment:
		if d.AttemptID == "" {
			return fmt.Errorf("%w: the charge names no attempt of payd's, so there is no order to apply it to; refund or ignore it", domain.ErrResolutionNotApplicable)
		}
		return s.applyPayment(ctx, d)
	case domain.AmountMismatch:
		if d.AttemptID == "" {
			return fmt.Errorf("%w: the charge names no attempt of payd's; refund or ignore it", domain.ErrResolutionNotApplicable)
		}
		return s.Checkout.ApplyHeld(ctx, d.AttemptID, d.ChargeID)
	}
	return fmt.Errorf("%w: apply fits missing_local_payment, stuck_processing and a held amount_mismatch", domain.ErrResolutionNotApplicable)
}

// recover asks the provider about a stuck payment and settles it as the
// recoverer would. It succeeds only when the payment is settled: were the
// provider unreachable or the charge still pending, marking the
// discrepancy resolved would hide a payment that is still stuck (a re-run
// finds the same one, already resolved, and reports nothing new), so the
// operator is told to try again later instead.
//
// An unsettled attempt is leased first, as the recoverer and a retry of the
// pay key do, and read again under the lease: otherwise a retry could
// resend the charge between this read and the provider's answer, and a
// "not found" judged by the old row's in-flight deadline would release an
// order whose charge is on its way (ADR 9). If another worker holds the
// lease, the payment is being settled: the operator tries again later.
func (s *Resolver) recover(ctx context.Context, d domain.Discrepancy) error {
	a, err := s.Attempts.FindByID(ctx, d.AttemptID)
	if err != nil {
		return err
	}
	if a.Status.Unsettled() {
		now := s.Now().UTC()
		until := s.Checkout.inFlightUntil(now) // one provider call, and its margin
		won, err := s.Attempts.Lease(ctx, a.ID, now, until)
		if err != nil {
			return err
		}
		if won {
			defer func() { _, _ = s.Attempts.Unlease(context.WithoutCancel(ctx), a.ID, until) }()
		}
		if a, err = s.Attempts.FindByID(ctx, a.ID); err != nil {
			return err
		}
		if !won && a.Status.Unsettled() {
			return fmt.Errorf("%w: attempt %s is being settled by another worker; try again later", domain.ErrOutcomeUnknown, a.ID)
		}
	}
	if err := s.Recoverer.resolve(ctx, a); err != nil {
		return fmt.Errorf("%w: the provider could not be asked about attempt %s: %w", domain.ErrOutcomeUnknown, a.ID, err)
	}
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return err
	}
	if o.Status == domain.StatusProcessing && o.PayRequestID == a.RequestID {
		return fmt.Errorf("%w: the provider has not settled attempt %s yet", domain.ErrOutcomeUnknown, a.ID)
	}
	return nil
}

// applyPayment marks the order paid by the attempt the provider charged:
// claimed for the attempt's request if it was released, the attempt moved
// to succeeded, then paid — one transaction of guarded statements. The
// discrepancy may come from an uploaded settlement file, which nobody
// signed, so the provider is asked first: only a charge it reports
// succeeded, as this charge, for the attempt's amount and currency is applied.
func (s *Resolver) applyPayment(ctx context.Context, d domain.Discrepancy) error {
	a, err := s.Attempts.FindByID(ctx, d.AttemptID)
	if err != nil {
		return err
	}
	if _, err := providerStandsBy(ctx, s.Recoverer.Provider, a, d.ChargeID); err != nil {
		return err
	}
	now := s.Now().UTC()
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.Orders.Claim(ctx, a.OrderID, a.RequestID, domain.AnyVersion, now); err != nil {
			return err
		}
		applied, err := s.Attempts.Apply(ctx, a.ID, d.ChargeID, now)
		if err != nil {
			return err
		}
		if applied {
			if err := appendEntry(ctx, s.Ledger, chargeEntry(a, d.ChargeID, domain.SourceOperator, now)); err != nil {
				return err
			}
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

// refund gives the discrepancy's charge back in full. A held charge
// (amount_mismatch, ADR 0010) is given back as the provider records it now
// — the report that disagreed cannot be trusted for the amount — and its
// order is then released so the customer may pay again.
func (s *Resolver) refund(ctx context.Context, d domain.Discrepancy) error {
	if d.ChargeID == "" {
		return fmt.Errorf("%w: there is no provider charge to refund", domain.ErrResolutionNotApplicable)
	}
	amount, cur := d.ProviderAmount, d.Currency
	var held *domain.Attempt
	if d.Type == domain.AmountMismatch && d.AttemptID != "" {
		a, err := s.Attempts.FindByID(ctx, d.AttemptID)
		if err != nil {
			return err
		}
		if a.Status == domain.AttemptHeld {
			held = &a
			if amount, cur, err = s.heldCharge(ctx, a); err != nil {
				return err
			}
		}
	}
	r, err := s.Refunds.RefundCharge(ctx, d.OrderID, d.ChargeID, amount, cur, "resolve "+string(d.Type))
	if err != nil {
		return err
	}
	switch r.Status {
	case domain.RefundFailed:
		return fmt.Errorf("%w: refund %s", domain.ErrRefundRefused, r.ID)
	case domain.RefundPending:
		// Resolved means the money is back; until the provider says so,
		// the discrepancy stays open and the operator may ask again.
		return fmt.Errorf("%w: the provider has not confirmed refund %s yet", domain.ErrOutcomeUnknown, r.ID)
	}
	if held != nil {
		return s.Checkout.ReleaseHeld(ctx, *held)
	}
	return nil
}

// heldCharge is what remains of a held attempt's charge at the provider.
func (s *Resolver) heldCharge(ctx context.Context, a domain.Attempt) (decimal.Decimal, domain.Currency, error) {
	ch, err := s.Recoverer.Provider.GetCharge(ctx, a.ID)
	if err != nil {
		return decimal.Zero, "", fmt.Errorf("%w: the provider could not be asked about attempt %s: %w", domain.ErrOutcomeUnknown, a.ID, err)
	}
	cur, err := domain.ParseCurrency(ch.Currency)
	if err != nil || ch.Status != domain.ChargeSucceeded {
		return decimal.Zero, "", fmt.Errorf("%w: the provider reports attempt %s as %s %s", domain.ErrResolutionNotApplicable, a.ID, ch.Status, ch.Currency)
	}
	return ch.Amount.Sub(ch.RefundedAmount), cur, nil
}
