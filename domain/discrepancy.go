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

// DiscrepancyStatus is where a discrepancy stands. The zero value is
// invalid.
type DiscrepancyStatus string

// The statuses of a discrepancy.
const (
	DiscrepancyOpen      DiscrepancyStatus = "open"      // found, waiting for an operator (or payd) to resolve it
	DiscrepancyResolving DiscrepancyStatus = "resolving" // an operator's action is being carried out
	DiscrepancyResolved  DiscrepancyStatus = "resolved"  // settled; Resolution says how
)

// DiscrepancyStatuses lists every discrepancy status.
var DiscrepancyStatuses = []DiscrepancyStatus{DiscrepancyOpen, DiscrepancyResolving, DiscrepancyResolved}

// Valid reports whether s is a known discrepancy status.
func (s DiscrepancyStatus) Valid() bool { return DiscrepancyMachine.Valid(s) }

// DiscrepancyEvent is something that happens to a discrepancy.
type DiscrepancyEvent string

// The events of the discrepancy machine; the comment names the store
// transition that performs each.
const (
	DiscrepancyEventResolve DiscrepancyEvent = "resolve" // Resolve: resolved at once, in one step
	DiscrepancyEventClaim   DiscrepancyEvent = "claim"   // Claim: taken for one operator's action
	DiscrepancyEventSettle  DiscrepancyEvent = "settle"  // Settle: the claimed action was carried out
	DiscrepancyEventUnclaim DiscrepancyEvent = "unclaim" // Unclaim: the claimed action could not be carried out
)

// DiscrepancyMachine is the whole discrepancy machine. A discrepancy is
// recorded open, or resolved at once when payd settled it as it found it
// (a refund recorded as found). An operator's action claims it first
// (resolving), so two operators choosing different actions cannot both
// act, and then settles it or gives it back. The repository builds each
// guarded UPDATE from its entry.
var DiscrepancyMachine = newMachine("discrepancy", DiscrepancyStatuses, []DiscrepancyStatus{DiscrepancyOpen, DiscrepancyResolved},
	step[DiscrepancyStatus, DiscrepancyEvent]{DiscrepancyEventResolve, []DiscrepancyStatus{DiscrepancyOpen}, DiscrepancyResolved},
	step[DiscrepancyStatus, DiscrepancyEvent]{DiscrepancyEventClaim, []DiscrepancyStatus{DiscrepancyOpen}, DiscrepancyResolving},
	step[DiscrepancyStatus, DiscrepancyEvent]{DiscrepancyEventSettle, []DiscrepancyStatus{DiscrepancyResolving}, DiscrepancyResolved},
	step[DiscrepancyStatus, DiscrepancyEvent]{DiscrepancyEventUnclaim, []DiscrepancyStatus{DiscrepancyResolving}, DiscrepancyOpen},
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
	Status         DiscrepancyStatus
	Resolution     string // apply, refund, ignore, auto_refunded
	Note           string
	DetectedAt     time.Time
	ResolvedAt     *time.Time
}
