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
	ResolveApply  = domain.ActionApply  // make payd's books follow the provider's (through the guarded transitions)
	ResolveRefund = domain.ActionRefund // give the provider's charge back in full
	ResolveIgnore = domain.ActionIgnore // accept the difference, with a note
)

// ResolveAuto is the resolution payd records itself when it refunded a
// charge an order could not take as soon as it found it; no operator
// chooses it, but asking to refund such a discrepancy agrees with it.
const ResolveAuto = domain.ResolutionAutoRefunded

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
	// Charges is the provider's record of a charge by its own ID. A
	// refund moves money, so it is asked first: without it, refund is
	// refused.
	Charges ChargeFinder
	Now     func() time.Time
	// Ledger, optional in tests, books a charge an operator applies.
	Ledger LedgerStore
}

// Resolve applies action to discrepancy id and returns it resolved. An
// action domain's table does not fit the discrepancy is refused before
// anything is claimed or asked; every refusal (*domain.UnfitError) names
// the actions that may still resolve it. The
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
	// domain's Admit decides, as it decides what the discrepancy's
	// actions list.
	switch done, err := d.Admit(action); {
	case err != nil:
		return domain.Discrepancy{}, err
	case done:
		return d, nil // what was asked is already done
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
		if errors.Is(err, domain.ErrResolutionNotApplicable) {
			// Refused once the provider was asked: the other actions the
			// table fits may still do (d as read, open).
			d.Status = domain.DiscrepancyOpen
			err = domain.Unfit(d, action, err)
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
	// Which types apply fits, and that they name an attempt, is
	// domain's table's to say (Resolve asked it); this only dispatches.
	switch d.Type {
	case domain.StuckProcessing:
		return s.recover(ctx, d)
	case domain.MissingLocalPayment:
		return s.applyPayment(ctx, d)
	case domain.AmountMismatch:
		return s.Checkout.ApplyHeld(ctx, d.AttemptID, d.ChargeID)
	}
	return fmt.Errorf("%w: apply does not fit a %s discrepancy", domain.ErrResolutionNotApplicable, d.Type)
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
	if o.ClaimedBy(a) {
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
		paid, err := s.Orders.MarkPaid(ctx, a.OrderID, a.RequestID, causeIn(ctx, domain.Cause{Kind: domain.CauseOperator}), now)
		if err != nil {
			return err
		}
		if paid && !applied {
			if err := appendEntry(ctx, s.Ledger, payingEntry(a, d.ChargeID, domain.SourceOperator, now)); err != nil {
				return err
			}
		}
		if paid {
			// Refunded at the provider before the charge paid the
			// order: counted now (ADR 0030).
			if _, err := countOutside(ctx, s.Ledger, s.Orders, a.OrderID, d.ChargeID, a.Currency, now); err != nil {
				return err
			}
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

// refund gives the discrepancy's charge back. The discrepancy came from
// an uploaded file or an event, neither of which moves money, so the
// provider is asked about the charge first, and its answer decides:
//   - a charge under an open dispute is refused (domain.ErrChargeDisputed);
//   - a charge that pays an order of payd's is that order's payment: it is
//     refunded only when the discrepancy is about that very order, through
//     the order's one refund path (reserved, limited), for what is left;
//     otherwise it is refused as another order's (*domain.ChargeOwnerError),
//     a discrepancy naming no order or an unknown one included;
//   - a charge that pays no order (a duplicate, a charge after close, a
//     held charge, one payd never asked for) is given back whole, for what
//     the provider says is left. A held attempt's order (amount_mismatch,
//     ADR 0010) is then released so the customer may pay again.
//
// The amount is always the provider's, never the file's or the event's.
func (s *Resolver) refund(ctx context.Context, d domain.Discrepancy) error {
	// Which types refund fits, and that they name a charge, is domain's
	// table's to say (Resolve asked it).
	if !d.Fits(ResolveRefund) {
		return fmt.Errorf("%w: refund does not fit a %s discrepancy", domain.ErrResolutionNotApplicable, d.Type)
	}
	if s.Charges == nil {
		return fmt.Errorf("%w: payd cannot ask this provider about charge %s, so it refunds nothing on a report's word", domain.ErrResolutionNotApplicable, d.ChargeID)
	}
	if err := s.learnEarlier(ctx, d); err != nil {
		return err
	}
	ch, err := askCharge(ctx, s.Charges, d.ChargeID, domain.ErrResolutionNotApplicable)
	if err != nil {
		return s.Refunds.disputeRefusal(ctx, d.OrderID, d.ChargeID, err)
	}
	o, pays, err := s.paidBy(ctx, ch)
	switch {
	case err != nil:
		return err
	case o.ID == "":
		// Not payd's money: no order of payd's to book it against, and no
		// file or event may name one for it.
		return fmt.Errorf("%w: the provider's charge %s pays no order of payd's; refund it at the provider if it must be", domain.ErrResolutionNotApplicable, ch.ID)
	case pays && o.ID != d.OrderID:
		return &domain.ChargeOwnerError{ChargeID: ch.ID, OrderID: o.ID}
	}
	// The provider stands by the charge: the money moved, whatever payd
	// recorded of it, and its refund is booked beside it. A charge that
	// may be no attempt's of the order's (the provider's record names the
	// order) raises the order's version as it is booked, as every booking
	// about an order that is not its own attempt's does: a pay settling
	// the order's first claim meanwhile then reads the order's books
	// rather than knowing them (ADR 0067).
	if e, ok := seenChargeEntry(o.ID, ch, domain.SourceOperator, s.Now().UTC()); ok && s.Ledger != nil && e.ChargeID != "" {
		err := s.Tx.InTx(ctx, func(ctx context.Context) error {
			isNew, err := s.Ledger.Append(ctx, e)
			if err != nil || !isNew {
				return err
			}
			_, err = s.Orders.Lock(ctx, o.ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("book %s %s: %w", e.Kind, e.Reference, err)
		}
	}
	if pays {
		return s.refundPayment(ctx, d, o, ch)
	}
	return s.refundOrphan(ctx, d, ch, o.ID)
}

// learnEarlier asks the provider what became of the refunds an earlier
// try of this resolution left pending — by each refund's own key, as a
// pay retry asks about its attempt — before anything is decided from the
// charge as it stands now: the charge may show the money back, or a
// dispute opened since, and neither must make a second refund or a
// refusal of one that moved money. Those refunds are the order's refund
// under the resolution's request ID and the charge's whole refund
// (autoRefundKey). One whose outcome is still unknown is the answer:
// nothing more is tried until the provider tells.
func (s *Resolver) learnEarlier(ctx context.Context, d domain.Discrepancy) error {
	var earlier []domain.Refund
	if d.OrderID != "" {
		rs, err := s.Refunds.Store.ListByOrder(ctx, d.OrderID)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Kind == domain.RefundManual && r.RequestID == resolveRequestID(d) {
				earlier = append(earlier, r)
			}
		}
	}
	if r, err := s.Refunds.Store.FindByProviderKey(ctx, autoRefundKey(d.ChargeID)); err == nil {
		earlier = append(earlier, r)
	} else if !errors.Is(err, domain.ErrRefundNotFound) {
		return err
	}
	for _, r := range earlier {
		if r.Status != domain.RefundPending {
			continue
		}
		r, err := s.Refunds.ask(ctx, r, domain.SourcePayReply)
		if err != nil && !errors.Is(err, domain.ErrRefundRefused) {
			return err
		}
		if r.Status == domain.RefundPending {
			return fmt.Errorf("%w: the provider has not confirmed refund %s yet", domain.ErrOutcomeUnknown, r.ID)
		}
	}
	return nil
}

// resolveRequestID is the request ID of the order refund a refund
// resolution of d makes: one per discrepancy, so every try finds it.
func resolveRequestID(d domain.Discrepancy) string { return "resolve:" + d.ID }

// paidBy returns the order of payd's charge ch is for (zero when payd has
// none) and whether ch is that order's payment: the order is paid (or
// refunded) by the attempt that holds this charge. The order is the one
// the provider names, or else the one of payd's attempt under the
// charge's key, so a provider that reports no order still cannot have a
// paying charge taken for an orphan.
func (s *Resolver) paidBy(ctx context.Context, ch domain.Charge) (domain.Order, bool, error) {
	orderID := ch.OrderID
	if !domain.ValidID(orderID) {
		a, err := s.Attempts.FindByID(ctx, ch.IdempotencyKey)
		if errors.Is(err, domain.ErrAttemptNotFound) {
			return domain.Order{}, false, nil
		}
		if err != nil {
			return domain.Order{}, false, err
		}
		orderID = a.OrderID
	}
	o, err := s.Orders.FindByID(ctx, orderID)
	if errors.Is(err, domain.ErrOrderNotFound) {
		return domain.Order{}, false, nil
	}
	if err != nil || !o.Status.WasPaid() {
		return o, false, err
	}
	a, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		return o, false, nil
	}
	return o, err == nil && a.SucceededWith(ch.ID), err
}

// refundPayment refunds what is left of order o's paying charge ch through
// the order's refund path. Its request ID is the discrepancy's, so a
// repeat of the resolution finds the refund it made instead of making
// another. A charge for more than the order (payd's books counted less
// than the provider took) holds money beyond the order that is nobody's
// payment: it is given back whole, as an orphan's is, once.
func (s *Resolver) refundPayment(ctx context.Context, d domain.Discrepancy, o domain.Order, ch domain.Charge) error {
	extra := decimal.Max(ch.Amount.Sub(o.Amount), decimal.Zero)
	part := ch
	part.Amount = ch.Amount.Sub(extra) // the order's share of what is left
	req := RefundRequest{OrderID: o.ID, RequestID: resolveRequestID(d), Fingerprint: resolveRequestID(d), Reason: "resolve " + string(d.Type)}
	r, _, err := s.Refunds.refund(ctx, req, &part)
	if err == nil && r.Status == domain.RefundPending {
		// A repeat found the refund pending (a concurrent resolution is
		// asking, or the provider did not answer): ask again under its key.
		r, err = s.Refunds.ask(ctx, r, domain.SourcePayReply)
	}
	if err != nil {
		return err
	}
	if err := settledRefund(r); err != nil || !extra.IsPositive() {
		return err
	}
	x, err := s.Refunds.RefundCharge(ctx, o.ID, ch.ID, extra, o.Currency, "resolve "+string(d.Type)+": charged beyond the order")
	if err != nil {
		return err
	}
	return settledRefund(x)
}

// refundOrphan gives back what is left of a charge that pays no order,
// recorded against the order the provider names (never one a file or an
// event names).
func (s *Resolver) refundOrphan(ctx context.Context, d domain.Discrepancy, ch domain.Charge, orderID string) error {
	if a, err := s.Attempts.FindByID(ctx, ch.IdempotencyKey); err == nil && a.Status.Unsettled() {
		// Its payment may yet succeed and pay the order: a refund now
		// would leave the order paid by money given back.
		return fmt.Errorf("%w: payd is still settling attempt %s of charge %s; apply asks the provider and settles it", domain.ErrResolutionNotApplicable, a.ID, ch.ID)
	} else if err != nil && !errors.Is(err, domain.ErrAttemptNotFound) {
		return err
	}
	amount := leftOn(ch)
	if !amount.IsPositive() {
		// Nothing is left at the provider: done, if it was payd's own
		// refund (perhaps a concurrent resolution's, not recorded yet:
		// RefundCharge asks again under its key).
		r, err := s.Refunds.Store.FindByProviderKey(ctx, autoRefundKey(ch.ID))
		if errors.Is(err, domain.ErrRefundNotFound) {
			return fmt.Errorf("%w: the provider reports nothing left to refund of charge %s", domain.ErrResolutionNotApplicable, ch.ID)
		}
		if err != nil {
			return err
		}
		amount = r.Amount
	}
	var held *domain.Attempt
	if d.Type == domain.AmountMismatch && d.AttemptID != "" {
		a, err := s.Attempts.FindByID(ctx, d.AttemptID)
		if err != nil {
			return err
		}
		if a.Status == domain.AttemptHeld && a.ProviderChargeID == ch.ID {
			held = &a
		}
	}
	cur, err := domain.ParseCurrency(ch.Currency)
	if err != nil {
		return fmt.Errorf("%w: the provider reports charge %s in %q", domain.ErrResolutionNotApplicable, ch.ID, ch.Currency)
	}
	r, err := s.Refunds.RefundCharge(ctx, orderID, ch.ID, amount, cur, "resolve "+string(d.Type))
	if err != nil {
		return err
	}
	if err := settledRefund(r); err != nil {
		return err
	}
	if held != nil {
		return s.Checkout.ReleaseHeld(ctx, *held)
	}
	return nil
}

// settledRefund is nil once the provider gave refund r's money back.
// Resolved means the money is back: until the provider says so, the
// discrepancy stays open and the operator may ask again.
func settledRefund(r domain.Refund) error {
	switch r.Status {
	case domain.RefundFailed:
		return fmt.Errorf("%w: refund %s", domain.ErrRefundRefused, r.ID)
	case domain.RefundPending:
		return fmt.Errorf("%w: the provider has not confirmed refund %s yet", domain.ErrOutcomeUnknown, r.ID)
	}
	return nil
}
