package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/payd/payd/domain"
)

// PaymentProvider is what Checkout needs from the payment provider.
type PaymentProvider interface {
	Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error)
	// GetCharge asks about attempt a's charge. a is payd's record of the
	// attempt, as the caller just read it: its ID (the charge's
	// idempotency key), order, money, payment method, status, creation
	// time and any provider charge ID payd stored. For a key payd has no
	// attempt under (one a provider event names), a carries only that ID
	// and the event's order, and no status. For an attempt still started
	// or unknown the answer must stay true however late a request under
	// its key arrives, so an adapter that finds nothing replays the create
	// under the key rather than answer "not found" (ADR 20, 54); a charge
	// the replay makes is the attempt's. domain.ErrChargeNotFound means the
	// provider has no charge for the attempt and, for an unsettled one,
	// that none can come.
	GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error)
}

// OrphanRefunder takes a charge an order cannot take (a second success, a
// success after close) and gives it back; *Refunds is one.
type OrphanRefunder interface {
	Orphan(ctx context.Context, o domain.Order, a domain.Attempt, chargeID string, src domain.LedgerSource) error
}

// Checkout pays orders exactly once. It is the only place that knows the
// order of the steps: claim the order, record the attempt, ask the
// provider, settle — and, when a reply was lost, ask before charging again.
type Checkout struct {
	Tx       Transactor
	Orders   OrderStore
	Attempts AttemptStore
	Provider PaymentProvider
	Now      func() time.Time
	// Orphans, optional, refunds a success the order cannot take.
	Orphans OrphanRefunder
	// Ledger, optional in tests, records every charge the provider made
	// in the order's ledger, in the transaction that settles its attempt
	// (ADR 0030).
	Ledger LedgerStore
	// Observer, optional, is told of each transition, result and
	// discrepancy.
	Observer Observer
	// Answers, optional, stores every pay answer settled outside its
	// request, for the request's replays.
	Answers SettledAnswers

	// AuthorizationTTL is how long a manual-capture order's hold lasts
	// from its authorization (PAYD_AUTHORIZATION_TTL;
	// domain.DefaultAuthorizationTTL when zero), never past the
	// provider's own capture_before.
	AuthorizationTTL time.Duration
	// ProviderTimeout is the deadline of one charge request
	// (PAYD_PROVIDER_TIMEOUT; domain.DefaultProviderTimeout when zero).
	ProviderTimeout time.Duration
	// Discrepancies records a charge reported for another amount or
	// currency than the attempt's (ADR 0010).
	Discrepancies DiscrepancyStore
	// Batch, optional, runs the claim and a success's settlement in fewer
	// round trips (repository.PayBatch, ADR 0034); without it they run
	// statement by statement in Tx.
	Batch PayBatch
	// Canceller, optional (nil for the sandbox, whose failed charges are
	// final), cancels a provider charge payd takes as failed before the
	// attempt is released, so it can never be completed later (ADR 0019).
	Canceller ChargeCanceller
}

// PayBatch runs the pay path's two hot transactions as single units, in
// one round trip each on MySQL (repository.PayBatch, ADR 0034): each
// guarded statement runs only if the one before it matched its row.
type PayBatch interface {
	// Claim moves a's order from pending (at version) to processing for
	// a.RequestID and records a, in one transaction (OrderStore.Claim,
	// AttemptStore.Create).
	Claim(ctx context.Context, a domain.Attempt, version int64, now time.Time) (bool, error)
	// SucceedAndPay moves a (started or unknown) to succeeded with
	// chargeID, only if it moved records entry, the charge's ledger entry,
	// and then moves its order from processing to paid for a.RequestID, in
	// one transaction (AttemptStore.Succeed, LedgerStore.Append,
	// OrderStore.MarkPaid). settled: a moved and entry is recorded; paid:
	// the order moved too. Not settled: nothing was written (also when
	// entry's reference was recorded already).
	// Unless version is domain.AnyVersion, the order moves only if it is
	// still at version too.
	// The order.paid event, caused by c, is written with the payment.
	SucceedAndPay(ctx context.Context, a domain.Attempt, chargeID string, entry domain.LedgerEntry, version int64, c domain.Cause, now time.Time) (settled, paid bool, err error)
}

// ChargeCanceller is what a provider whose failed charge may still be
// completed (Stripe's PaymentIntent in requires_payment_method, confirmable
// again with its client_secret) offers: cancelling it for good. The answer
// is the charge's state after: failed once cancelled, or what it turned
// out to be (succeeded, pending) when it could not be cancelled.
type ChargeCanceller interface {
	CancelCharge(ctx context.Context, a domain.Attempt, chargeID string) (domain.Charge, error)
}

// PayRequest is one pay call: which customer pays which order, under which
// request ID (the idempotency key), with which payment method.
type PayRequest struct {
	CustomerID    string
	OrderID       string
	RequestID     string
	PaymentMethod string
}

var methodPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// Pay charges the order once. It returns the order paid (200), or still
// processing when the outcome is not known yet (202); a decline is a
// *domain.DeclineError (402); a payment method the provider does not know
// is domain.ErrPaymentMethodInvalid; a conflict with another request is
// domain.ErrOrderAlreadyPaid, ErrPaymentInProgress or ErrOrderNotPayable
// (ErrOrderExpired for an order past its expires_at).
// A request ID that already claimed the order gets that payment's outcome
// back, recovering it from the provider first if it was left unknown.
func (s *Checkout) Pay(ctx context.Context, r PayRequest) (domain.Order, error) {
	if !methodPattern.MatchString(r.PaymentMethod) {
		return domain.Order{}, &domain.ValidationError{Field: "payment_method", Reason: "must be a payment method ID such as \"pm_ok\""}
	}
	ctx = WithCause(ctx, domain.Cause{Kind: domain.CausePayRequest, Ref: r.RequestID})
	if o, ok := s.created(r); ok {
		a, claimed, err := s.claim(ctx, &o, r)
		if err != nil && !errors.Is(err, domain.ErrOrderExpired) {
			return domain.Order{}, err
		}
		if claimed {
			fault("after_claim")
			return ownOutcome(r.RequestID)(s.charge(ctx, o, a, domain.SourcePayReply))
		}
		// Changed since it was created (or expired meanwhile): decide from a read.
	}
	for range 3 {
		o, err := s.Orders.FindByID(ctx, r.OrderID)
		if err != nil {
			return domain.Order{}, err
		}
		if !o.VisibleTo(r.CustomerID) {
			return domain.Order{}, domain.ErrOrderNotFound
		}
		if o.Status == domain.StatusPending {
			a, claimed, err := s.claim(ctx, &o, r)
			if err != nil {
				return domain.Order{}, err
			}
			if claimed {
				fault("after_claim")
				return ownOutcome(r.RequestID)(s.charge(ctx, o, a, domain.SourcePayReply))
			}
			continue // someone changed the order between our read and our claim: decide from a fresh read
		}
		if err := o.PayOutcome(r.RequestID); err != nil {
			return domain.Order{}, err
		}
		if err := s.samePayment(ctx, o, r); err != nil {
			return domain.Order{}, err
		}
		if o.Status == domain.StatusProcessing {
			return ownOutcome(r.RequestID)(s.recover(ctx, o, r.RequestID))
		}
		return o, nil // paid (or since refunded) by this very request ID
	}
	return domain.Order{}, domain.ErrPaymentInProgress
}

// created is the order r pays as this process created it, when it still
// remembers it (OrderStore.TakeCreated) and it is r's customer's, pending
// and not expired as remembered. The claim is guarded by its version, so
// it acts only if the row is still exactly this order (ADR 0034);
// otherwise Pay reads the order as it would have without it.
func (s *Checkout) created(r PayRequest) (domain.Order, bool) {
	o, ok := s.Orders.TakeCreated(r.OrderID)
	if !ok || !o.VisibleTo(r.CustomerID) || !o.Claimable(s.Now().UTC()) {
		return domain.Order{}, false
	}
	return o, true
}

// ownOutcome makes sure a pay request is answered about its own payment:
// when the order ended up paid or claimed by another request (this
// request's charge then went back as one the order could not take), the
// caller gets that conflict, not the other payment's success.
func ownOutcome(requestID string) func(domain.Order, error) (domain.Order, error) {
	return func(o domain.Order, err error) (domain.Order, error) {
		if err != nil {
			return o, err
		}
		return o, o.PayOutcome(requestID)
	}
}

// samePayment checks that r is the request that claimed o under its
// request ID: once that key's idempotency record is gone, the order answers
// for the key (pay_request_id), and the attempt remembers the payment
// method — the whole body of a pay request, its path being the order's.
// Another method under the key is domain.ErrKeyReused (ADR 0011), not the
// outcome of a payment the caller did not ask for.
func (s *Checkout) samePayment(ctx context.Context, o domain.Order, r PayRequest) error {
	a, err := s.Attempts.Latest(ctx, o.ID, r.RequestID)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		return nil // nothing to compare with
	}
	if err != nil {
		return err
	}
	if a.PaymentMethod != "" && a.PaymentMethod != r.PaymentMethod {
		return domain.ErrKeyReused
	}
	return nil
}

// claim takes the order for r (pending → processing, recording the request
// ID) and records the attempt, in one short transaction, before the
// provider is called: a different request ID can never start a second charge.
// The attempt is created leased to this request for as long as the charge
// request it is about to send may be in flight, and says so: nobody else
// asks the provider about it meanwhile (ADR 9). An order past its
// expires_at is not claimed (the guard is in the UPDATE): ErrOrderExpired.
func (s *Checkout) claim(ctx context.Context, o *domain.Order, r PayRequest) (domain.Attempt, bool, error) {
	now := s.Now().UTC()
	inFlight := s.inFlightUntil(now)
	a := domain.Attempt{
		ID: newID(), OrderID: o.ID, RequestID: r.RequestID, Status: domain.AttemptStarted, PaymentMethod: r.PaymentMethod,
		Amount: o.Amount, Currency: o.Currency, CreatedAt: now, UpdatedAt: now, LeasedUntil: inFlight, InFlightUntil: inFlight,
		CaptureMethod: cmp.Or(o.CaptureMethod, domain.CaptureAutomatic),
	}
	var claimed bool
	var err error
	if s.Batch != nil {
		claimed, err = s.Batch.Claim(ctx, a, o.Version, now)
	} else {
		err = s.Tx.InTx(ctx, func(ctx context.Context) error {
			claimed = false // InTx may run fn again after a conflict: start clean
			var err error
			if claimed, err = s.Orders.Claim(ctx, o.ID, r.RequestID, o.Version, now); err != nil || !claimed {
				return err
			}
			return s.Attempts.Create(ctx, a)
		})
	}
	if err != nil {
		return domain.Attempt{}, false, fmt.Errorf("claim order %s: %w", o.ID, err)
	}
	if !claimed && o.Expired(now) {
		return domain.Attempt{}, false, domain.ErrOrderExpired // the UPDATE's time guard refused it
	}
	if claimed {
		// The guarded UPDATE matched the version we know, so we know the
		// row exactly: no re-read.
		if *o, err = s.moved(ctx, *o, domain.EventClaim, r.RequestID, now); err != nil {
			return domain.Attempt{}, false, fmt.Errorf("claim order %s: %w", o.ID, err)
		}
		s.changed(o.ID)
	}
	return a, claimed, nil
}

// charge asks the provider to charge attempt a, then settles on its answer.
// The request gives up in time for what the attempt records (InFlightUntil):
// until then nobody else asks about the attempt (ADR 9).
func (s *Checkout) charge(ctx context.Context, o domain.Order, a domain.Attempt, src domain.LedgerSource) (domain.Order, error) {
	cctx, cancel := context.WithDeadline(ctx, s.chargeDeadline(a.InFlightUntil))
	ch, err := s.Provider.Charge(cctx, domain.ChargeRequest{
		IdempotencyKey: a.ID, OrderID: o.ID, Amount: a.Amount, Currency: string(a.Currency), PaymentMethod: a.PaymentMethod,
		CaptureMethod: a.CaptureMethod,
	})
	cancel()
	fault("after_charge")
	if re := refusal(err); re != nil {
		return s.refused(ctx, o, a, re)
	}
	return s.settle(ctx, o, a, ch, err, src)
}

// recover finishes a payment this request ID started earlier whose outcome
// we do not know (the worker died, or the provider's reply was lost). It
// never charges again without first asking the provider.
func (s *Checkout) recover(ctx context.Context, o domain.Order, requestID string) (domain.Order, error) {
	a, err := s.Attempts.Latest(ctx, o.ID, requestID)
	if err != nil {
		return domain.Order{}, fmt.Errorf("recover order %s: %w", o.ID, err)
	}
	switch a.Status {
	case domain.AttemptSucceeded:
		return s.succeed(ctx, o, a, domain.Charge{ID: a.ProviderChargeID}, domain.SourcePayReply)
	case domain.AttemptFailed:
		return s.fail(ctx, o, a, a.ProviderChargeID, a.FailureCode, domain.SourcePayReply)
	case domain.AttemptHeld:
		return o, mismatchError(a)
	}
	// Lease the attempt, as the recoverer does, so the two never work on it
	// at once; if the recoverer has it, or the request that sent its charge
	// still may, the outcome is still being found.
	now := s.Now().UTC()
	leaseEnd := s.inFlightUntil(now) // one provider call, and its margin
	won, err := s.Attempts.Lease(ctx, a.ID, now, leaseEnd)
	if err != nil || !won {
		return o, err
	}
	// Judge by the row under the lease: its in-flight deadline may have
	// moved since it was read.
	if a, err = s.Attempts.FindByID(ctx, a.ID); err != nil {
		return o, err
	}
	a.LeasedUntil = leaseEnd
	ch, err := s.Provider.GetCharge(ctx, a)
	if errors.Is(err, domain.ErrChargeNotFound) {
		if s.inFlight(a, s.Now().UTC()) {
			// A charge request under this key may still reach the
			// provider: "not found" proves nothing yet.
			return s.unknown(ctx, o, a, "", domain.SourcePayReply)
		}
		// The adapter says the provider has nothing under the key and
		// nothing can come (ADR 54): charging now, under the same
		// idempotency key, is its first and only charge.
		return s.resend(ctx, o, a)
	}
	return s.settle(ctx, o, a, ch, err, domain.SourcePayReply)
}

// resend charges attempt a again under its own key, after the provider said
// it never saw it. How long the new request may be in flight is recorded
// first, under the lease this request holds; without the lease nothing is
// sent.
func (s *Checkout) resend(ctx context.Context, o domain.Order, a domain.Attempt) (domain.Order, error) {
	until := s.inFlightUntil(s.Now().UTC())
	ok, err := s.Attempts.Resend(ctx, a.ID, a.LeasedUntil, until)
	if err != nil || !ok {
		return o, err
	}
	a.LeasedUntil, a.InFlightUntil = until, until
	return s.charge(ctx, o, a, domain.SourcePayReply)
}

// settle applies the provider's answer about attempt a. src says who told
// payd (it goes into the ledger); domain.SourcePayReply means the pay
// request itself is waiting for this answer. When it is not (webhook,
// recoverer), the outcome is stored (SettledAnswers) so the request's
// idempotency record can be completed and a later replay tells the truth
// instead of a stale 202.
func (s *Checkout) settle(ctx context.Context, o domain.Order, a domain.Attempt, ch domain.Charge, err error, src domain.LedgerSource) (domain.Order, error) {
	switch {
	case err != nil || ch.Status == domain.ChargePending:
		o, err := s.unknown(ctx, o, a, ch.ID, src)
		if err == nil && src == domain.SourcePayReply {
			o.Action = ch.Action // 3-D Secure: what the page must do (ADR 0019)
		}
		return o, err
	case approved(a, ch) && !sameMoney(a, ch):
		return s.hold(ctx, o, a, ch, src)
	case approved(a, ch):
		return s.succeed(ctx, o, a, ch, src)
	case ch.Status == domain.ChargeAuthorized:
		// A hold for an attempt that asked for no hold: nothing payd can
		// believe (the client refuses it already); asked again later.
		return s.unknown(ctx, o, a, ch.ID, src)
	case s.Canceller != nil && ch.ID != "" && a.Status.Unsettled():
		// Cancelled first, released after: a released order whose failed
		// charge could still be completed might be paid twice (ADR 0019).
		got, err := s.Canceller.CancelCharge(ctx, a, ch.ID)
		switch {
		case err != nil || got.Status == domain.ChargePending:
			// Not cancelled yet: the attempt stays unknown, the order
			// processing; the recoverer asks again and cancels then.
			return s.unknown(ctx, o, a, ch.ID, src)
		case got.Status == domain.ChargeSucceeded:
			return s.settle(ctx, o, a, got, nil, src) // completed after all: the money check applies
		}
	}
	return s.fail(ctx, o, a, ch.ID, ch.FailureCode, src)
}

// unknown records that the outcome is not known yet: the order stays
// processing under this request, the caller gets 202, and the webhook, a
// retry after the lease, or the recoverer resolves it. A request that
// answers 202 is done with the attempt and gives its lease up, so a retry
// after a restart may ask at once; InFlightUntil recorded on the attempt,
// not the lease, keeps a charge that may be in flight from being taken for
// one that never happened.
func (s *Checkout) unknown(ctx context.Context, o domain.Order, a domain.Attempt, chargeID string, src domain.LedgerSource) (domain.Order, error) {
	switch {
	case a.Status == domain.AttemptStarted:
		if _, err := s.Attempts.MarkUnknown(ctx, a.ID, chargeID, s.Now().UTC()); err != nil {
			return domain.Order{}, fmt.Errorf("mark attempt %s unknown: %w", a.ID, err)
		}
	case chargeID != "" && a.ProviderChargeID == "":
		// Already unknown, but the provider's charge ID is learned only now
		// (a replayed create answered after the first reply was lost):
		// stored, so the next ask retrieves it by ID (ADR 0020).
		if _, err := s.Attempts.RecordChargeID(ctx, a.ID, chargeID); err != nil {
			return domain.Order{}, fmt.Errorf("record charge id of attempt %s: %w", a.ID, err)
		}
	}
	if src == domain.SourcePayReply && !a.LeasedUntil.IsZero() {
		// Best effort: a lease not given up just runs out.
		_, _ = s.Attempts.Unlease(ctx, a.ID, a.LeasedUntil)
	}
	s.observe(ctx, a, PaymentUnknown)
	return o, nil
}

// Settle applies an outcome that arrived outside the pay request (a
// webhook, the recoverer) to attempt a of order o, and publishes what the
// pay call would now answer (SettledAnswers).
// ch must carry the amount and currency the provider reported: a success
// for other money is held, never applied (domain.ErrAmountMismatch).
func (s *Checkout) Settle(ctx context.Context, o domain.Order, a domain.Attempt, ch domain.Charge, src domain.LedgerSource) (domain.Order, error) {
	return s.settle(ctx, o, a, ch, nil, src)
}

// succeed records the charge and marks the order paid, in one transaction.
// The order moves only if this attempt's own record moved to succeeded (or
// already had). A success for an attempt payd had recorded as failed (a
// false decline) or held is the provider's word that it charged after all
// (the webhook asks the provider before it gets here, ADR 0010): it pays
// the order if the order can still take it. A success the order cannot
// take — it was paid by another charge, or cancelled or expired — goes
// back to the customer.
//
// ch is the provider's charge as it was reported (only its ID when the
// attempt was settled already). Outside refunds of it that were reported
// before the order was paid are in the ledger but not in the order's
// refunded amount; the transaction that pays the order counts them
// (countOutside). The one-round-trip batch cannot read the ledger, so it
// pays only when nothing can be there to count: on the pay reply, whose o
// was read (or claimed) before the provider was asked, for a charge the
// provider reports nothing refunded of, and only while the order is still
// at o's version (an outside refund recorded since raised it,
// OrderStore.Lock). Every other settlement takes the transaction below,
// which reads the ledger once the order is paid. The answer is the order
// as this payment left it, paid (a pay that succeeds answers paid); the
// refunds counted with it are the order's next state, which its watchers
// are told of and every read shows.
func (s *Checkout) succeed(ctx context.Context, o domain.Order, a domain.Attempt, ch domain.Charge, src domain.LedgerSource) (domain.Order, error) {
	if a.CaptureMethod == domain.CaptureManual && !(ch.Status == domain.ChargeSucceeded && ch.CaptureMethod == domain.CaptureAutomatic) {
		// A hold (or what the attempt's record says succeeded: its hold).
		// A provider that took the whole amount at once instead is paid
		// below, as any charge is.
		return s.authorize(ctx, o, a, ch, src)
	}
	chargeID := ch.ID
	now := s.Now().UTC()
	var ours, paid, adopted bool // ours: payd's books now say this attempt succeeded
	var err error
	var settled bool // the batch wrote: the attempt moved (and the order, when paid)
	if s.Batch != nil && chargeID != "" && a.Status.Unsettled() && src == domain.SourcePayReply && ch.RefundedAmount.IsZero() {
		// The common case in one round trip. The attempt moves only if it
		// is still unsettled, the order only if the attempt moved — what
		// the transaction below would do. Nothing written: the
		// transaction below finds out why.
		fault("before_settle_commit")
		mine := a
		mine.OrderID = o.ID
		settled, paid, err = s.Batch.SucceedAndPay(ctx, mine, chargeID, chargeEntry(mine, chargeID, src, now), o.Version, sourceCause(ctx, src, settledRef(src, a)), now)
		if err != nil {
			return domain.Order{}, fmt.Errorf("mark order %s paid: %w", o.ID, err)
		}
		ours = settled
	}
	if !settled || !paid {
		// Settled but not paid: the order was moved, or recorded something
		// since o was read (an outside refund of this charge: it must be
		// counted as the order is paid). The transaction learns which.
		err = s.Tx.InTx(ctx, func(ctx context.Context) error {
			ours, paid = false, false // InTx may run fn again after a conflict: start clean
			finished, err := s.Attempts.Succeed(ctx, a.ID, chargeID, now)
			if err != nil {
				return err
			}
			if finished {
				mine := a
				mine.OrderID = o.ID
				if err := s.book(ctx, chargeEntry(mine, chargeID, src, now)); err != nil {
					return err
				}
			}
			if ours = finished || a.Status == domain.AttemptSucceeded; !ours {
				// a may be stale: the pay request, a concurrent delivery of the
				// same event or the recoverer may have settled this very charge
				// since it was read. Refunding it then would refund the
				// customer's one payment of a paid order.
				if ours, err = s.settledAs(ctx, a.ID, chargeID); err != nil || !ours {
					return err
				}
			}
			if paid, err = s.Orders.MarkPaid(ctx, o.ID, a.RequestID, sourceCause(ctx, src, settledRef(src, a)), now); err != nil {
				return err
			}
			if paid {
				if !finished {
					// Settled before: its transaction booked the charge,
					// and a repeat records nothing.
					mine := a
					mine.OrderID = o.ID
					if err := s.book(ctx, payingEntry(mine, cmp.Or(a.ProviderChargeID, chargeID), src, now)); err != nil {
						return err
					}
				}
				if _, err = countOutside(ctx, s.Ledger, s.Orders, o.ID, chargeID, o.Currency, now); err != nil {
					return err
				}
			}
			fault("before_settle_commit")
			return nil
		})
	}
	if err != nil {
		return domain.Order{}, fmt.Errorf("mark order %s paid: %w", o.ID, err)
	}
	if !ours {
		if ours, paid, err = s.adopt(ctx, o, a.ID, chargeID, src, now); err != nil {
			return domain.Order{}, fmt.Errorf("mark order %s paid: %w", o.ID, err)
		}
		adopted = paid
	}
	fault("after_settle_commit")
	switch {
	case adopted:
		if o, err = s.Orders.FindByID(ctx, o.ID); err != nil {
			return domain.Order{}, err
		}
		s.changed(o.ID)
		s.observe(ctx, a, PaymentPaid)
	case paid:
		if o, err = s.moved(ctx, o, domain.EventSucceed, a.RequestID, now); err != nil {
			return domain.Order{}, err
		}
		s.changed(o.ID)
		s.observe(ctx, a, PaymentPaid)
	default:
		if o, err = s.Orders.FindByID(ctx, o.ID); err != nil {
			return domain.Order{}, err
		}
		if !ours || !o.PaidBy(a) {
			return o, s.orphan(ctx, o, a, chargeID, src)
		}
	}
	if adopted {
		s.settleHeld(ctx, a)
	}
	if src != domain.SourcePayReply {
		s.publishSettled(ctx, o, a, nil)
	}
	return o, nil
}

// settledAs reports whether attempt id is now recorded as succeeded with
// charge chargeID.
func (s *Checkout) settledAs(ctx context.Context, id, chargeID string) (bool, error) {
	cur, err := s.Attempts.FindByID(ctx, id)
	if err != nil {
		return false, err
	}
	return cur.Status == domain.AttemptSucceeded && (chargeID == "" || cur.ProviderChargeID == chargeID), nil
}

// fail records a definitive decline and releases the order so the customer
// may pay again. The order is released only if this attempt's own record
// moved: a late failure for an old attempt never releases a newer claim.
func (s *Checkout) fail(ctx context.Context, o domain.Order, a domain.Attempt, chargeID, code string, src domain.LedgerSource) (domain.Order, error) {
	o, released, err := s.release(ctx, o, a, chargeID, code, sourceCause(ctx, src, settledRef(src, a)))
	if err != nil {
		return domain.Order{}, err
	}
	if code == "" {
		code = "card_declined"
	}
	decline := &domain.DeclineError{Code: code}
	if src != domain.SourcePayReply && released {
		s.publishSettled(ctx, o, a, decline)
	}
	return o, decline
}

// refused settles a charge request the provider refused outright (a 4xx it
// understood): nothing was charged, so the attempt fails with the
// provider's code and the order is released at once, as for a decline. The
// outcome is stored here (SettledAnswers, not final), so the
// request's idempotency record is completed as failed and the key may run
// again (docs/guarantees.md#idempotency-rules): left to the request's own 400 answer, the record would
// read as input never acted on and be dropped.
func (s *Checkout) refused(ctx context.Context, o domain.Order, a domain.Attempt, re *domain.ProviderRequestError) (domain.Order, error) {
	code := re.Code
	if code == "" {
		code = "provider_refused"
	}
	o, released, err := s.release(ctx, o, a, "", code, sourceCause(ctx, domain.SourcePayReply, a.RequestID))
	if err != nil {
		return domain.Order{}, err
	}
	outcome := refusalOutcome(code)
	if released {
		// Not final: nothing was charged, the key may run again.
		s.answer(ctx, o, a, outcome, false)
	}
	return o, outcome
}

// release fails attempt a with code and gives its order back (processing →
// pending), with its order.payment_failed event caused by c, in one
// transaction. The order is released only if this
// attempt's own record moved: a late failure for an old attempt never
// releases a newer claim.
func (s *Checkout) release(ctx context.Context, o domain.Order, a domain.Attempt, chargeID, code string, c domain.Cause) (domain.Order, bool, error) {
	now := s.Now().UTC()
	var released bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		released = false // InTx may run fn again after a conflict: start clean
		finished, err := s.Attempts.Fail(ctx, a.ID, chargeID, code, now)
		if err != nil || !finished {
			return err
		}
		released, err = s.Orders.Release(ctx, o.ID, a.RequestID, c, now)
		return err
	})
	if err != nil {
		return domain.Order{}, false, fmt.Errorf("release order %s: %w", o.ID, err)
	}
	if released {
		if o, err = s.moved(ctx, o, domain.EventRelease, a.RequestID, now); err != nil {
			return domain.Order{}, false, err
		}
		s.changed(o.ID)
		s.observe(ctx, a, PaymentDeclined)
	}
	return o, released, nil
}

// moved returns order o as event e, by the pay request requestID, left it
// at now: the store's guarded UPDATE for e matched the order's row, so
// domain's machine knows the row without a re-read. Should o be older than
// the row the guard matched (the machine refuses to move it), the order is
// read back instead.
func (s *Checkout) moved(ctx context.Context, o domain.Order, e domain.Event, requestID string, now time.Time) (domain.Order, error) {
	if next, err := o.Apply(e, requestID, now); err == nil {
		return next, nil
	}
	return s.Orders.FindByID(ctx, o.ID)
}

// publishSettled stores the answer the pay request a.RequestID would now
// get, for its idempotency record.
func (s *Checkout) publishSettled(ctx context.Context, o domain.Order, a domain.Attempt, outcome error) {
	// A payment the provider never received is no decline: the key stays
	// free to try again. Nor is a held charge final: an operator (or the
	// provider's record) settles it, and a retry with the key then learns
	// how from the order. Anything else is the truth a replay must tell.
	var decline *domain.DeclineError
	final := (!errors.As(outcome, &decline) || decline.Code != domain.NotCharged) && !errors.Is(outcome, domain.ErrAmountMismatch)
	s.answer(ctx, o, a, outcome, final)
}

// answer stores outcome as the answer of the pay request a.RequestID
// (SettledAnswers). It is best effort: if that write is lost, the record
// stays processing and the next request with the key takes over after the
// lease and recovers the same outcome from the order.
func (s *Checkout) answer(ctx context.Context, o domain.Order, a domain.Attempt, outcome error, final bool) {
	if s.Answers != nil {
		_ = s.Answers.PaymentSettled(ctx, o, a, outcome, final)
	}
}

// orphan hands a charge the order cannot take (a second success, a success
// after close, a success for an attempt payd recorded as failed) to the
// refund path.
func (s *Checkout) orphan(ctx context.Context, o domain.Order, a domain.Attempt, chargeID string, src domain.LedgerSource) error {
	if s.Orphans == nil {
		return nil
	}
	return s.Orphans.Orphan(ctx, o, a, chargeID, src)
}

func (s *Checkout) obs() Observer { return observing(s.Observer) }

// book appends e to the order's ledger (a repeat records nothing).
func (s *Checkout) book(ctx context.Context, e domain.LedgerEntry) error {
	return appendEntry(ctx, s.Ledger, e)
}

func (s *Checkout) changed(id string) { s.obs().OrderChanged(id) }

func (s *Checkout) observe(ctx context.Context, a domain.Attempt, result PaymentOutcome) {
	s.obs().PaymentResult(ctx, a, result)
}

// settledRef is the reference of the cause of a settlement of attempt a
// learned from src, when the context carries none: the pay request's key
// on its reply, the attempt the recoverer asked about; a webhook's and a
// run's are their own (WithCause).
func settledRef(src domain.LedgerSource, a domain.Attempt) string {
	switch src {
	case domain.SourcePayReply:
		return a.RequestID
	case domain.SourceRecoverer:
		return a.ID
	}
	return ""
}
