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
}
