package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// RefundProvider is what refunds need from the payment provider.
type RefundProvider interface {
	Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error)
}

// RefundGetter is what a provider whose refunds may wait (Stripe's
// pending) offers besides: its refund asked by the ID it gave. Refunds
// asks by ID once it has one, rather than replaying a create whose first
// (pending) answer would be repeated forever.
type RefundGetter interface {
	GetRefund(ctx context.Context, providerRefundID string) (domain.ProviderRefund, error)
}

// Refunds gives money back: part or all of a paid order at an operator's
// request, and automatically any charge an order cannot take. Every refund
// is first recorded (and, for an order's own payment, reserved on the order
// by a guarded UPDATE that cannot exceed what was paid), then asked of the
// provider under its own idempotency key.
type Refunds struct {
	Tx            Transactor
	Orders        OrderStore
	Attempts      AttemptStore
	Store         RefundStore
	Discrepancies DiscrepancyStore
	Provider      RefundProvider
	// Getter, optional (nil for the sandbox, whose refunds never wait),
	// asks about a refund the provider answered pending, by its ID.
	Getter RefundGetter
	// Charges is the provider's record of a charge by its ID. An
	// operator's refund asks it first (one call): which order the paying
	// charge pays and whether a dispute holds it; an outside refund is
	// recorded only once it shows it. Nil (in tests) skips the question.
	Charges ChargeFinder
	Now     func() time.Time
	// Observer, optional, is told of each order a refund changes and each
	// discrepancy a refund newly records.
	Observer Observer
	// Ledger, optional in tests, records each refund the provider
	// confirmed, in the transaction that marks it succeeded (ADR 0030).
	Ledger LedgerStore
	// Audit, optional in tests, records outside refunds, the provider as actor.
	Audit AuditStore
	// Disputes, optional in tests, refuses a refund of a charge under an
	// open dispute (domain.ErrChargeDisputed).
	Disputes DisputeStore
}

// Orphan refunds a charge that order o cannot take and records why: a
// duplicate charge when another charge paid the order, a payment after
// close when it was cancelled or expired. Doing it twice for one charge is
// harmless: the refund's provider key is derived from the charge. When the
// provider confirmed the refund, the discrepancy is recorded resolved
// (auto_refunded): the money is back and no operator needs to act, yet it
// stays listed on the order. A refund still pending or refused leaves it
// open for an operator. A charge for an order that is neither (another
// request is paying it right now) is not refunded: it is recorded open as
// a missing local payment, for an operator to settle once that payment
// has an outcome (ADR 0010).
func (s *Refunds) Orphan(ctx context.Context, o domain.Order, a domain.Attempt, chargeID string, src domain.LedgerSource) error {
	var kind domain.DiscrepancyType
	switch {
	case o.Status.WasPaid():
		kind = domain.DuplicateCharge
	case o.Status == domain.StatusCancelled || o.Status == domain.StatusExpired,
		o.Status == domain.StatusPending && !s.Now().Before(o.ExpiresAt):
		kind = domain.PaidAfterClose
	default:
		d := newDiscrepancy(domain.Discrepancy{
			Type: domain.MissingLocalPayment, Reference: chargeID, OrderID: o.ID, AttemptID: a.ID, ChargeID: chargeID,
			ProviderAmount: a.Amount, LocalAmount: o.Amount, Currency: a.Currency,
			Note: "the provider charged this attempt while another request holds the order; refund it if that payment succeeds",
		}, s.Now)
		_, isNew, err := s.Discrepancies.Record(ctx, d)
		if isNew {
			observing(s.Observer).DiscrepancyRecorded(ctx, d)
		}
		return err
	}
	// The charge happened, though the order cannot take it: the ledger
	// holds it beside its refund.
	orphan := a
	orphan.OrderID = o.ID
	if err := appendEntry(ctx, s.Ledger, chargeEntry(orphan, chargeID, src, s.Now().UTC())); err != nil {
		return err
	}
	r, err := s.refundCharge(ctx, o.ID, chargeID, a.Amount, a.Currency, string(kind))
	if err != nil {
		return err
	}
	observing(s.Observer).RefundedAutomatically(ctx, r)
	d := newDiscrepancy(domain.Discrepancy{
		Type: kind, Reference: chargeID, OrderID: o.ID, AttemptID: a.ID, ChargeID: chargeID,
		ProviderAmount: a.Amount, LocalAmount: o.Amount, Currency: a.Currency,
		Note: fmt.Sprintf("refunded automatically (refund %s, %s)", r.ID, r.Status),
	}, s.Now)
	if r.Status == domain.RefundSucceeded {
		at := d.DetectedAt
		d.Status, d.Resolution, d.ResolvedAt = domain.DiscrepancyResolved, ResolveAuto, &at
	}
	_, isNew, err := s.Discrepancies.Record(ctx, d)
	if isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, d)
	}
	return err
}

// refundCharge gives back a whole charge the order never counted as its
// payment; the order's own amounts do not change.
func (s *Refunds) refundCharge(ctx context.Context, orderID, chargeID string, amount decimal.Decimal, cur domain.Currency, reason string) (domain.Refund, error) {
	now := s.Now().UTC()
	r := domain.Refund{
		ID: newID(), OrderID: orderID, ChargeID: chargeID, Kind: domain.RefundAuto, ProviderKey: autoRefundKey(chargeID),
		Amount: amount, Currency: cur, Status: domain.RefundPending, Reason: reason, CreatedAt: now, UpdatedAt: now,
	}
	err := s.Store.Create(ctx, r)
	if errors.Is(err, domain.ErrRefundExists) {
		existing, err := s.Store.FindByProviderKey(ctx, r.ProviderKey)
		if err != nil || existing.Status != domain.RefundPending {
			return existing, err
		}
		// Its outcome is not known here (another request may be asking right
		// now): ask again, which the provider key makes safe.
		return s.ask(ctx, existing, domain.SourcePayReply)
	}
	if err != nil {
		return domain.Refund{}, fmt.Errorf("record refund of %s: %w", chargeID, err)
	}
	return s.ask(ctx, r, domain.SourcePayReply)
}

// autoRefundKey is the provider key of the refund that gives a whole
// charge back: derived from the charge, so it is made at most once.
func autoRefundKey(chargeID string) string { return "auto-" + chargeID }

// ask sends a recorded refund to the provider and records the answer. An
// unknown outcome leaves it pending for the recoverer, which asks again
// under the same key. A refund the provider answered pending stays
// pending with the provider's ID, and is asked about by that ID (Getter)
// from then on; its webhook (Confirmed, Failed) or that ask settles it.
func (s *Refunds) ask(ctx context.Context, r domain.Refund, src domain.LedgerSource) (domain.Refund, error) {
	var pr domain.ProviderRefund
	var err error
	if r.ProviderRefundID != "" && s.Getter != nil {
		pr, err = s.Getter.GetRefund(ctx, r.ProviderRefundID)
	} else {
		pr, err = s.Provider.Refund(ctx, domain.ProviderRefundRequest{
			IdempotencyKey: r.ProviderKey, ChargeID: r.ChargeID, Amount: r.Amount, Currency: string(r.Currency), Reason: r.Reason,
		})
	}
	switch {
	case errors.Is(err, domain.ErrProviderUnavailable):
		return r, nil
	case domain.IsProviderRequestError(err, "") && refusal(err) == nil:
		// A 409 (another request under the key is in progress) or the key
		// used with other parameters: the key may hold a refund that moved
		// money, so nothing is known yet (as for a charge, ADR 9).
		return r, nil
	case err != nil:
		return s.refusedNow(ctx, r, "", err)
	}
	switch pr.Status {
	case domain.ChargePending:
		// Not given back yet (Stripe's pending, requires_action): nothing
		// is settled. The provider's ID is kept for the next ask.
		if r.ProviderRefundID == "" && pr.ID != "" {
			if _, err := s.Store.RecordProviderID(ctx, r.ID, pr.ID); err != nil {
				return r, err
			}
			r, _ = r.Apply(domain.RefundEventIdentify, pr.ID)
		}
		return r, nil
	case domain.ChargeFailed:
		return s.refusedNow(ctx, r, pr.ID, errors.New("provider refused the refund"))
	}
	if !sameRefund(r, pr.Amount.String(), pr.Currency) {
		return r, s.refundMismatch(ctx, r, pr.ID, pr.Amount.String(), pr.Currency)
	}
	if err := s.succeeded(ctx, r, pr.ID, src); err != nil {
		return r, err
	}
	r, _ = r.Apply(domain.RefundEventSucceed, pr.ID) // r is pending: ask is asked only about pending refunds
	return r, nil
}

// succeeded marks refund r succeeded as the provider's providerRefundID,
// turns its reservation into confirmed money on the order (an order's own
// refund: settle) and books it, in one transaction; a refund already
// marked so by another path (its reply, its webhook) was booked there.
// Should the order's confirmed refunds be unable to take it (only a
// provider that gave back more than was paid could make that so), its
// reservation is released, the money stays booked, and the order is
// repaired from its ledger (Heal, which checks every confirmed refund's
// order, and repairs and reports only a difference).
func (s *Refunds) succeeded(ctx context.Context, r domain.Refund, providerRefundID string, src domain.LedgerSource) error {
	now := s.Now().UTC()
	settled := true
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		settled = true // InTx may run fn again after a conflict: start clean
		finished, err := s.Store.Finish(ctx, r.ID, domain.RefundSucceeded, providerRefundID, now)
		if err != nil || !finished {
			return err
		}
		if r.Kind == domain.RefundManual {
			minor := domain.MinorUnits(r.Amount, r.Currency)
			if settled, err = s.Orders.MoveRefund(ctx, r.OrderID, domain.MoveSettle, minor, now); err != nil {
				return err
			}
			if !settled {
				if _, err := s.Orders.MoveRefund(ctx, r.OrderID, domain.MoveRelease, minor, now); err != nil {
					return err
				}
			}
		}
		ref := r.RequestID
		if ref == "" || src == domain.SourceRecoverer {
			ref = r.ID
		}
		return s.bookRefund(ctx, refundEntry(r, providerRefundID, src, now), sourceCause(ctx, src, ref), now)
	})
	if err != nil {
		return err
	}
	observing(s.Observer).OrderChanged(r.OrderID)
	_, err = s.Heal(ctx, r.OrderID, src) // the cheap check after a money event; it repairs only a difference
	return err
}

// bookRefund books e, a refund whose money moved, in the caller's
// transaction and, when it is new, tells the order's endpoints: the
// refund's order.refunded event is written with its entry (ADR 0053), so a
// refund the provider refused, whose reservation is given back, is never
// told.
func (s *Refunds) bookRefund(ctx context.Context, e domain.LedgerEntry, c domain.Cause, now time.Time) error {
	isNew := true // without a ledger (tests), Finish's guard decides once
	if s.Ledger != nil {
		var err error
		if isNew, err = s.Ledger.Append(ctx, e); err != nil {
			return fmt.Errorf("book %s %s: %w", e.Kind, e.Reference, err)
		}
	}
	if !isNew {
		return nil
	}
	return s.Orders.Tell(ctx, e.OrderID, domain.NotifyOrderRefunded, c, now)
}

// refused marks a refund the provider definitively refused as failed and,
// for an order's own payment, releases its reservation: nothing confirmed
// goes with it, and nothing is told, for no money moved.
func (s *Refunds) refused(ctx context.Context, r domain.Refund, providerRefundID string, cause error) error {
	now := s.Now().UTC()
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		finished, err := s.Store.Finish(ctx, r.ID, domain.RefundFailed, providerRefundID, now)
		if err != nil || !finished || r.Kind != domain.RefundManual {
			return err
		}
		_, err = s.Orders.MoveRefund(ctx, r.OrderID, domain.MoveRelease, domain.MinorUnits(r.Amount, r.Currency), now)
		return err
	})
	if err != nil || r.Kind != domain.RefundManual {
		// An automatic refund the provider refuses stays recorded as
		// failed, beside its discrepancy, for an operator to settle.
		return err
	}
	return fmt.Errorf("%w: refund %s: %v", domain.ErrRefundRefused, r.ID, cause)
}

// refusedNow is refused, answering with the refund as it now stands: a
// refusal leaves it failed — or settled as another path (its webhook)
// saw it first — never pending as it was asked, which would report a
// known outcome as unknown. An operator's refund is told of a refusal
// (domain.ErrRefundRefused) only when it stands failed.
func (s *Refunds) refusedNow(ctx context.Context, r domain.Refund, providerRefundID string, cause error) (domain.Refund, error) {
	if err := s.refused(ctx, r, providerRefundID, cause); err != nil && !errors.Is(err, domain.ErrRefundRefused) {
		return r, err
	}
	now, err := s.Store.FindByProviderKey(ctx, r.ProviderKey)
	if err != nil {
		return r, err
	}
	if now.Status == domain.RefundFailed && now.Kind == domain.RefundManual {
		return now, fmt.Errorf("%w: refund %s: %v", domain.ErrRefundRefused, now.ID, cause)
	}
	return now, nil
}

// sameRefund reports whether the provider's report of a refund is for the
// refund's amount and currency.
func sameRefund(r domain.Refund, amount, currency string) bool {
	if currency != string(r.Currency) {
		return false
	}
	v, err := decimal.NewFromString(amount)
	return err == nil && v.Equal(r.Amount)
}

// refundMismatch handles a provider's report that refund r succeeded for
// other money than payd asked for (ADR 0010's rule for refunds): nothing
// is applied — the refund stays pending, its reservation on the order
// stays — and an amount_mismatch is recorded once for an operator, who
// checks the provider's books. A manual refund's caller is told
// (ErrAmountMismatch); an automatic refund's discrepancy stays open beside it.
func (s *Refunds) refundMismatch(ctx context.Context, r domain.Refund, providerRefundID, amount, currency string) error {
	if s.Discrepancies != nil {
		d := withProviderAmount(domain.Discrepancy{
			Type: domain.AmountMismatch, Reference: "refund:" + r.ID, OrderID: r.OrderID,
			LocalAmount: r.Amount, Currency: r.Currency,
			Note: fmt.Sprintf("the provider reported refund %s (%s) for another amount or currency than payd asked; not applied, the refund stays pending for an operator",
				r.ID, truncate(providerRefundID, 64)),
		}, amount, currency)
		_, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
		if err != nil {
			return err
		}
		if isNew {
			observing(s.Observer).DiscrepancyRecorded(ctx, d)
		}
	}
	if r.Kind != domain.RefundManual {
		return nil
	}
	return fmt.Errorf("%w: the provider reported refund %s for other money", domain.ErrAmountMismatch, r.ID)
}

// Confirmed applies a refund.succeeded webhook: the refund it names becomes
// succeeded, once — only if the event's amount and currency are the
// refund's; otherwise it is recorded as an amount_mismatch and not applied.
func (s *Refunds) Confirmed(ctx context.Context, providerKey, providerRefundID, amount, currency string) (WebhookOutcome, error) {
	r, err := s.Store.FindByProviderKey(ctx, providerKey)
	if errors.Is(err, domain.ErrRefundNotFound) {
		return OutcomeIgnored, nil
	}
	if err != nil {
		return "", err
	}
	if !sameRefund(r, amount, currency) {
		if r.Status != domain.RefundPending {
			return OutcomeIgnored, nil // settled already; this report changes nothing
		}
		if err := s.refundMismatch(ctx, r, providerRefundID, amount, currency); err != nil && !errors.Is(err, domain.ErrAmountMismatch) {
			return "", err
		}
		return OutcomeDiscrepancy, nil
	}
	if err := s.succeeded(ctx, r, providerRefundID, domain.SourceWebhook); err != nil {
		return "", err
	}
	return OutcomeApplied, nil
}

// Failed applies a refund-failed webhook: a refund payd asked for that the
// provider first answered pending has failed (or was cancelled). A pending
// one takes the refused path — marked failed, its reservation released —
// once. A succeeded one the provider took back after confirming it
// (Reversed, once the provider says so); anything else changes nothing.
func (s *Refunds) Failed(ctx context.Context, providerKey, providerRefundID string) (WebhookOutcome, error) {
	r, err := s.Store.FindByProviderKey(ctx, providerKey)
	if errors.Is(err, domain.ErrRefundNotFound) {
		return OutcomeIgnored, nil
	}
	if err != nil {
		return "", err
	}
	if r.Status == domain.RefundSucceeded {
		// Confirmed before, failed now: the provider took it back.
		return s.Reversed(ctx, r, domain.SourceWebhook)
	}
	if r.Status != domain.RefundPending {
		return OutcomeIgnored, nil
	}
	err = s.refused(ctx, r, providerRefundID, errors.New("the provider reports the refund failed"))
	if err != nil && !errors.Is(err, domain.ErrRefundRefused) {
		return "", err
	}
	observing(s.Observer).OrderChanged(r.OrderID)
	if now, err := s.Store.FindByProviderKey(ctx, providerKey); err == nil && now.Status == domain.RefundSucceeded {
		// Its reply or another path settled it succeeded meanwhile: the
		// failure came after the success, and is a reversal (asked first).
		return s.Reversed(ctx, now, domain.SourceWebhook)
	}
	return OutcomeApplied, nil
}

// RetryPending asks the provider again about refunds whose outcome was not
// known, a batch at a time. The provider key makes asking again safe.
func (s *Refunds) RetryPending(ctx context.Context, olderThan time.Time) (int64, error) {
	pending, err := s.Store.ListPending(ctx, olderThan, jobBatch)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range pending {
		if _, err := s.ask(WithCause(ctx, domain.Cause{Kind: domain.CauseRecoverer, Ref: r.ID}), r, domain.SourceRecoverer); err == nil {
			n++
		}
	}
	return n, nil
}

// RefundRequest is an operator's refund of a paid order: Amount empty means
// everything that remains refundable.
type RefundRequest struct {
	OrderID   string
	RequestID string
	// Fingerprint is the request's fingerprint (ADR 0011), kept on the
	// refund so a repeat under RequestID is compared with it.
	Fingerprint string
	Amount      string
	Reason      string
}

// Refund gives back part or all of a paid order through the provider. The
// provider is asked first about the paying charge (Charges): a charge it
// says pays another order is a *domain.ChargeOwnerError, one under an open
// dispute domain.ErrChargeDisputed, and nothing is reserved. The amount is
// then reserved on the order by a guarded UPDATE that cannot exceed what
// was paid, so concurrent refunds never add up to more. A repeated request
// ID finds its earlier refund instead of refunding again, even after its
// idempotency record expired — if it is the same request: another body
// under that ID is domain.ErrKeyReused (ADR 0011).
func (s *Refunds) Refund(ctx context.Context, req RefundRequest) (domain.Refund, domain.Order, error) {
	return s.refund(ctx, req, nil)
}

// refund is Refund, with asked the provider's record of the paying charge
// when the caller asked it already (a resolution), so it is not asked
// twice. An empty req.Amount is what remains: of the order in payd's
// books and, when the provider was asked, of the charge in the
// provider's — the smaller, so a refund still in flight or one made
// outside payd is never given twice.
func (s *Refunds) refund(ctx context.Context, req RefundRequest, asked *domain.Charge) (domain.Refund, domain.Order, error) {
	o, err := s.Orders.FindByID(ctx, req.OrderID)
	if err != nil {
		return domain.Refund{}, domain.Order{}, err
	}
	if prior, ok, err := s.priorRefund(ctx, o, req); err != nil || ok {
		return prior, o, err
	}
	if o.Status != domain.StatusPaid {
		return domain.Refund{}, domain.Order{}, domain.ErrOrderNotRefundable
	}
	paid, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
	if err != nil {
		return domain.Refund{}, domain.Order{}, fmt.Errorf("find the paying attempt of %s: %w", o.ID, err)
	}
	if asked == nil && s.Charges != nil {
		ch, err := askCharge(ctx, s.Charges, paid.ProviderChargeID, domain.ErrRefundRefused)
		if err != nil {
			return domain.Refund{}, domain.Order{}, s.disputeRefusal(ctx, o.ID, paid.ProviderChargeID, err)
		}
		asked = &ch
	}
	if asked != nil {
		if asked.OrderID != "" && asked.OrderID != o.ID {
			return domain.Refund{}, domain.Order{}, &domain.ChargeOwnerError{ChargeID: asked.ID, OrderID: asked.OrderID}
		}
		if asked.Currency != string(o.Currency) {
			return domain.Refund{}, domain.Order{}, fmt.Errorf("%w: the provider reports charge %s in %s, not the order's %s", domain.ErrRefundRefused, asked.ID, asked.Currency, o.Currency)
		}
	}
	amount := o.Refundable()
	if asked != nil {
		amount = decimal.Min(amount, leftOn(*asked))
	}
	if req.Amount != "" {
		if amount, err = domain.ParseAmount(req.Amount, o.Currency, "amount"); err != nil {
			return domain.Refund{}, domain.Order{}, err
		}
		if !amount.IsPositive() {
			return domain.Refund{}, domain.Order{}, &domain.ValidationError{Field: "amount", Reason: "must be greater than zero"}
		}
	}
	if !amount.IsPositive() {
		return domain.Refund{}, domain.Order{}, fmt.Errorf("%w: the provider reports nothing left of charge %s", domain.ErrRefundTooLarge, paid.ProviderChargeID)
	}
	if err := s.notDisputed(ctx, o.ID, paid.ProviderChargeID); err != nil {
		return domain.Refund{}, domain.Order{}, err
	}
	r, err := s.reserve(ctx, o, paid.ProviderChargeID, amount, req)
	if err != nil {
		return domain.Refund{}, domain.Order{}, err
	}
	if r, err = s.ask(ctx, r, domain.SourcePayReply); err != nil {
		return domain.Refund{}, domain.Order{}, err
	}
	o, err = s.Orders.FindByID(ctx, o.ID)
	return r, o, err
}

// askCharge is the provider's record of charge id, asked now, for a
// refund: it must have succeeded (else the caller's refused) and be under
// no open dispute (the bank took the disputed money back already; a
// refund would give it twice). A provider that cannot be asked is
// domain.ErrOutcomeUnknown: nothing was done, and the operator may ask
// again.
func askCharge(ctx context.Context, f ChargeFinder, id string, refused error) (domain.Charge, error) {
	ch, err := f.FindCharge(ctx, id)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return domain.Charge{}, fmt.Errorf("%w: the provider has no charge %s", refused, truncate(id, 64))
	case err != nil:
		return domain.Charge{}, fmt.Errorf("%w: the provider could not be asked about charge %s; nothing was refunded: %w", domain.ErrOutcomeUnknown, truncate(id, 64), err)
	case ch.Status != domain.ChargeSucceeded:
		return domain.Charge{}, fmt.Errorf("%w: the provider reports charge %s as %s", refused, ch.ID, ch.Status)
	case ch.DisputedAmount.IsPositive():
		return domain.Charge{}, fmt.Errorf("%w: the provider reports %s of charge %s disputed", domain.ErrChargeDisputed, ch.DisputedAmount, ch.ID)
	}
	return ch, nil
}

// leftOn is what the provider says remains of a charge to give back: what
// it took (all of it, or a hold's capture) less refunds and disputes.
func leftOn(ch domain.Charge) decimal.Decimal {
	taken := ch.Amount
	if ch.CaptureMethod == domain.CaptureManual {
		taken = ch.AmountCaptured
	}
	return taken.Sub(ch.RefundedAmount).Sub(ch.DisputedAmount)
}

// reserve records the refund and reserves its amount on the order, in one
// transaction: a reservation, not money, so the order's refunded amount
// and status stay as they are until the provider confirms it (settle).
func (s *Refunds) reserve(ctx context.Context, o domain.Order, chargeID string, amount decimal.Decimal, req RefundRequest) (domain.Refund, error) {
	now := s.Now().UTC()
	id := newID()
	r := domain.Refund{
		ID: id, OrderID: o.ID, ChargeID: chargeID, RequestID: req.RequestID, RequestFingerprint: req.Fingerprint, Kind: domain.RefundManual, ProviderKey: id,
		Amount: amount, Currency: o.Currency, Status: domain.RefundPending, Reason: req.Reason, CreatedAt: now, UpdatedAt: now,
	}
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		ok, err := s.Orders.MoveRefund(ctx, o.ID, domain.MoveReserve, domain.MinorUnits(amount, o.Currency), now)
		if err != nil {
			return err
		}
		if !ok {
			return domain.ErrRefundTooLarge
		}
		return s.Store.Create(ctx, r)
	})
	if err == nil {
		observing(s.Observer).OrderChanged(o.ID)
	}
	return r, err
}

// priorRefund finds a manual refund this request ID already made, and
// answers it only for the same request: the fingerprints are compared, and
// for a refund stored without one (before migration 00008) what can be —
// the reason, and the amount when the request names one.
func (s *Refunds) priorRefund(ctx context.Context, o domain.Order, req RefundRequest) (domain.Refund, bool, error) {
	rs, err := s.Store.ListByOrder(ctx, o.ID)
	if err != nil {
		return domain.Refund{}, false, err
	}
	for _, r := range rs {
		if r.Kind != domain.RefundManual || r.RequestID != req.RequestID {
			continue
		}
		if r.RequestFingerprint != "" && req.Fingerprint != "" {
			if r.RequestFingerprint != req.Fingerprint {
				return domain.Refund{}, false, domain.ErrKeyReused
			}
			return r, true, nil
		}
		if r.Reason != req.Reason {
			return domain.Refund{}, false, domain.ErrKeyReused
		}
		if req.Amount != "" {
			amount, err := domain.ParseAmount(req.Amount, o.Currency, "amount")
			if err != nil || !amount.Equal(r.Amount) {
				return domain.Refund{}, false, domain.ErrKeyReused
			}
		}
		return r, true, nil
	}
	return domain.Refund{}, false, nil
}

// RefundCharge gives back a whole provider charge that no order counts as
// its payment (an operator's resolution of a discrepancy).
func (s *Refunds) RefundCharge(ctx context.Context, orderID, chargeID string, amount decimal.Decimal, cur domain.Currency, reason string) (domain.Refund, error) {
	return s.refundCharge(ctx, orderID, chargeID, amount, cur, reason)
}

// notDisputed refuses a refund of a charge under an open dispute whose
// money the bank withdrew (its opening is booked): a refund would give it
// twice. An inquiry, where the bank only asks questions and withdrew
// nothing, does not stop a refund.
func (s *Refunds) notDisputed(ctx context.Context, orderID, chargeID string) error {
	if s.Disputes == nil || chargeID == "" {
		return nil
	}
	open, err := s.Disputes.OpenForCharge(ctx, chargeID)
	if err != nil || !open {
		return err
	}
	if s.Ledger != nil {
		entries, err := s.Ledger.ListByOrder(ctx, orderID)
		if err != nil {
			return err
		}
		held := decimal.Zero // what open disputes of the charge withdrew
		for _, e := range entries {
			if e.ChargeID != chargeID {
				continue
			}
			switch e.Kind {
			case domain.LedgerDisputeOpened:
				held = held.Add(e.Amount)
			case domain.LedgerDisputeWon, domain.LedgerDisputeLost:
				held = held.Sub(e.Amount)
			}
		}
		if !held.IsPositive() {
			return nil
		}
	}
	return fmt.Errorf("%w: charge %s", domain.ErrChargeDisputed, chargeID)
}
