package service

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// Provider, required, is asked for its record of the charge behind
	// every payment.succeeded before anything is applied (ADR 0031), and
	// behind every event that contradicts payd's books (ADR 0010).
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

// WebhookOutcome is how a provider event was handled: domain's list, which
// the inbox's CHECK holds to.
type WebhookOutcome = domain.WebhookOutcome

// Webhook outcomes.
const (
	OutcomeApplied     = domain.OutcomeApplied
	OutcomeDuplicate   = domain.OutcomeDuplicate
	OutcomeIgnored     = domain.OutcomeIgnored
	OutcomeDiscrepancy = domain.OutcomeDiscrepancy
)

// Receive stores the event once, under msgID (the message id every
// redelivery carries), with payload (the verified body, as received), and
// applies it. A redelivery of an event already applied changes nothing;
// one whose first delivery died before it was applied is applied now
// (applying is idempotent).
func (s *Webhooks) Receive(ctx context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (WebhookOutcome, error) {
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
	outcome, err := s.apply(ctx, msgID, ev)
	if err != nil {
		return "", err
	}
	if err := s.Inbox.MarkProcessed(ctx, msgID, string(outcome), s.Now().UTC()); err != nil {
		return "", fmt.Errorf("mark event %s processed: %w", msgID, err)
	}
	s.observe(string(ev.Type), outcome)
	return outcome, nil
}

func (s *Webhooks) apply(ctx context.Context, msgID string, ev domain.ProviderEvent) (WebhookOutcome, error) {
	ref := ev.ID
	if ref == "" {
		ref = msgID
	}
	ctx = WithCause(ctx, domain.Cause{Kind: domain.CauseWebhook, Ref: ref})
	switch ev.Type {
	case domain.EventPaymentSucceeded, domain.EventPaymentFailed:
		return s.applyPayment(ctx, msgID, ev)
	case domain.EventPaymentAuthorized:
		return s.applyHold(ctx, ev)
	case domain.EventPaymentCaptured, domain.EventPaymentVoided:
		// They answer payd's own capture or void, whose action settles by
		// asking again under its key (Holds): nothing to apply here.
		return OutcomeIgnored, nil
	case domain.EventRefundSucceeded:
		// payd's own refund is confirmed (only for the money it asked);
		// one payd never asked for is recorded as an outside refund.
		return s.Refunds.Reported(ctx, ev)
	case domain.EventRefundFailed:
		if ev.IdempotencyKey == "" {
			// Not payd's: an outside refund payd may have booked.
			return s.Refunds.OutsideReversed(ctx, ev)
		}
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

// applyPayment settles the attempt the event names. An event is a hint,
// never an order (ADR 0031): a success is applied only as the provider's
// own record of the attempt's charge, asked now, and only when that record
// confirms it (confirmSuccess). A success for a charge payd never made is
// recorded for an operator (stranger). A failure that contradicts payd's
// books is settled by the provider's record too (ADR 0010): events arrive
// late, twice and out of order, the provider's record does not. Every
// success goes through Checkout's money check.
func (s *Webhooks) applyPayment(ctx context.Context, msgID string, ev domain.ProviderEvent) (WebhookOutcome, error) {
	a, err := s.Attempts.FindByID(ctx, ev.IdempotencyKey)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		if ev.Type == domain.EventPaymentFailed {
			return OutcomeIgnored, nil // nothing moved, nothing to do
		}
		return s.stranger(ctx, msgID, ev)
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
		return s.twin(ctx, a, ev)
	}
	if ev.Type == domain.EventPaymentSucceeded {
		return s.confirmSuccess(ctx, msgID, a, ev)
	}
	ch := failedCharge(a, ev)
	if s.contradicts(a) {
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
	return s.settle(ctx, a, ch)
}

// applyHold applies a payment.authorized as a hint (ADR 0031, 0060): the
// provider is asked about the attempt the event names, and only a hold it
// confirms, of the charge the attempt knows, for a manual-capture attempt
// payd is still settling, is settled (Checkout: the order is authorized,
// through the money check). Anything else changes nothing: a hold payd
// never asked for is reconciliation's to find.
func (s *Webhooks) applyHold(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
	a, err := s.Attempts.FindByID(ctx, ev.IdempotencyKey)
	switch {
	case errors.Is(err, domain.ErrAttemptNotFound):
		return OutcomeIgnored, nil
	case err != nil:
		return "", err
	case a.CaptureMethod != domain.CaptureManual || !a.Status.Unsettled():
		return OutcomeIgnored, nil // not a hold payd asked for, or settled already
	}
	truth, err := s.Provider.GetCharge(ctx, a)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return OutcomeIgnored, nil
	case err != nil:
		return "", fmt.Errorf("ask the provider about attempt %s: %w", a.ID, err)
	case truth.Status != domain.ChargeAuthorized || (a.ProviderChargeID != "" && truth.ID != a.ProviderChargeID):
		return OutcomeIgnored, nil // the charge's own path settles what it became
	}
	return s.settle(ctx, a, truth)
}

// twin handles a payment.succeeded that names attempt a but another charge
// than the one a's request learned: a second charge carrying payd's
// metadata (another integration on the account created it). The event is
// a hint: the provider is asked about that charge. One it confirms
// succeeded, for a's order, while another charge already paid the order,
// is a duplicate charge, refunded at once as every duplicate is
// (Refunds.Orphan: booked, refunded under a key derived from the charge,
// recorded as duplicate_charge). One for an order not paid yet is left to
// an operator as a missing_local_payment (Orphan decides that too); one
// the provider does not confirm changes nothing but a record for an
// operator.
func (s *Webhooks) twin(ctx context.Context, a domain.Attempt, ev domain.ProviderEvent) (WebhookOutcome, error) {
	note := "payment.succeeded names charge " + truncate(ev.ChargeID, 64) + ", not the attempt's " + truncate(a.ProviderChargeID, 64)
	missing := domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: ev.ChargeID, OrderID: a.OrderID,
		AttemptID: a.ID, ChargeID: ev.ChargeID, LocalAmount: a.Amount, Currency: a.Currency, Note: note + "; not applied"}
	if s.Refunds == nil || s.Refunds.Charges == nil {
		return s.discrepancy(ctx, missing, ev)
	}
	ch, err := s.Refunds.Charges.FindCharge(ctx, ev.ChargeID)
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return s.discrepancy(ctx, domain.Discrepancy{Type: domain.UnconfirmedPayment, Reference: ev.ChargeID, OrderID: a.OrderID,
			AttemptID: a.ID, ChargeID: ev.ChargeID, LocalAmount: a.Amount, Currency: a.Currency,
			Note: note + "; the provider has no such charge"}, ev)
	case err != nil:
		return "", fmt.Errorf("%w: ask the provider about charge %s: %w", domain.ErrProviderUnavailable, truncate(ev.ChargeID, 64), err)
	case ch.Status != domain.ChargeSucceeded || (ch.OrderID != "" && ch.OrderID != a.OrderID):
		return s.discrepancy(ctx, missing, ev)
	}
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return "", err
	}
	dup := a
	dup.Amount, dup.Currency = ch.Amount, domain.Currency(ch.Currency)
	if err := s.Refunds.Orphan(ctx, o, dup, ch.ID, domain.SourceWebhook); err != nil {
		return "", err
	}
	return OutcomeDiscrepancy, nil
}

// confirmSuccess applies a payment.succeeded for attempt a only as the
// provider's own record of a's charge, asked now by a's key, and only when
// that record confirms the event: succeeded, the charge the event names
// (and the attempt stored, if it stored one), the money the event reports.
// A success the provider does not confirm is never applied; it is recorded
// as unconfirmed_payment, with the event kept in the inbox. A charge the
// provider still reports pending is not yet a contradiction: the event is
// ignored, and the charge's own path (the pay key's retry, the recoverer,
// a later event) settles it. A record for other money than the attempt's
// is applied all the same, through the money check: it holds the attempt
// as an amount_mismatch, as on every other path (ADR 0010). An unreachable
// provider is an error, so the event is delivered again.
func (s *Webhooks) confirmSuccess(ctx context.Context, msgID string, a domain.Attempt, ev domain.ProviderEvent) (WebhookOutcome, error) {
	truth, err := s.Provider.GetCharge(ctx, a)
	if err != nil && !errors.Is(err, domain.ErrChargeNotFound) {
		return "", fmt.Errorf("ask the provider about attempt %s: %w", a.ID, err)
	}
	if err == nil && truth.Status == domain.ChargePending {
		return OutcomeIgnored, nil // not yet: the charge's own path settles it
	}
	said := denial(truth, err, ev)
	if said == "" && a.ProviderChargeID != "" && truth.ID != a.ProviderChargeID {
		said = "its charge for the attempt is " + truncate(truth.ID, 64) + ", not the attempt's " + truncate(a.ProviderChargeID, 64)
	}
	if said != "" {
		return s.unconfirmed(ctx, msgID, domain.Discrepancy{OrderID: a.OrderID, AttemptID: a.ID, LocalAmount: a.Amount, Currency: a.Currency}, truth, ev, said)
	}
	return s.settle(ctx, a, truth)
}

// stranger handles a payment.succeeded for an attempt payd has no record
// of. The provider is asked by the event's key: a charge it made is money
// payd never asked for (missing_local_payment, for an operator); none, or
// one it reports failed, means the event is false (unconfirmed_payment).
// A charge still pending is not yet either: its own event comes later.
func (s *Webhooks) stranger(ctx context.Context, msgID string, ev domain.ProviderEvent) (WebhookOutcome, error) {
	truth, err := s.Provider.GetCharge(ctx, domain.Attempt{ID: ev.IdempotencyKey, OrderID: ev.OrderID})
	switch {
	case err != nil && !errors.Is(err, domain.ErrChargeNotFound):
		return "", fmt.Errorf("ask the provider about key %s: %w", truncate(ev.IdempotencyKey, 64), err)
	case err == nil && truth.Status == domain.ChargePending:
		return OutcomeIgnored, nil
	}
	if said := denial(truth, err, ev); said != "" {
		return s.unconfirmed(ctx, msgID, domain.Discrepancy{OrderID: ev.OrderID}, truth, ev, said)
	}
	return s.discrepancy(ctx, domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: ev.ChargeID, OrderID: ev.OrderID,
		ChargeID: ev.ChargeID, Note: "payment.succeeded for a charge payd has no attempt for"}, ev)
}

// denial says how the provider's record truth (or err, asking for it)
// fails to confirm the success ev reports, in the provider's words; empty
// when it confirms it: succeeded, the charge ev names, the money ev
// reports, exactly.
func denial(truth domain.Charge, err error, ev domain.ProviderEvent) string {
	switch {
	case errors.Is(err, domain.ErrChargeNotFound):
		return "it has no charge under the key"
	case truth.Status != domain.ChargeSucceeded:
		return "its charge " + truncate(truth.ID, 64) + " is " + string(truth.Status)
	case ev.ChargeID != "" && ev.ChargeID != truth.ID:
		return "its charge under the key is " + truncate(truth.ID, 64)
	case !ev.AmountReadable() || !ev.Amount.Equal(truth.Amount) || ev.Currency != truth.Currency:
		return "its charge " + truncate(truth.ID, 64) + " is for " + domain.FormatAmount(truth.Amount, domain.Currency(truth.Currency)) + " " + truncate(truth.Currency, 8)
	}
	return ""
}

// unconfirmed records a success the provider does not confirm, never
// applied: disc says whose it would be, truth is the provider's record
// (zero when it has none) and said what the provider answered. The note
// quotes what the event claimed, as written; the provider amount is the
// provider's, not the event's. The reference is the message id, so a
// redelivery of the same message records nothing new, and the inbox row
// under that id keeps the event as received.
func (s *Webhooks) unconfirmed(ctx context.Context, msgID string, disc domain.Discrepancy, truth domain.Charge, ev domain.ProviderEvent, said string) (WebhookOutcome, error) {
	disc.Type, disc.Reference = domain.UnconfirmedPayment, msgID
	if truth.ID != "" && truth.ID == ev.ChargeID && truth.Status == domain.ChargeSucceeded {
		// The discrepancy names a charge only when the provider holds it,
		// succeeded: a charge it has not (or that moved no money) is
		// nothing to give back, and naming it would offer a refund that
		// resolving must refuse. The event's claim stays in the note.
		disc.ChargeID = truncate(ev.ChargeID, 64)
	}
	if disc.Reference == "" {
		disc.Reference = ev.IdempotencyKey
	}
	if disc.Currency == "" {
		disc.Currency, _ = domain.ParseCurrency(ev.Currency)
	}
	if truth.ID != "" && truth.Currency == string(disc.Currency) {
		disc.ProviderAmount = truth.Amount
	}
	disc.Note = "payment.succeeded (webhook-id " + truncate(msgID, 128) + ", charge " + truncate(ev.ChargeID, 64) + ", " +
		truncate(ev.AmountText, 32) + " " + truncate(ev.Currency, 8) + ") not confirmed by the provider: " + said + "; not applied"
	return s.record(ctx, disc)
}

// settle applies ch, the outcome the provider stands by, to attempt a.
func (s *Webhooks) settle(ctx context.Context, a domain.Attempt, ch domain.Charge) (WebhookOutcome, error) {
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

// contradicts reports whether a payment.failed disagrees with what payd
// recorded for attempt a. A failure for an attempt recorded failed is a
// repeat; one for any other is asked of the provider before it releases
// anything: a false failure would free the order for a second charge.
func (s *Webhooks) contradicts(a domain.Attempt) bool {
	return a.Status != domain.AttemptFailed
}

// askProvider returns the provider's record of attempt a's charge, or the
// outcome of an event that record leaves nothing to apply for: no charge
// under that key (the event is wrong, or the charge is still in flight and
// its own path settles it), a charge still pending, or a charge whose
// status agrees with payd's books. An unreachable provider is an error, so
// the event is delivered again.
func (s *Webhooks) askProvider(ctx context.Context, a domain.Attempt) (domain.Charge, WebhookOutcome, error) {
	truth, err := s.Provider.GetCharge(ctx, a)
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

// failedCharge is the failed charge a payment.failed describes. A failure
// is applied on the event's word only when it agrees with payd's books
// (contradicts); it moves no money.
func failedCharge(a domain.Attempt, ev domain.ProviderEvent) domain.Charge {
	return domain.Charge{ID: ev.ChargeID, IdempotencyKey: a.ID, OrderID: ev.OrderID, Amount: ev.Amount, Currency: ev.Currency,
		Status: domain.ChargeFailed, FailureCode: ev.FailureCode}
}

// disputed records a customer's dispute of a payment for an operator: the
// bank has taken the money back provisionally, and only a person can
// answer it (with evidence, at the provider) or accept it. payd moves no
// order on it (ADR 0019). The dispute's ID is the reference, so a
// redelivery records nothing new.
func (s *Webhooks) disputed(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
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
func (s *Webhooks) discrepancy(ctx context.Context, disc domain.Discrepancy, ev domain.ProviderEvent) (WebhookOutcome, error) {
	disc = withProviderAmount(disc, ev.AmountText, ev.Currency)
	if disc.Reference == "" {
		disc.Reference = ev.IdempotencyKey
	}
	return s.record(ctx, disc)
}

// record stores a discrepancy an event revealed, once.
func (s *Webhooks) record(ctx context.Context, disc domain.Discrepancy) (WebhookOutcome, error) {
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

func (s *Webhooks) observe(eventType string, outcome WebhookOutcome) {
	observing(s.Observer).WebhookApplied(eventType, outcome)
}
