package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// AttemptStatus is where one execution of a pay request stands with the provider.
type AttemptStatus string

// The statuses of a payment attempt.
const (
	AttemptStarted   AttemptStatus = "started"   // recorded before the provider is called
	AttemptSucceeded AttemptStatus = "succeeded" // the provider charged the card
	AttemptFailed    AttemptStatus = "failed"    // the provider definitively charged nothing
	AttemptUnknown   AttemptStatus = "unknown"   // the reply was lost: ask the provider before anything else
	// AttemptHeld: the provider reported the charge succeeded for another
	// amount or currency than the attempt's. Never applied; the order stays
	// claimed and the money waits for an operator (ADR 0010).
	AttemptHeld AttemptStatus = "held"
)

// Final reports whether the attempt's outcome is settled.
func (s AttemptStatus) Final() bool { return s == AttemptSucceeded || s == AttemptFailed }

// Attempt is one execution of a pay request against the provider. Its ID is
// the provider's idempotency key, so asking the provider "what happened to
// this attempt?" is always possible and charging twice under it is not.
type Attempt struct {
	ID               string
	OrderID          string
	RequestID        string
	Status           AttemptStatus
	PaymentMethod    string
	ProviderChargeID string
	FailureCode      string
	Amount           decimal.Decimal
	Currency         Currency
	CreatedAt        time.Time
	UpdatedAt        time.Time
	// LeasedUntil is when the lease of whoever works on the unsettled
	// attempt ends (zero: nobody holds it). The request that claims the
	// order holds it from the claim, so nobody else asks the provider about
	// a charge it may still be sending.
	LeasedUntil time.Time
	// InFlightUntil is until when the last charge request sent under the
	// attempt's key may still reach the provider: its deadline plus a margin
	// (zero: not recorded). Until then the provider's "not found" does not
	// prove that nothing was charged.
	InFlightUntil time.Time
	// CaptureMethod is what the attempt asked the provider for (its
	// order's): asking again about it repeats that very request.
	CaptureMethod CaptureMethod
}

// AttemptStatuses lists every attempt status, for table tests and documentation.
var AttemptStatuses = []AttemptStatus{AttemptStarted, AttemptSucceeded, AttemptFailed, AttemptUnknown, AttemptHeld}

// AttemptEvent is something that settles an attempt, or changes how it is
// settled.
type AttemptEvent string

// The events of the attempt state machine; the comment names the store
// transition that performs each.
const (
	AttemptReplyLost   AttemptEvent = "reply_lost"   // MarkUnknown: the provider's reply did not arrive
	AttemptCharged     AttemptEvent = "charged"      // Succeed: the provider charged the attempt's money
	AttemptNotCharged  AttemptEvent = "not_charged"  // Fail: the provider definitively charged nothing
	AttemptMismatched  AttemptEvent = "mismatched"   // Hold: the provider charged other money than the attempt's
	AttemptChargedLate AttemptEvent = "charged_late" // Adopt: the provider charged after all what payd took as failed or held
	AttemptApplied     AttemptEvent = "applied"      // Apply: an operator applies a charge payd never saw succeed
	AttemptRejected    AttemptEvent = "rejected"     // Reject: an operator refunded a held charge
)

// AttemptEvents lists every attempt event, for table tests and documentation.
var AttemptEvents = []AttemptEvent{AttemptReplyLost, AttemptCharged, AttemptNotCharged, AttemptMismatched,
	AttemptChargedLate, AttemptApplied, AttemptRejected}

// AttemptMachine is the whole attempt state machine: for each event, the
// statuses it may leave from and the one it leads to. The repository
// builds each guarded UPDATE from its entry, so the reply, the webhook, the
// recoverer and an operator racing on one attempt settle it once. An
// attempt is recorded started, before the provider is called.
var AttemptMachine = newMachine("attempt", AttemptStatuses, []AttemptStatus{AttemptStarted},
	step[AttemptStatus, AttemptEvent]{AttemptReplyLost, []AttemptStatus{AttemptStarted}, AttemptUnknown},
	step[AttemptStatus, AttemptEvent]{AttemptCharged, []AttemptStatus{AttemptStarted, AttemptUnknown}, AttemptSucceeded},
	step[AttemptStatus, AttemptEvent]{AttemptNotCharged, []AttemptStatus{AttemptStarted, AttemptUnknown}, AttemptFailed},
	step[AttemptStatus, AttemptEvent]{AttemptMismatched, []AttemptStatus{AttemptStarted, AttemptUnknown}, AttemptHeld},
	step[AttemptStatus, AttemptEvent]{AttemptChargedLate, []AttemptStatus{AttemptFailed, AttemptHeld}, AttemptSucceeded},
	step[AttemptStatus, AttemptEvent]{AttemptApplied, []AttemptStatus{AttemptStarted, AttemptUnknown, AttemptFailed}, AttemptSucceeded},
	step[AttemptStatus, AttemptEvent]{AttemptRejected, []AttemptStatus{AttemptHeld}, AttemptFailed},
)

// Unsettled reports whether an attempt in status s may still be settled by
// the provider's word: the statuses a charge's outcome is written over
// (AttemptCharged's, AttemptNotCharged's). Only its lease holder may judge it.
func (s AttemptStatus) Unsettled() bool { _, ok := AttemptMachine.Next(s, AttemptCharged); return ok }

// UnsettledStatuses lists the statuses Unsettled accepts: the recoverer's work.
func UnsettledStatuses() []AttemptStatus { return AttemptCharged.From() }

// From returns the statuses e may leave from (none for an unknown event).
func (e AttemptEvent) From() []AttemptStatus { return AttemptMachine.From(e) }

// To returns the status e leads to (the zero status for an unknown event).
func (e AttemptEvent) To() AttemptStatus { return AttemptMachine.To(e) }

// NextAttempt returns the status event leads to from status from, and
// whether the attempt state machine allows it.
func NextAttempt(from AttemptStatus, event AttemptEvent) (AttemptStatus, bool) {
	return AttemptMachine.Next(from, event)
}

// SucceededWith reports whether the attempt is recorded as succeeded with
// the provider's charge chargeID.
func (a Attempt) SucceededWith(chargeID string) bool {
	return a.Status == AttemptSucceeded && a.ProviderChargeID == chargeID
}
