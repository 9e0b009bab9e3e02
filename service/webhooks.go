package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// ProviderEvent is a verified webhook from the provider, in payd's terms.
type ProviderEvent struct {
	ID      string
	Type    string
	Payload []byte // the verified body, stored as received
	Data    EventData
}

// EventData is what an event says about a charge or refund.
type EventData struct {
	ChargeID       string
	RefundID       string
	IdempotencyKey string // for payments our attempt ID; for refunds the refund's provider key
	OrderID        string
	Amount         string
	Currency       string
	FailureCode    string
}

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
	Observe       func(eventType, outcome string) // optional metrics hook
	// ObserveDiscrepancy is an optional metrics hook: told of each
	// discrepancy an event newly records.
	ObserveDiscrepancy func(domain.DiscrepancyType)
}

// Webhook outcomes, stored on the inbox row and reported to the provider.
const (
	OutcomeApplied     = "applied"
	OutcomeDuplicate   = "duplicate"
	OutcomeIgnored     = "ignored"
	OutcomeDiscrepancy = "discrepancy"
)

// Receive stores the event once and applies it. A redelivery of an event
// already applied changes nothing; one whose first delivery died before it
// was applied is applied now (applying is idempotent).
func (s *Webhooks) Receive(ctx context.Context, ev ProviderEvent) (string, error) {
	stored, isNew, err := s.Inbox.Receive(ctx, domain.WebhookEvent{
		ID: ev.ID, Type: ev.Type, OrderID: ev.Data.OrderID, AttemptID: ev.Data.IdempotencyKey,
		ChargeID: ev.Data.ChargeID, Payload: ev.Payload, ReceivedAt: s.Now().UTC(),
	})
	if err != nil {
		return "", fmt.Errorf("store event %s: %w", ev.ID, err)
	}
	if !isNew && stored.ProcessedAt != nil {
		s.observe(ev.Type, OutcomeDuplicate)
		return OutcomeDuplicate, nil
	}
	outcome, err := s.apply(ctx, ev)
	if err != nil {
		return "", err
	}
	if err := s.Inbox.MarkProcessed(ctx, ev.ID, outcome, s.Now().UTC()); err != nil {
		return "", fmt.Errorf("mark event %s processed: %w", ev.ID, err)
	}
	s.observe(ev.Type, outcome)
	return outcome, nil
}

func (s *Webhooks) apply(ctx context.Context, ev ProviderEvent) (string, error) {
	switch ev.Type {
	case domain.EventPaymentSucceeded, domain.EventPaymentFailed:
		return s.applyPayment(ctx, ev)
	case domain.EventRefundSucceeded:
		return s.Refunds.Confirmed(ctx, ev.Data.IdempotencyKey, ev.Data.RefundID)
	}
	return OutcomeIgnored, nil
}

// applyPayment settles the attempt the event names. A charge payd never
// made, or one whose amount differs from the attempt's, is never applied:
// it is recorded as a discrepancy for an operator.
func (s *Webhooks) applyPayment(ctx context.Context, ev ProviderEvent) (string, error) {
	d := ev.Data
	a, err := s.Attempts.FindByID(ctx, d.IdempotencyKey)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		if ev.Type == domain.EventPaymentFailed {
			return OutcomeIgnored, nil // nothing moved, nothing to do
		}
		return s.discrepancy(ctx, domain.Discrepancy{Type: domain.MissingLocalPayment, Reference: d.ChargeID, OrderID: d.OrderID,
			ChargeID: d.ChargeID, Note: "payment.succeeded for a charge payd has no attempt for"}, d)
	}
	if err != nil {
		return "", err
	}
	if !sameMoney(a, d) {
		return s.discrepancy(ctx, domain.Discrepancy{Type: domain.AmountMismatch, Reference: d.ChargeID, OrderID: a.OrderID,
			AttemptID: a.ID, ChargeID: d.ChargeID, LocalAmount: a.Amount, Currency: a.Currency, Note: "webhook amount or currency differs from the attempt; not applied"}, d)
	}
	o, err := s.Orders.FindByID(ctx, a.OrderID)
	if err != nil {
		return "", err
	}
	ch := provider.Charge{ID: d.ChargeID, IdempotencyKey: a.ID, Status: provider.ChargeSucceeded}
	if ev.Type == domain.EventPaymentFailed {
		ch.Status, ch.FailureCode = provider.ChargeFailed, d.FailureCode
	}
	if _, err := s.Checkout.Settle(ctx, o, a, ch); err != nil && !errors.Is(err, domain.ErrPaymentDeclined) {
		return "", err
	}
	return OutcomeApplied, nil
}

// sameMoney reports whether the event's amount and currency are the attempt's.
func sameMoney(a domain.Attempt, d EventData) bool {
	amount, err := decimal.NewFromString(d.Amount)
	return err == nil && d.Currency == string(a.Currency) && amount.Equal(a.Amount)
}

func (s *Webhooks) discrepancy(ctx context.Context, disc domain.Discrepancy, d EventData) (string, error) {
	disc = withProviderAmount(disc, d.Amount, d.Currency)
	if disc.Reference == "" {
		disc.Reference = d.IdempotencyKey
	}
	_, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(disc, s.Now))
	if err != nil {
		return "", fmt.Errorf("record %s: %w", disc.Type, err)
	}
	if isNew && s.ObserveDiscrepancy != nil {
		s.ObserveDiscrepancy(disc.Type)
	}
	return OutcomeDiscrepancy, nil
}

// newDiscrepancy fills the bookkeeping fields of a freshly found discrepancy.
func newDiscrepancy(d domain.Discrepancy, now func() time.Time) domain.Discrepancy {
	d.ID, d.Status, d.DetectedAt = newID(), domain.DiscrepancyOpen, now().UTC()
	return d
}

func (s *Webhooks) observe(eventType, outcome string) {
	if s.Observe != nil {
		s.Observe(eventType, outcome)
	}
}
