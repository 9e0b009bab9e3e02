package domain

import (
	"fmt"
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
	// RefundReversed: the provider took back a refund it had confirmed
	// (succeeded, then failed). payd's books follow it at once (a
	// reversing ledger entry, the order's refunded amount given back);
	// the discrepancy tells an operator, who may refund again.
	RefundReversed DiscrepancyType = "refund_reversed"
	// OrderBooksRepaired: an order's confirmed refunds or status
	// disagreed with its ledger and were repaired from it (ADR 0055).
	OrderBooksRepaired DiscrepancyType = "order_books_repaired"
	// DisputeExceedsRemaining: a dispute opened for more than the charge
	// still held after its refunds.
	DisputeExceedsRemaining DiscrepancyType = "dispute_exceeds_remaining"
)

// DiscrepancyTypes lists every type.
var DiscrepancyTypes = []DiscrepancyType{MissingLocalPayment, MissingProviderCharge, AmountMismatch, DuplicateCharge, StuckProcessing, PaidAfterClose, Disputed,
	RefundMissingLocally, RefundMissingAtProvider, RefundAmountMismatch, UnconfirmedPayment, RefundReversed, OrderBooksRepaired, DisputeExceedsRemaining}

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

// The actions an operator may choose to resolve a discrepancy.
const (
	ActionApply  = "apply"  // make payd's books follow the provider's
	ActionRefund = "refund" // give the provider's charge back
	ActionIgnore = "ignore" // accept the difference, with a note
)

// ResolutionActions lists every action, in the order problems name them.
var ResolutionActions = []string{ActionApply, ActionRefund, ActionIgnore}

// resolutionFit says which discrepancies one action fits: their types,
// and what the action needs the discrepancy to name.
type resolutionFit struct {
	types        []DiscrepancyType
	needsAttempt bool // apply settles the attempt the charge belongs to
	needsCharge  bool // refund gives back the provider charge it names
}

// resolutionFits is the one table of which action fits which discrepancy.
// The resolver refuses an action the table does not fit, and a refusal
// names the actions it does fit, so the two can never disagree. An action
// the table fits may still be refused once the provider is asked (the
// charge pays another order, nothing is left to refund, ...).
//   - apply fits a stuck payment (asked again), a missing local payment and
//     a held amount_mismatch — each about an attempt of payd's;
//   - refund fits a charge the provider holds, but not a refund, a
//     dispute, a payment still settling or a charge the provider does not
//     have (none is a charge to give back);
//   - ignore fits everything.
var resolutionFits = map[string]resolutionFit{
	ActionApply: {types: []DiscrepancyType{MissingLocalPayment, AmountMismatch, StuckProcessing}, needsAttempt: true},
	ActionRefund: {types: []DiscrepancyType{MissingLocalPayment, AmountMismatch, DuplicateCharge, PaidAfterClose, UnconfirmedPayment},
		needsCharge: true},
	ActionIgnore: {types: DiscrepancyTypes},
}

// Fits reports whether action fits d by the table, whatever d's status.
func (d Discrepancy) Fits(action string) bool {
	fit, ok := resolutionFits[action]
	if !ok || fit.needsAttempt && d.AttemptID == "" || fit.needsCharge && d.ChargeID == "" {
		return false
	}
	for _, t := range fit.types {
		if t == d.Type {
			return true
		}
	}
	return false
}

// ResolutionAutoRefunded is the resolution payd records itself when it
// refunded a charge an order could not take as soon as it found it; no
// operator chooses it, but asking to refund such a discrepancy agrees
// with it.
const ResolutionAutoRefunded = "auto_refunded"

// Admit is the one decision of whether action may resolve d as it stands:
// the resolver asks it before anything is claimed or asked, and Actions
// lists what it admits, so what a discrepancy offers and what resolving it
// accepts cannot drift apart. done is true when d is resolved with action
// already (resolving again answers it as done); a refusal is an
// *UnfitError naming the actions that may still resolve d. An admitted
// action may still be refused once the provider is asked (the charge pays
// another order, nothing is left to refund).
func (d Discrepancy) Admit(action string) (done bool, err error) {
	done, refusal := d.admit(action)
	if refusal != nil {
		return false, Unfit(d, action, refusal)
	}
	return done, nil
}

func (d Discrepancy) admit(action string) (done bool, refusal error) {
	switch {
	case d.Status == DiscrepancyResolved:
		if d.Resolution == action || d.Resolution == ResolutionAutoRefunded && action == ActionRefund {
			return true, nil
		}
		return false, ErrAlreadyResolved
	case d.Status == DiscrepancyResolving && d.Resolution != action:
		// Another operator's action is being carried out.
		return false, ErrAlreadyResolved
	case !d.Fits(action):
		return false, fmt.Errorf("%w: %s does not fit a %s discrepancy", ErrResolutionNotApplicable, action, d.Type)
	}
	return false, nil
}

// Actions lists the actions that may resolve d now, those Admit lets be
// carried out: every one that fits it while it is open; while it is being
// resolved, the action it was claimed for (a repeat finishes it); none
// once resolved (the action it was resolved with answers as done, any
// other is refused). It is never nil, so a refusal can say "none" as an
// empty list.
func (d Discrepancy) Actions() []string {
	out := []string{}
	for _, a := range ResolutionActions {
		if done, refusal := d.admit(a); refusal == nil && !done {
			out = append(out, a)
		}
	}
	return out
}

// UnfitError is a refused resolution (ErrResolutionNotApplicable or
// ErrAlreadyResolved, which it wraps) with the actions that may still
// resolve the discrepancy: the problem an operator gets names them.
type UnfitError struct {
	Err     error
	Actions []string // never nil; empty when no action fits
}

func (e *UnfitError) Error() string { return e.Err.Error() }

// Unwrap makes errors.Is find the refusal it wraps.
func (e *UnfitError) Unwrap() error { return e.Err }

// Unfit wraps refusal of action on d with the actions that may still
// resolve d: those d.Actions lists, but action itself, which was just
// refused.
func Unfit(d Discrepancy, action string, refusal error) *UnfitError {
	out := []string{}
	for _, a := range d.Actions() {
		if a != action {
			out = append(out, a)
		}
	}
	return &UnfitError{Err: refusal, Actions: out}
}
