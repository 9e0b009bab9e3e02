package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// Webhooks applies the provider's events through the same guarded
// transitions as the pay endpoint, so their order and repetition do not
// matter: each event ID is stored once in an inbox, and an event that
// would move an order the wrong way finds its guard false.
type Webhooks struct {
	Inbox         InboxStore
	Attempts      AttemptStore
	Orders        OrderStore
	Checkout      *Checkout
	Refunds       *Refunds
	Discrepancies DiscrepancyStore
	Now           func() time.Time
	// Observer, optional, is told of each event handled and each
	// discrepancy an event newly records.
	Observer Observer
	// Provider is asked for its record of a charge when an event
	// contradicts payd's books (ADR 0010). Without it, such events are
	// applied as before: through the guarded transitions only.
	Provider PaymentProvider
	// SameCharge: a payment event must name the charge the attempt
	// stored, if it stored one; another is a discrepancy, never the
	// attempt's outcome. On for Stripe, where any integration on the
	// account can create a PaymentIntent carrying payd's metadata; the
	// sandbox's events keep their behaviour (its money check reports them).
	SameCharge bool
	// Disputes, optional in tests (which then see a dispute as a
	// discrepancy only), keeps disputes and books their money.
	Disputes *Disputes
}

// Webhook outcomes, stored on the inbox row and reported to the provider.
const (
	OutcomeApplied     = "applied"
	OutcomeDuplicate   = "duplicate"
	OutcomeIgnored     = "ignored"
	OutcomeDiscrepancy = "discrepancy"
)

// Receive stores the event once, under msgID (the message id every
// redelivery carries), with payload (the verified body, as received), and
// applies it. A redelivery of an event already applied changes nothing;
// one whose first delivery died before it was applied is applied now
// (applying is idempotent).
func (s *Webhooks) Receive(ctx context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (string, error) {
	stored, isNew, err := s.Inbox.Receive(ctx, domain.WebhookEvent{
		ID: msgID, Type: string(ev.Type), OrderID: ev.OrderID, AttemptID: ev.IdempotencyKey,
		ChargeID: ev.ChargeID, Payload: payload, ReceivedAt: s.Now().UTC(),
	})
	if err != nil {
		return "", fmt.Errorf("store event %s: %w", msgID, err)
	}
	if !isNew && stored.ProcessedAt != nil {
		s.observe(string(ev.Type), OutcomeDuplicate)
		return OutcomeDuplicate, nil
	}
	outcome, err := s.apply(ctx, ev)
	if err != nil {
		return "", err
	}
	if err := s.Inbox.MarkProcessed(ctx, msgID, outcome, s.Now().UTC()); err != nil {
		return "", fmt.Errorf("mark event %s processed: %w", msgID, err)
	}
	s.observe(string(ev.Type), outcome)
	return outcome, nil
}

func (s *Webhooks) apply(ctx context.Context, ev domain.ProviderEvent) (string, error) {
	switch ev.Type {
	case domain.EventPaymentSucceeded, domain.EventPaymentFailed:
		return s.applyPayment(ctx, ev)
	case domain.EventRefundSucceeded:
		// payd's own refund is confirmed (only for the money it asked);
		// one payd never asked for is recorded as an outside refund.
		return s.Refunds.Reported(ctx, ev)
	case domain.EventRefundFailed:
		return s.Refunds.Failed(ctx, ev.IdempotencyKey, ev.RefundID)
	}
	if ev.Type.Dispute() {
		if s.Disputes == nil {
			return s.disputed(ctx, ev)
		}
		return s.Disputes.Apply(ctx, ev)
	}
	return OutcomeIgnored, nil
}

// applyPayment settles the attempt the event names. A charge payd never
// made is recorded as a discrepancy for an operator. An event that
// contradicts payd's books — a success for an attempt payd recorded as
// failed or held, a failure for one not recorded as failed — is settled by
// the provider's own record of the charge, asked now (ADR 0010): events
// arrive late, twice and out of order, the provider's record does not.
// Every success, reported or asked, goes through Checkout's money check.
func (s *Webhooks) applyPayment(ctx context.Context, ev domain.ProviderEvent) (string, error) {
	a, err := s.Attempts.FindByID(ctx, ev.IdempotencyKey)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		if ev.Type == domain.EventPaymentFailed {
			return OutcomeIgnored, nil // nothing moved, nothing to do
		}
		return s.discrepancy(ctx, domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: ev.ChargeID, OrderID: ev.OrderID,
			ChargeID: ev.ChargeID, Note: "payment.succeeded for a charge payd has no attempt for"}, ev)
	}
	if err != nil {
		return "", err
	}
	if s.SameCharge && a.ProviderChargeID != "" && ev.ChargeID != "" && ev.ChargeID != a.ProviderChargeID {
		// The event names another charge than the one this attempt's
		// request learned (another PaymentIntent carrying its metadata):
		// not this attempt's outcome. A success is money payd did not ask
		// for under this attempt, for an operator; a failure moves nothing.
		if ev.Type == domain.EventPaymentFailed {
			return OutcomeIgnored, nil
		}
		return s.discrepancy(ctx, domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: ev.ChargeID, OrderID: a.OrderID,
			AttemptID: a.ID, ChargeID: ev.ChargeID, LocalAmount: a.Amount, Currency: a.Currency,
			Note: "payment.succeeded names charge " + truncate(ev.ChargeID, 64) + ", not the attempt's " + truncate(a.ProviderChargeID, 64) + "; not applied"}, ev)
	}
	ch := eventCharge(a, ev)
	if s.contradicts(a, ev.Type) {
		truth, done, err := s.askProvider(ctx, a)
		if err != nil || done != "" {
			return done, err
		}
		if a.Status == domain.AttemptSucceeded && truth.Status == domain.ChargeFailed {
			// The order is paid and stays paid (no transition un-pays it);
			// the provider no longer stands by the charge: an operator must look.
			return s.record(ctx, domain.Discrepancy{Type: domain.MissingProviderCharge, Reference: a.OrderID, OrderID: a.OrderID,
				AttemptID: a.ID, ChargeID: a.ProviderChargeID, LocalAmount: a.Amount, Currency: a.Currency,
				Note: "payment.failed for the attempt that paid the order, and the provider now reports its charge failed"})
		}
		if a.Status == domain.AttemptHeld && truth.Status != domain.ChargeSucceeded {
			return OutcomeIgnored, nil // held: the operator settles it
		}
		ch = truth
	}
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return "", err
	}
	_, err = s.Checkout.Settle(ctx, o, a, ch, domain.SourceWebhook)
	switch {
	case errors.Is(err, domain.ErrAmountMismatch):
		return OutcomeDiscrepancy, nil
	case err != nil && !errors.Is(err, domain.ErrPaymentDeclined):
		return "", err
	}
	return OutcomeApplied, nil
}

// contradicts reports whether an event of type typ disagrees with what payd
// recorded for attempt a. A success for an attempt still unsettled or
// succeeded is news or a repeat; so is a failure for one recorded failed.
// A failure for any other is asked of the provider before it releases
// anything: a false failure would free the order for a second charge.
func (s *Webhooks) contradicts(a domain.Attempt, typ domain.ProviderEventType) bool {
	if s.Provider == nil {
		return false
	}
	if typ == domain.EventPaymentSucceeded {
		return a.Status == domain.AttemptFailed || a.Status == domain.AttemptHeld
	}
	return a.Status != domain.AttemptFailed
}

// askProvider returns the provider's record of attempt a's charge, or the
// outcome of an event that record leaves nothing to apply for: no charge
// under that key (the event is wrong, or the charge is still in flight and
// its own path settles it), a charge still pending, or a charge whose
// status agrees with payd's books. An unreachable provider is an error, so
// the event is delivered again.
func (s *Webhooks) askProvider(ctx context.Context, a domain.Attempt) (domain.Charge, string, error) {
	truth, err := s.Provider.GetCharge(ctx, a.ID)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return truth, OutcomeIgnored, nil
	case err != nil:
		return truth, "", fmt.Errorf("ask the provider about attempt %s: %w", a.ID, err)
	case truth.Status == domain.ChargePending:
		return truth, OutcomeIgnored, nil
	case a.Status == domain.AttemptSucceeded && truth.Status == domain.ChargeSucceeded,
		a.Status == domain.AttemptFailed && truth.Status == domain.ChargeFailed:
		return truth, OutcomeApplied, nil // the provider confirms payd's books
	}
	return truth, "", nil
}

// eventCharge is the charge an event describes, with the money it
// reports: Checkout checks it against the attempt. An amount missing or
// unreadable is taken as -1, never the attempt's amount, so a success
// reported without readable money is held as an amount_mismatch for an
// operator, never applied.
func eventCharge(a domain.Attempt, ev domain.ProviderEvent) domain.Charge {
	amount := ev.Amount
	if !ev.AmountReadable() {
		amount = decimal.NewFromInt(-1) // unreadable: never the attempt's amount
	}
	ch := domain.Charge{ID: ev.ChargeID, IdempotencyKey: a.ID, OrderID: ev.OrderID, Amount: amount, Currency: ev.Currency, Status: domain.ChargeSucceeded}
	if ev.Type == domain.EventPaymentFailed {
		ch.Status, ch.FailureCode = domain.ChargeFailed, ev.FailureCode
	}
	return ch
}

// disputed records a customer's dispute of a payment for an operator: the
// bank has taken the money back provisionally, and only a person can
// answer it (with evidence, at the provider) or accept it. payd moves no
// order on it (ADR 0019). The dispute's ID is the reference, so a
// redelivery records nothing new.
func (s *Webhooks) disputed(ctx context.Context, ev domain.ProviderEvent) (string, error) {
	disc := domain.Discrepancy{Type: domain.Disputed, Reference: ev.ID, ChargeID: ev.ChargeID,
		Note: "the customer disputed the payment (reason: " + ev.FailureCode + "); answer it at the provider"}
	if disc.Reference == "" {
		disc.Reference = ev.ChargeID
	}
	if a, err := s.Attempts.FindByID(ctx, ev.IdempotencyKey); err == nil {
		disc.OrderID, disc.AttemptID, disc.LocalAmount, disc.Currency = a.OrderID, a.ID, a.Amount, a.Currency
	} else if !errors.Is(err, domain.ErrAttemptNotFound) {
		return "", err
	}
	return s.discrepancy(ctx, disc, ev)
}

// discrepancy records disc with the money ev reports, quoted as the
// provider wrote it when payd cannot hold it exactly (withProviderAmount).
func (s *Webhooks) discrepancy(ctx context.Context, disc domain.Discrepancy, ev domain.ProviderEvent) (string, error) {
	disc = withProviderAmount(disc, ev.AmountText, ev.Currency)
	if disc.Reference == "" {
		disc.Reference = ev.IdempotencyKey
	}
	return s.record(ctx, disc)
}

// record stores a discrepancy an event revealed, once.
func (s *Webhooks) record(ctx context.Context, disc domain.Discrepancy) (string, error) {
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(disc, s.Now))
	if err != nil {
		return "", fmt.Errorf("record %s: %w", disc.Type, err)
	}
	if isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, stored) // as stored: its id and status
	}
	return OutcomeDiscrepancy, nil
}

// newDiscrepancy fills the bookkeeping fields of a freshly found discrepancy.
func newDiscrepancy(d domain.Discrepancy, now func() time.Time) domain.Discrepancy {
	d.ID, d.Status, d.DetectedAt = newID(), domain.DiscrepancyOpen, now().UTC()
	return d
}

func (s *Webhooks) observe(eventType, outcome string) {
	observing(s.Observer).WebhookApplied(eventType, outcome)
}
