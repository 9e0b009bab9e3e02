package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Recoverer resolves payments whose outcome nobody is waiting for: attempts
// left started (the worker died) or unknown (the reply was lost, the
// webhook never came) for longer than the lease. It asks the provider about
// each one before anything else. The provider's adapter asks about an
// attempt it has nothing under by replaying its create under the
// attempt's key (ADR 20, ADR 54): a charge that replay makes is the
// customer's one payment and pays the order. Only the provider's
// definitive answer releases the order; a look-up's "not found" never
// does, since a request delayed in transit may still be carried out.
//
// Several replicas may run it at once: each attempt is leased to one of
// them by a guarded UPDATE of its updated_at before any work is done.
type Recoverer struct {
	Checkout *Checkout
	Attempts AttemptStore
	Orders   OrderStore
	Provider PaymentProvider
	Refunds  *Refunds
	Lease    time.Duration
	Now      func() time.Time
	// ActionTTL (PAYD_ORDER_TTL) is how long a charge may wait for the
	// customer (3-D Secure) before the recoverer cancels it and, once the
	// cancel is confirmed, releases the order. Zero never cancels.
	ActionTTL time.Duration
}

// Run handles one batch and returns how many attempts it brought to a final
// state plus how many pending refunds it retried.
func (r *Recoverer) Run(ctx context.Context) (int64, error) {
	now := r.Now().UTC()
	stale, err := r.Attempts.ListUnsettled(ctx, now.Add(-r.Lease), jobBatch)
	if err != nil {
		return 0, err
	}
	var n int64
	var errs []error
	for _, a := range stale {
		// The lease runs from now, not from when the pass began: the
		// attempts before this one may have taken longer than a lease
		// (slow lookups), and a lease already over when taken would let
		// another replica take the attempt too and ask about it again.
		at := r.Now().UTC()
		won, err := r.Attempts.Lease(ctx, a.ID, at, at.Add(r.Lease))
		if err != nil || !won {
			errs = append(errs, err)
			continue // another replica has it
		}
		// Judge by the row as it is under the lease, not as listed: a retry
		// may have resent the charge (a new in-flight deadline) or a
		// webhook settled it since.
		if a, err = r.Attempts.FindByID(ctx, a.ID); err != nil {
			errs = append(errs, fmt.Errorf("attempt %s: %w", a.ID, err))
			continue
		}
		if !a.Status.Unsettled() {
			continue // settled meanwhile (a webhook, a retry)
		}
		settled, err := r.settle(WithCause(ctx, domain.Cause{Kind: domain.CauseRecoverer, Ref: a.ID}), a)
		if err != nil {
			errs = append(errs, fmt.Errorf("attempt %s: %w", a.ID, err))
			continue
		}
		if settled {
			n++ // a charge still pending at the provider is not done yet
		}
	}
	if r.Refunds != nil {
		m, err := r.Refunds.RetryPending(ctx, now.Add(-r.Lease))
		n += m
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// resolve asks the provider about one attempt and settles it; a charge the
// provider still has pending is left for a later pass.
func (r *Recoverer) resolve(ctx context.Context, a domain.Attempt) error {
	_, err := r.settle(WithCause(ctx, domain.Cause{Kind: domain.CauseRecoverer, Ref: a.ID}), a)
	return err
}

// settle is resolve reporting whether the attempt reached a final state.
func (r *Recoverer) settle(ctx context.Context, a domain.Attempt) (bool, error) {
	o, err := r.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return false, err
	}
	ch, err := r.Provider.GetCharge(ctx, a)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound) && r.Checkout.inFlight(a, r.Now().UTC()):
		// A charge request under this key may still reach the provider
		// (ADR 9): "not found" proves nothing yet. The attempt stays
		// unknown and a later pass asks again.
		return false, nil
	case errors.Is(err, domain.ErrChargeNotFound):
		// The adapter says no charge under this key exists or can come:
		// the sandbox's never says so for an attempt still being settled
		// (it replays the create instead), Stripe's only a day after the
		// key's requests (ADR 20, 54). Release the order.
		ch = domain.Charge{Status: domain.ChargeFailed, FailureCode: domain.NotCharged}
	case err != nil:
		return false, err // still unknown; the next lease tries again
	}
	if ch.Status == domain.ChargePending {
		if ch.ID != "" && a.ProviderChargeID == "" {
			// The charge's ID learned only now (the reply that named it was
			// lost): stored, so every later ask reads this charge by its ID.
			// At Stripe an ask without it replays the create, whose stored
			// first response never changes: a PaymentIntent it left
			// processing would read processing forever (ADR 0020, 0052).
			if _, err := r.Attempts.RecordChargeID(ctx, a.ID, ch.ID); err != nil {
				return false, fmt.Errorf("record charge id of attempt %s: %w", a.ID, err)
			}
			a.ProviderChargeID = ch.ID
		}
		if ch.Action == nil || ch.ID == "" || r.Checkout.Canceller == nil || r.ActionTTL <= 0 ||
			r.Now().UTC().Sub(a.CreatedAt) < r.ActionTTL {
			return false, nil
		}
		// The customer never completed 3-D Secure. The charge is cancelled
		// first, so it cannot be completed later, and only a confirmed
		// cancel releases the order; one that finds it succeeded settles it.
		if ch, err = r.Checkout.Canceller.CancelCharge(ctx, a, ch.ID); err != nil || ch.Status == domain.ChargePending {
			return false, err
		}
	}
	_, err = r.Checkout.Settle(ctx, o, a, ch, domain.SourceRecoverer)
	if errors.Is(err, domain.ErrPaymentDeclined) || errors.Is(err, domain.ErrAmountMismatch) {
		return true, nil // settled: released, or held for an operator
	}
	return err == nil, err
}
