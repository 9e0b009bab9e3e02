package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// DiscrepancyType names a way payd's books and the provider's disagree.
type DiscrepancyType string

// The discrepancy types of docs/guarantees.md#reconciliation-and-books.
const (
	MissingLocalPayment   DiscrepancyType = "missing_local_payment"   // provider succeeded, order not paid
	MissingProviderCharge DiscrepancyType = "missing_provider_charge" // order paid, provider has no success
	AmountMismatch        DiscrepancyType = "amount_mismatch"         // provider and payd disagree on the amount or currency
	DuplicateCharge       DiscrepancyType = "duplicate_charge"        // a second success for an order already paid
	StuckProcessing       DiscrepancyType = "stuck_processing"        // unknown outcome older than the lease
	PaidAfterClose        DiscrepancyType = "paid_after_close"        // success for a cancelled or expired order
	Disputed              DiscrepancyType = "disputed"                // the customer disputed a payment with their bank (ADR 0019)
	// RefundMissingLocally: the provider gave money back that payd never
	// asked for. It is recorded at once as an outside refund; the
	// discrepancy is kept as the trace of how payd learned of it.
	RefundMissingLocally DiscrepancyType = "refund_missing_locally"
	// RefundMissingAtProvider: payd holds a succeeded refund the provider
	// does not have.
	RefundMissingAtProvider DiscrepancyType = "refund_missing_at_provider"
	// RefundAmountMismatch: payd and the provider disagree on a refund's
	// amount or currency.
	RefundAmountMismatch DiscrepancyType = "refund_amount_mismatch"
	// UnconfirmedPayment: a signed success the provider does not confirm
	// (no such charge, not succeeded, or other money); never applied, the
	// event is kept (ADR 0031).
	UnconfirmedPayment DiscrepancyType = "unconfirmed_payment"
)

// DiscrepancyTypes lists every type.
var DiscrepancyTypes = []DiscrepancyType{MissingLocalPayment, MissingProviderCharge, AmountMismatch, DuplicateCharge, StuckProcessing, PaidAfterClose, Disputed,
	RefundMissingLocally, RefundMissingAtProvider, RefundAmountMismatch, UnconfirmedPayment}

// Valid reports whether t is a known type.
func (t DiscrepancyType) Valid() bool {
	for _, k := range DiscrepancyTypes {
		if t == k {
			return true
		}
	}
	return false
}

// Discrepancy statuses.
const (
	DiscrepancyOpen      = "open"
	DiscrepancyResolving = "resolving" // an operator's action is being carried out
	DiscrepancyResolved  = "resolved"
)

// Discrepancy is one disagreement, found by a webhook or a reconciliation
// run. (Type, Reference) is unique: finding it again records nothing new.
type Discrepancy struct {
	ID             string
	RunID          string // the run that found it; empty when a webhook did
	Type           DiscrepancyType
	Reference      string // what it is about: the charge ID, or the order ID when there is no charge
	OrderID        string
	AttemptID      string
	ChargeID       string
	ProviderAmount decimal.Decimal
	LocalAmount    decimal.Decimal
	Currency       Currency
	Status         string // open, resolving or resolved
	Resolution     string // apply, refund, ignore, auto_refunded
	Note           string
	DetectedAt     time.Time
	ResolvedAt     *time.Time
}

// ValidDiscrepancyStatus reports whether s is a discrepancy status.
func ValidDiscrepancyStatus(s string) bool {
	return s == DiscrepancyOpen || s == DiscrepancyResolving || s == DiscrepancyResolved
}
