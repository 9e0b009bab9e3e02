package domain

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"
)

// ErrChargeNotFound means the provider has no charge (or refund) under the
// key payd asked about.
var ErrChargeNotFound = errors.New("provider: not found")

// ErrProviderUnavailable means the outcome of a call to the provider is
// unknown: a timeout, a connection error or a 5xx. The caller must ask
// (GetCharge) before acting.
var ErrProviderUnavailable = errors.New("provider: outcome unknown")

// ErrProviderUnreachable marks an ErrProviderUnavailable whose cause is the
// connection to the provider itself: it could not be made, or was refused
// or reset. The provider adapters mark it (provider.MarkUnreachable); a
// request that meets it is answered 503 with Retry-After, as one that
// meets ErrUnavailable.
var ErrProviderUnreachable = errors.New("provider: unreachable")

// ProviderRequestError is the provider refusing a request it understood (a
// 4xx): nothing happened, and sending it again unchanged will not help. Code
// is the provider's machine code, e.g. idempotency_key_reused or
// refund_exceeds_charge.
type ProviderRequestError struct {
	StatusCode int
	Code       string
	Message    string
}

// Error describes the refusal; it carries no payment data.
func (e *ProviderRequestError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("provider refused the request: status %d", e.StatusCode)
	}
	return fmt.Sprintf("provider refused the request: status %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// IsProviderRequestError reports whether err carries a provider refusal
// with the given code (any code when code is empty).
func IsProviderRequestError(err error, code string) bool {
	var re *ProviderRequestError
	return errors.As(err, &re) && (code == "" || re.Code == code)
}

// ProviderEventType names a provider webhook event.
type ProviderEventType string

// The provider's event types payd applies. Any other type is stored and ignored.
const (
	EventPaymentSucceeded ProviderEventType = "payment.succeeded"
	EventPaymentFailed    ProviderEventType = "payment.failed"
	EventRefundSucceeded  ProviderEventType = "refund.succeeded"
	// EventRefundFailed: a refund payd asked for failed or was cancelled
	// after the provider first answered it pending (Stripe's refund.failed,
	// or refund.updated with status failed or canceled).
	EventRefundFailed ProviderEventType = "refund.failed"
	// EventDisputeCreated: the customer disputed a payment with their
	// bank (Stripe's charge.dispute.created). payd moves no money on it:
	// it is recorded as a discrepancy for an operator (ADR 0019).
	EventDisputeCreated ProviderEventType = "dispute.created"
	// EventDisputeClosed: the dispute was decided, won or lost
	// (DisputeStatus); Stripe's charge.dispute.closed.
	EventDisputeClosed ProviderEventType = "dispute.closed"
	// EventDisputeFundsWithdrawn: the bank took the disputed money
	// (Stripe's charge.dispute.funds_withdrawn); payd records it as the
	// dispute's opening, once.
	EventDisputeFundsWithdrawn ProviderEventType = "dispute.funds_withdrawn"
	// EventDisputeFundsReinstated: the disputed money came back (Stripe's
	// charge.dispute.funds_reinstated); payd records it as the dispute won.
	EventDisputeFundsReinstated ProviderEventType = "dispute.funds_reinstated"
	// EventDisputeUpdated: the dispute changed (evidence, reason) without
	// moving money (Stripe's charge.dispute.updated).
	EventDisputeUpdated ProviderEventType = "dispute.updated"
)

// The events of a manual-capture charge (a hold): authorized, then
// captured or voided (on request, or lapsed). payment.authorized is a
// hint payd applies by asking the provider (Webhooks); the capture's and
// the void's answer payd's own requests, whose actions settle by asking
// again under their keys: payd knows them, and ignores them.
const (
	EventPaymentAuthorized ProviderEventType = "payment.authorized"
	EventPaymentCaptured   ProviderEventType = "payment.captured"
	EventPaymentVoided     ProviderEventType = "payment.voided"
)

// ProviderEventTypes lists the event types payd applies.
var ProviderEventTypes = []ProviderEventType{EventPaymentSucceeded, EventPaymentFailed, EventPaymentAuthorized, EventPaymentCaptured, EventPaymentVoided,
	EventRefundSucceeded, EventRefundFailed,
	EventDisputeCreated, EventDisputeClosed, EventDisputeFundsWithdrawn, EventDisputeFundsReinstated, EventDisputeUpdated}

// ErrInvalidSignature means a webhook's signature is missing, wrong or too
// old: nothing in it may be believed.
var ErrInvalidSignature = errors.New("provider: invalid webhook signature")

// Known reports whether payd applies events of type t. Unknown types are
// still valid events: they are stored and ignored, not refused.
func (t ProviderEventType) Known() bool { return slices.Contains(ProviderEventTypes, t) }

// Dispute reports whether t is about a dispute.
func (t ProviderEventType) Dispute() bool {
	switch t {
	case EventDisputeCreated, EventDisputeClosed, EventDisputeFundsWithdrawn, EventDisputeFundsReinstated, EventDisputeUpdated:
		return true
	}
	return false
}

// ProviderEvent is a provider webhook in payd's terms. ID is the payload's
// own id, if it has one. It is not the dedupe key: in Standard Webhooks that
// is the webhook-id header (the message id), which every redelivery of one
// message carries and which the receiver stores once; the payload's id may
// differ from it or be absent.
//
// For payment events ChargeID, IdempotencyKey (the charge's: payd's attempt
// ID), OrderID, AmountText, Amount, Currency, Status and FailureCode are
// set. For refund.succeeded RefundID, ChargeID, IdempotencyKey (the
// refund's), OrderID, AmountText, Amount and Currency are set. An event of
// an unknown type carries whatever references its data names, for the
// record.
//
// A signed event is the provider's word: one of a known type whose data
// payd cannot fully read is still a ProviderEvent, recorded rather than
// refused. Its amount may be missing or unreadable (AmountReadable is
// false, AmountText holds what was written), its RefundID may be empty,
// and a status payd does not know is ignored, since the type says the
// outcome.
type ProviderEvent struct {
	// ID is the payload's own id, if any (not the dedupe key).
	ID string
	// Type names the event; only Known types are applied.
	Type ProviderEventType
	// CreatedAt is when the provider says it happened; zero if unreadable.
	CreatedAt time.Time
	// ChargeID is the provider's charge.
	ChargeID string
	// RefundID is the provider's refund (refund.succeeded); it may be empty.
	RefundID string
	// IdempotencyKey is the key the charge or refund was made under.
	IdempotencyKey string
	// OrderID is the order the charge was made for.
	OrderID string
	// AmountText is the amount exactly as the provider wrote it: quoted as
	// such in what payd records, never normalised ("12.300" stays).
	AmountText string
	// Amount is AmountText read as a decimal when AmountReadable, zero
	// otherwise.
	Amount decimal.Decimal
	// Currency is the provider's currency code, as written.
	Currency string
	// Status is the outcome the type says (payment.failed: failed; any
	// other known type: succeeded); empty for an unknown type.
	Status ChargeStatus
	// FailureCode is the provider's reason for a failed payment.
	FailureCode string
	// DisputeID is the provider's dispute (dispute events).
	DisputeID string
	// DisputeStatus is the dispute's status as the event reports it:
	// open, or won or lost for dispute.closed; empty when unknown.
	DisputeStatus DisputeStatus
	// Reason is the dispute's reason as the provider names it (fraudulent,
	// product_not_received, ...).
	Reason string
}

// AmountReadable reports whether the event's amount, as written
// (AmountText), is a decimal. An event whose amount is missing or
// unreadable is never applied as money: payd records it for an operator.
func (e ProviderEvent) AmountReadable() bool {
	_, err := decimal.NewFromString(e.AmountText)
	return err == nil
}

// SettlementError says which line and which field of a provider settlement
// file is wrong, and why. Its text is safe to show to the operator who
// uploaded it.
type SettlementError struct {
	Line   int    // 1 is the header
	Field  string // a column name; empty for the line as a whole
	Reason string
}

// Error names the line (and field) and the reason.
func (e *SettlementError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Reason)
}
