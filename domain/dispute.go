package domain

import (
	"errors"
	"slices"
	"time"

	"github.com/shopspring/decimal"
)

// DisputeStatus is where a customer's dispute of a charge stands. The zero
// value is invalid.
type DisputeStatus string

// The statuses of a dispute.
const (
	DisputeOpen DisputeStatus = "open" // the bank took the money back while it decides
	DisputeWon  DisputeStatus = "won"  // decided for the merchant: the money came back
	DisputeLost DisputeStatus = "lost" // decided for the customer: the money is gone
)

// DisputeStatuses lists every status.
var DisputeStatuses = []DisputeStatus{DisputeOpen, DisputeWon, DisputeLost}

// Valid reports whether s is a known status.
func (s DisputeStatus) Valid() bool { return slices.Contains(DisputeStatuses, s) }

// DisputeEvent is something that happens to a dispute.
type DisputeEvent string

// The events of the dispute machine.
const (
	DisputeEventWin  DisputeEvent = "win"
	DisputeEventLose DisputeEvent = "lose"
)

// DisputeEvents lists every event.
var DisputeEvents = []DisputeEvent{DisputeEventWin, DisputeEventLose}

// DisputeMachine is the whole dispute machine: a dispute is opened
// (inserted open) once, and closes once, won or lost. The repository builds
// each guarded UPDATE from its entry.
var DisputeMachine = newMachine("dispute", DisputeStatuses, []DisputeStatus{DisputeOpen},
	step[DisputeStatus, DisputeEvent]{DisputeEventWin, []DisputeStatus{DisputeOpen}, DisputeWon},
	step[DisputeStatus, DisputeEvent]{DisputeEventLose, []DisputeStatus{DisputeOpen}, DisputeLost},
)

// From returns the statuses e may leave from.
func (e DisputeEvent) From() []DisputeStatus { return DisputeMachine.From(e) }

// To returns the status e leads to (the zero status for an unknown event).
func (e DisputeEvent) To() DisputeStatus { return DisputeMachine.To(e) }

// Ledger is the ledger kind of the step e records.
func (e DisputeEvent) Ledger() LedgerKind {
	if e == DisputeEventWin {
		return LedgerDisputeWon
	}
	return LedgerDisputeLost
}

// CloseEvent returns the event that closes a dispute as to.
func CloseEvent(to DisputeStatus) (DisputeEvent, bool) {
	for _, e := range DisputeMachine.Events() {
		if DisputeMachine.To(e) == to {
			return e, true
		}
	}
	return "", false
}

// NextDispute returns the status e leads to from s, or ErrInvalidTransition.
func NextDispute(s DisputeStatus, e DisputeEvent) (DisputeStatus, error) {
	to, ok := DisputeMachine.Next(s, e)
	if !ok {
		return "", ErrInvalidTransition
	}
	return to, nil
}

// Dispute is a customer's dispute of one charge with their bank, as payd
// keeps it. ProviderDisputeID is unique: a dispute is opened once however
// often the provider reports it.
type Dispute struct {
	ID                string
	ProviderDisputeID string
	OrderID           string
	ChargeID          string
	Status            DisputeStatus
	Amount            decimal.Decimal
	Currency          Currency
	Reason            string
	OpenedAt          time.Time
	ClosedAt          *time.Time
	// EvidenceDueBy is when the provider wants the merchant's evidence;
	// nil while it has named no date.
	EvidenceDueBy *time.Time
	UpdatedAt     time.Time
}

// ProviderDispute is the provider's record of a dispute, in payd's terms.
type ProviderDispute struct {
	ID       string
	ChargeID string
	// IdempotencyKey is the disputed charge's key (payd's attempt ID), when
	// the provider reports it.
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	Status         DisputeStatus
	Reason         string
	CreatedAt      time.Time
	ClosedAt       time.Time // zero while open
	// EvidenceDueBy is when the provider wants the merchant's evidence
	// (Stripe's evidence_details.due_by); zero when it names no date.
	EvidenceDueBy time.Time
}

// ErrDisputeNotFound means there is no dispute under that ID: payd keeps
// none, or, from a provider lookup, the provider has none.
var ErrDisputeNotFound = errors.New("dispute not found")

// ErrChargeDisputed refuses a refund of a charge under an open dispute:
// the bank already took the money back, and a refund would give it twice.
var ErrChargeDisputed = errors.New("the charge is under an open dispute")

// ErrChargeDisputeLost refuses a refund of a charge whose dispute was
// lost: the bank gave the disputed money to the customer for good, so
// there is nothing of it to refund. It is an ErrChargeDisputed (the same
// refusal: errors.Is finds both) with its own wording.
var ErrChargeDisputeLost error = disputeLost{}

type disputeLost struct{}

func (disputeLost) Error() string {
	return "the charge's dispute was lost: the disputed money is gone"
}

// Is makes a lost dispute's refusal an ErrChargeDisputed too.
func (disputeLost) Is(target error) bool { return target == ErrChargeDisputed }

// ChargeOwnerError refuses an operator's action on a charge that the
// provider says pays another order than the one the action is about.
type ChargeOwnerError struct {
	ChargeID string
	OrderID  string // the order the provider says the charge pays
}

func (e *ChargeOwnerError) Error() string {
	return "charge " + e.ChargeID + " belongs to order " + e.OrderID
}
