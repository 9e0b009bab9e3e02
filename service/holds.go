package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// approved reports whether the provider approved attempt a's charge: it
// succeeded, or, for a manual-capture attempt, holds the money (a manual
// charge captured outside payd is approved too: the capture is then found
// when payd captures).
func approved(a domain.Attempt, ch domain.Charge) bool {
	return ch.Status == domain.ChargeSucceeded ||
		(ch.Status == domain.ChargeAuthorized && a.CaptureMethod == domain.CaptureManual)
}

// authorize settles a manual-capture attempt the provider approved: the
// attempt succeeds, the hold is booked (LedgerHold, of the attempt's
// amount), and the order moves from processing to authorized for the
// attempt's request, with its capture_before, in one transaction. The
// answer is the order as it stands.
func (s *Checkout) authorize(ctx context.Context, o domain.Order, a domain.Attempt, ch domain.Charge, src domain.LedgerSource) (domain.Order, error) {
	now := s.Now().UTC()
	chargeID := cmp.Or(ch.ID, a.ProviderChargeID)
	before := now.Add(cmp.Or(s.AuthorizationTTL, domain.DefaultAuthorizationTTL))
	if !ch.CaptureBefore.IsZero() && ch.CaptureBefore.Before(before) {
		before = ch.CaptureBefore // the provider's hold is the one that lapses
	}
	var held bool
	settle := func(ctx context.Context, hold bool) error {
		held = false
		finished, err := s.Attempts.Succeed(ctx, a.ID, chargeID, now)
		if err != nil || !hold {
			return err
		}
		if !finished && a.Status != domain.AttemptSucceeded {
			if ok, err := s.settledAs(ctx, a.ID, chargeID); err != nil || !ok {
				return err // settled otherwise: the order is not this attempt's to hold
			}
		}
		// The hold is booked first: the order's event adds the ledger up
		// as the change leaves it. An order that is not this request's
		// to hold (released, paid, closed since) undoes it.
		if err := s.book(ctx, holdEntry(o.ID, a, chargeID, src, now)); err != nil {
			return err
		}
		if held, err = s.Orders.MarkAuthorized(ctx, o.ID, a.RequestID, before, sourceCause(ctx, src, settledRef(src, a)), now); err != nil {
			return err
		}
		if !held {
			return errNotOwner
		}
		fault("before_settle_commit")
		return nil
	}
	err := s.Tx.InTx(ctx, func(ctx context.Context) error { return settle(ctx, true) })
	if errors.Is(err, errNotOwner) {
		// The attempt is settled all the same: the provider holds its money.
		err = s.Tx.InTx(ctx, func(ctx context.Context) error { return settle(ctx, false) })
	}
	if err != nil {
		return domain.Order{}, fmt.Errorf("mark order %s authorized: %w", o.ID, err)
	}
	fault("after_settle_commit")
	if o, err = s.Orders.FindByID(ctx, o.ID); err != nil {
		return domain.Order{}, err
	}
	if held {
		s.changed(o.ID)
		s.observe(ctx, a, PaymentPaid)
	}
	if src != domain.SourcePayReply {
		s.publishSettled(ctx, o, a, nil)
	}
	return o, nil
}

// holdEntry is the ledger entry of attempt a's hold on order orderID.
func holdEntry(orderID string, a domain.Attempt, chargeID string, src domain.LedgerSource, now time.Time) domain.LedgerEntry {
	return domain.LedgerEntry{
		ID: newID(), OrderID: orderID, Kind: domain.LedgerHold, Reference: domain.HoldReference(chargeID),
		ChargeID: chargeID, Amount: a.Amount, Currency: a.Currency, Source: src, CreatedAt: now,
	}
}

// HoldProvider is what Holds needs from the payment provider: a capture
// and a void of an authorized charge, each at most once per key, and a
// look at a charge to learn what became of its hold.
type HoldProvider interface {
	Capture(ctx context.Context, req domain.CaptureRequest) (domain.Charge, error)
	Void(ctx context.Context, req domain.VoidRequest) (domain.Charge, error)
	FindCharge(ctx context.Context, chargeID string) (domain.Charge, error)
}

// HoldOrders is what Holds needs of the orders.
type HoldOrders interface {
	FindByID(ctx context.Context, id string) (domain.Order, error)
	ClaimHold(ctx context.Context, a domain.HoldAction, now time.Time) (bool, error)
	EndHold(ctx context.Context, a domain.HoldAction, captured decimal.Decimal, c domain.Cause, now time.Time) (bool, error)
	Unclaim(ctx context.Context, a domain.HoldAction, now time.Time) (bool, error)
	DueHolds(ctx context.Context, now time.Time, limit int) ([]string, error)
}

// HoldActions keeps the hold actions (repository.HoldActionStore).
type HoldActions interface {
	Create(ctx context.Context, a domain.HoldAction) error
	Find(ctx context.Context, id string) (domain.HoldAction, error)
	FindByRequest(ctx context.Context, orderID string, k domain.HoldActionKind, requestID string) (domain.HoldAction, error)
	Unsettled(ctx context.Context, now time.Time, limit int) ([]domain.HoldAction, error)
	Lease(ctx context.Context, id string, now, until time.Time) (bool, error)
	Settle(ctx context.Context, id string, e domain.HoldActionEvent, failureCode string, now time.Time) (bool, error)
}

// Holds ends the holds of manual-capture orders, exactly once each: a
// capture (the merchant's), a void (a cancel's) or a lapse (the job's).
// Each claims the hold first (one guarded UPDATE: of captures and cancels
// racing, one wins and the others are told why), records its action, asks
// the provider under the action's ID as idempotency key, and settles the
// order from the provider's answer in one transaction. An answer that
// never came leaves the action unknown; the same request sent again, or
// the job once the action's lease ends, sends the same key again, which
// the provider answers with what it did, never doing it twice. ADR 0060.
type Holds struct {
	Tx       Transactor
	Orders   HoldOrders
	Actions  HoldActions
	Attempts interface {
		Latest(ctx context.Context, orderID, requestID string) (domain.Attempt, error)
	}
	Ledger   LedgerStore
	Provider HoldProvider
	Now      func() time.Time
	Observer Observer
	// Lease is how long one request or job pass owns an action it works
	// on (PAYD_LEASE); Timeout bounds one call to the provider.
	Lease, Timeout time.Duration
}

// CaptureRequest is one capture call: of order OrderID, under the
// idempotency key RequestID, Amount or (nil) all that is held.
type CaptureRequest struct {
	OrderID   string
	RequestID string
	Amount    *decimal.Decimal
}

// Capture takes the order's held money, or Amount of it, once: the order
// is paid what was captured and the rest of the hold is released at the
// provider. A request sent again under its key finds its own action and
// answers what became of it. Refusals: domain.ErrCaptureTooLarge,
// ErrOrderNotCapturable, ErrAuthorizationExpired; a provider that did not
// answer is domain.ErrOutcomeUnknown (send the same request again).
func (s *Holds) Capture(ctx context.Context, r CaptureRequest) (domain.Order, error) {
	ctx = WithCause(ctx, domain.Cause{Kind: domain.CauseMerchant, Ref: r.RequestID})
	o, err := s.Orders.FindByID(ctx, r.OrderID)
	if err != nil {
		return domain.Order{}, err
	}
	amount := o.Amount
	if r.Amount != nil {
		if !r.Amount.IsPositive() || !r.Amount.Equal(r.Amount.Round(o.Currency.Scale())) {
			return domain.Order{}, &domain.ValidationError{Field: "amount", Reason: fmt.Sprintf("must be a positive amount of %s", o.Currency)}
		}
		amount = *r.Amount
	}
	if amount.GreaterThan(o.Amount) {
		return domain.Order{}, fmt.Errorf("%w: %s of %s held", domain.ErrCaptureTooLarge, amount, o.Amount)
	}
	return s.act(ctx, o, domain.HoldCapture, r.RequestID, amount)
}

// Void gives up the hold of authorized order id, for a cancel under the
// idempotency key requestID (may be empty): the order is cancelled and
// its stock given back. A hold captured meanwhile is
// domain.ErrOrderNotCancelable.
func (s *Holds) Void(ctx context.Context, id, requestID string) (domain.Order, error) {
	o, err := s.Orders.FindByID(ctx, id)
	if err != nil {
		return domain.Order{}, err
	}
	return s.act(ctx, o, domain.HoldVoid, requestID, decimal.Zero)
}

// act runs the request's own action again if it has one, or claims the
// hold for a new one and runs it.
func (s *Holds) act(ctx context.Context, o domain.Order, k domain.HoldActionKind, requestID string, amount decimal.Decimal) (domain.Order, error) {
	now := s.Now().UTC()
	if requestID != "" {
		a, err := s.Actions.FindByRequest(ctx, o.ID, k, requestID)
		switch {
		case err == nil && !a.Amount.Equal(amount):
			return domain.Order{}, domain.ErrKeyReused
		case err == nil:
			return s.resume(ctx, a)
		case !errors.Is(err, domain.ErrHoldActionNotFound):
			return domain.Order{}, err
		}
	}
	a := domain.HoldAction{
		ID: newID(), OrderID: o.ID, Kind: k, Amount: amount, Currency: o.Currency, RequestID: requestID,
		Status: domain.HoldActionStarted, LeasedUntil: now.Add(s.lease()), CreatedAt: now, UpdatedAt: now,
	}
	var claimed bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		var err error
		if claimed, err = s.Orders.ClaimHold(ctx, a, now); err != nil || !claimed {
			return err
		}
		return s.Actions.Create(ctx, a)
	})
	if err != nil {
		return domain.Order{}, fmt.Errorf("claim the hold of order %s: %w", o.ID, err)
	}
	if !claimed {
		if o, err = s.Orders.FindByID(ctx, o.ID); err != nil {
			return domain.Order{}, err
		}
		if err := notHoldable(o, k, now); err != nil {
			return domain.Order{}, err
		}
		return o, nil // a cancel of an order another cancel voided: what the caller wanted
	}
	fault("hold_claimed")
	return s.run(ctx, a)
}

// notHoldable says why an action of kind k could not claim o's hold.
func notHoldable(o domain.Order, k domain.HoldActionKind, now time.Time) error {
	switch {
	case k == domain.HoldVoid && o.Status == domain.StatusCancelled:
		return nil
	case k == domain.HoldVoid:
		return domain.ErrOrderNotCancelable
	case o.Status == domain.StatusAuthorized && o.CaptureBefore != nil && !o.CaptureBefore.After(now),
		o.Status == domain.StatusExpired && o.CaptureMethod == domain.CaptureManual && o.PaidAt == nil:
		return domain.ErrAuthorizationExpired
	}
	return fmt.Errorf("%w: the order is %s", domain.ErrOrderNotCapturable, o.Status)
}

// resume answers a request sent again: a settled action's outcome, or
// the action run again (same key) once no one else works on it.
func (s *Holds) resume(ctx context.Context, a domain.HoldAction) (domain.Order, error) {
	now := s.Now().UTC()
	switch a.Status {
	case domain.HoldActionSucceeded:
		return s.Orders.FindByID(ctx, a.OrderID)
	case domain.HoldActionFailed:
		return domain.Order{}, refusedAs(a)
	}
	ok, err := s.Actions.Lease(ctx, a.ID, now, now.Add(s.lease()))
	if err != nil {
		return domain.Order{}, err
	}
	if !ok {
		return domain.Order{}, fmt.Errorf("%w: the %s of order %s is still with the provider", domain.ErrOutcomeUnknown, a.Kind, a.OrderID)
	}
	return s.run(ctx, a)
}

// refusedAs is what a request whose action the provider refused answers.
func refusedAs(a domain.HoldAction) error {
	switch {
	case a.FailureCode == domain.HoldLapsed:
		return domain.ErrAuthorizationExpired
	case a.FailureCode == domain.CaptureTooLarge:
		return domain.ErrCaptureTooLarge
	case a.Kind == domain.HoldVoid:
		return fmt.Errorf("%w: the provider refused the void (%s)", domain.ErrOrderNotCancelable, a.FailureCode)
	}
	return fmt.Errorf("%w: the provider refused the capture (%s)", domain.ErrOrderNotCapturable, a.FailureCode)
}

// run asks the provider to carry out action a, which owns its order's
// hold, and settles on the answer.
func (s *Holds) run(ctx context.Context, a domain.HoldAction) (domain.Order, error) {
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return domain.Order{}, err
	}
	at, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
	if err != nil {
		return domain.Order{}, fmt.Errorf("the hold of order %s: its attempt: %w", o.ID, err)
	}
	chargeID := at.ProviderChargeID
	pctx, cancel := context.WithTimeout(ctx, s.timeout())
	var ch domain.Charge
	if a.Kind == domain.HoldCapture {
		ch, err = s.Provider.Capture(pctx, domain.CaptureRequest{IdempotencyKey: a.ID, ChargeID: chargeID, Amount: a.Amount, Currency: string(a.Currency)})
	} else {
		ch, err = s.Provider.Void(pctx, domain.VoidRequest{IdempotencyKey: a.ID, ChargeID: chargeID})
	}
	cancel()
	fault("hold_sent")
	var re *domain.ProviderRequestError
	switch {
	case errors.As(err, &re) && (re.Code == domain.ChargeAlreadyCaptured || re.Code == domain.ChargeAlreadyVoided || re.Code == domain.HoldLapsed):
		// The hold ended before this action reached it (captured at the
		// provider, or voided or lapsed there): the provider's charge says
		// how, and that is what settles the order.
		if ch, err = s.Provider.FindCharge(ctx, chargeID); err != nil {
			return s.unknown(ctx, a, err)
		}
		return s.settle(ctx, o, a, at, ch)
	case re != nil:
		return s.refused(ctx, o, a, re.Code)
	case err != nil:
		return s.unknown(ctx, a, err)
	}
	return s.settle(ctx, o, a, at, ch)
}

// settle applies the provider's charge after action a: captured, the
// order is paid what was taken; voided, it is cancelled (a void) or
// expired (a lapse, or a capture that found the hold lapsed: the order
// cannot be captured, and says so). The hold's release and the capture's
// charge are booked with the move, in one transaction.
func (s *Holds) settle(ctx context.Context, o domain.Order, a domain.HoldAction, at domain.Attempt, ch domain.Charge) (domain.Order, error) {
	now := s.Now().UTC()
	end, outcome := a, error(nil)
	switch {
	case ch.Status == domain.ChargeSucceeded && a.Kind != domain.HoldCapture:
		// Captured before this void or lapse reached it: the order is
		// paid what the provider took, whoever captured.
		end.Kind, outcome = domain.HoldCapture, domain.ErrOrderNotCancelable
	case ch.Status == domain.ChargeVoided && a.Kind == domain.HoldCapture:
		end.Kind, outcome = domain.HoldLapse, domain.ErrAuthorizationExpired
	case ch.Status != domain.ChargeSucceeded && ch.Status != domain.ChargeVoided:
		return s.unknown(ctx, a, fmt.Errorf("the provider reports charge %s %s after the %s", ch.ID, ch.Status, a.Kind))
	}
	captured := decimal.Zero
	if end.Kind == domain.HoldCapture {
		captured = ch.AmountCaptured
		if captured.IsZero() || captured.GreaterThan(o.Amount) {
			return s.unknown(ctx, a, fmt.Errorf("the provider reports %s captured of charge %s, of %s held", captured, ch.ID, o.Amount))
		}
	}
	c := causeIn(ctx, domain.Cause{Kind: domain.CauseExpiry})
	if a.RequestID != "" {
		c = causeIn(ctx, domain.Cause{Kind: domain.CauseMerchant, Ref: a.RequestID})
	}
	src := domain.SourcePayReply // the provider's answer to a request's capture or void
	if _, asked := ctx.Value(causeKey{}).(domain.Cause); !asked {
		src = domain.SourceRecoverer // the job asked
	}
	var ended bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		ended = false
		if _, err := s.Actions.Settle(ctx, a.ID, domain.HoldDone, "", now); err != nil {
			return err
		}
		// The books first, then the order: its event adds the ledger up
		// as the change leaves it. If the order turns out not to be this
		// action's to end, all of it is undone.
		if err := appendEntry(ctx, s.Ledger, releaseEntry(o, at, src, now)); err != nil {
			return err
		}
		if end.Kind == domain.HoldCapture {
			e := chargeEntry(at, at.ProviderChargeID, src, now)
			e.OrderID, e.Amount = o.ID, captured
			if err := appendEntry(ctx, s.Ledger, e); err != nil {
				return err
			}
		}
		var err error
		if ended, err = s.Orders.EndHold(ctx, end, captured, c, now); err != nil {
			return err
		}
		if !ended {
			return errNotOwner
		}
		return nil
	})
	if errors.Is(err, errNotOwner) {
		err = nil // ended by its owner before: nothing written now
	}
	if err != nil {
		return domain.Order{}, fmt.Errorf("end the hold of order %s: %w", o.ID, err)
	}
	fault("hold_settled")
	if ended {
		observing(s.Observer).OrderChanged(o.ID)
		observing(s.Observer).HoldEnded(a.Kind, HoldSucceeded)
	}
	if o, err = s.Orders.FindByID(ctx, o.ID); err != nil {
		return domain.Order{}, err
	}
	if outcome != nil {
		return domain.Order{}, outcome
	}
	return o, nil
}

// errNotOwner undoes a settlement whose action no longer owns the hold,
// or an authorization of an order that is not its attempt's to hold.
var errNotOwner = errors.New("the hold is not this action's")

// releaseEntry is the ledger entry that ends the hold of attempt at's
// charge on order o: the whole hold, whatever a capture took (that is
// booked as a charge).
func releaseEntry(o domain.Order, at domain.Attempt, src domain.LedgerSource, now time.Time) domain.LedgerEntry {
	return domain.LedgerEntry{
		ID: newID(), OrderID: o.ID, Kind: domain.LedgerHoldReleased, Reference: domain.HoldReleasedReference(at.ProviderChargeID),
		ChargeID: at.ProviderChargeID, Amount: at.Amount, Currency: at.Currency, Source: src, CreatedAt: now,
	}
}

// refused settles an action the provider refused: nothing happened to the
// hold, which is given back, the order still authorized, so the merchant
// may capture or cancel again. A lapse the provider refuses keeps the
// hold (its refused action owns it): the job would claim it again on
// every pass, and only an operator can tell what became of a hold past
// capture_before that the provider will not void.
func (s *Holds) refused(ctx context.Context, o domain.Order, a domain.HoldAction, code string) (domain.Order, error) {
	now := s.Now().UTC()
	a.Status, a.FailureCode = domain.HoldActionFailed, code
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.Actions.Settle(ctx, a.ID, domain.HoldRefused, code, now); err != nil || a.Kind == domain.HoldLapse {
			return err
		}
		_, err := s.Orders.Unclaim(ctx, a, now)
		return err
	})
	if err != nil {
		return domain.Order{}, fmt.Errorf("give back the hold of order %s: %w", o.ID, err)
	}
	observing(s.Observer).HoldEnded(a.Kind, HoldRefused)
	return domain.Order{}, refusedAs(a)
}

// unknown records that the provider's answer about a is not known: a
// request sent again, or the job after the lease, asks again under the
// same key.
func (s *Holds) unknown(ctx context.Context, a domain.HoldAction, cause error) (domain.Order, error) {
	now := s.Now().UTC()
	if _, err := s.Actions.Settle(ctx, a.ID, domain.HoldReplyLost, "", now); err != nil {
		return domain.Order{}, err
	}
	observing(s.Observer).HoldEnded(a.Kind, HoldUnknown)
	return domain.Order{}, fmt.Errorf("%w: the %s of order %s: %w", domain.ErrOutcomeUnknown, a.Kind, a.OrderID, cause)
}

// lease is how long an action is its worker's: at least one provider
// call and a margin, so nobody asks about an action whose call may still
// be on its way.
func (s *Holds) lease() time.Duration {
	return max(cmp.Or(s.Lease, 30*time.Second), s.timeout()+5*time.Second)
}

func (s *Holds) timeout() time.Duration { return cmp.Or(s.Timeout, domain.DefaultProviderTimeout) }

// Run is the holds job's pass: it takes over actions nobody finished
// (their lease ended) and asks again under their keys, then lapses holds
// past capture_before that no action owns, voiding each at the provider.
// Replicas running it at once never work on one action, nor lapse one
// hold twice: the action's lease and the hold's claim are guarded
// statements. It returns how many actions it settled.
func (s *Holds) Run(ctx context.Context) (int64, error) {
	now := s.Now().UTC()
	var n int64
	stuck, err := s.Actions.Unsettled(ctx, now, jobBatch)
	if err != nil {
		return 0, err
	}
	for _, a := range stuck {
		ok, err := s.Actions.Lease(ctx, a.ID, now, now.Add(s.lease()))
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		if _, err := s.run(ctx, a); err == nil {
			n++
		}
	}
	due, err := s.Orders.DueHolds(ctx, now, jobBatch)
	if err != nil {
		return n, err
	}
	for _, id := range due {
		o, err := s.Orders.FindByID(ctx, id)
		if err != nil {
			return n, err
		}
		if _, err := s.act(ctx, o, domain.HoldLapse, "", decimal.Zero); err == nil {
			n++
		}
	}
	return n, nil
}
