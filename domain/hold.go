package domain

import (
	"errors"
	"time"

	"github.com/shopspring/decimal"
)

// A manual-capture order's pay only authorizes: the provider holds the
// money (StatusAuthorized) until one of three ends the hold, each a
// HoldAction that claims the order first (Order.HoldAction, one guarded
// UPDATE), asks the provider under its own idempotency key, and settles
// the order by the event its kind names. ADR 0060.

// ErrHoldActionNotFound means payd has no such hold action.
var ErrHoldActionNotFound = errors.New("hold action not found")

// The refusals of a capture (409 each).
var (
	// ErrOrderNotCapturable: the order holds no money to capture: it is
	// not authorized, was captured already, or another capture or a
	// cancel is ending its hold right now.
	ErrOrderNotCapturable = errors.New("order is not capturable")
	// ErrAuthorizationExpired: the hold ran past capture_before: it can no
	// longer be captured, and it is voided.
	ErrAuthorizationExpired = errors.New("authorization expired")
	// ErrCaptureTooLarge: more than the order holds.
	ErrCaptureTooLarge = errors.New("capture exceeds the authorized amount")
)

// DefaultAuthorizationTTL is how long a hold lasts unless configured
// (PAYD_AUTHORIZATION_TTL): seven days, as card networks allow for most.
const DefaultAuthorizationTTL = 7 * 24 * time.Hour

// HoldActionKind is what a HoldAction does to an authorized order's hold.
type HoldActionKind string

// The kinds of hold action.
const (
	HoldCapture HoldActionKind = "capture" // the merchant captures (some of) the hold: the order is paid
	HoldVoid    HoldActionKind = "void"    // a cancel voids the hold: the order is cancelled, its stock back
	HoldLapse   HoldActionKind = "lapse"   // the hold ran past capture_before: the job voids it, the order expires
)

// HoldActionKinds lists every kind.
var HoldActionKinds = []HoldActionKind{HoldCapture, HoldVoid, HoldLapse}

// Event is the order event that settles an action of kind k once the
// provider confirmed it.
func (k HoldActionKind) Event() Event {
	switch k {
	case HoldCapture:
		return EventCapture
	case HoldVoid:
		return EventVoid
	case HoldLapse:
		return EventLapse
	}
	return ""
}

// HoldActionStatus is where a hold action stands with the provider.
type HoldActionStatus string

// The statuses of a hold action: the attempt's, for a capture or a void.
const (
	HoldActionStarted   HoldActionStatus = "started"   // recorded with the claim, before the provider is asked
	HoldActionSucceeded HoldActionStatus = "succeeded" // the provider captured or voided the hold
	HoldActionFailed    HoldActionStatus = "failed"    // the provider refused: nothing happened to the hold
	HoldActionUnknown   HoldActionStatus = "unknown"   // the reply was lost: ask (send the same key) before anything else
)

// HoldActionStatuses lists every status.
var HoldActionStatuses = []HoldActionStatus{HoldActionStarted, HoldActionSucceeded, HoldActionFailed, HoldActionUnknown}

// HoldActionEvent is something that settles a hold action.
type HoldActionEvent string

// The events of the hold action machine.
const (
	HoldReplyLost HoldActionEvent = "reply_lost" // the provider's reply did not arrive
	HoldDone      HoldActionEvent = "done"       // the provider captured or voided the hold
	HoldRefused   HoldActionEvent = "refused"    // the provider refused the action: nothing happened
)

// HoldActionEvents lists every event.
var HoldActionEvents = []HoldActionEvent{HoldReplyLost, HoldDone, HoldRefused}

// HoldActionMachine is the hold action's machine: settled once, by the
// request, its retry, or the job that takes abandoned actions over.
var HoldActionMachine = newMachine("hold action", HoldActionStatuses, []HoldActionStatus{HoldActionStarted},
	step[HoldActionStatus, HoldActionEvent]{HoldReplyLost, []HoldActionStatus{HoldActionStarted}, HoldActionUnknown},
	step[HoldActionStatus, HoldActionEvent]{HoldDone, []HoldActionStatus{HoldActionStarted, HoldActionUnknown}, HoldActionSucceeded},
	step[HoldActionStatus, HoldActionEvent]{HoldRefused, []HoldActionStatus{HoldActionStarted, HoldActionUnknown}, HoldActionFailed},
)

// Valid reports whether s is one of HoldActionStatuses.
func (s HoldActionStatus) Valid() bool { return HoldActionMachine.Valid(s) }

// Unsettled reports whether the provider may still have to be asked about
// an action in status s.
func (s HoldActionStatus) Unsettled() bool {
	_, ok := HoldActionMachine.Next(s, HoldDone)
	return ok
}

// HoldAction is one capture, void or lapse of an authorized order's hold.
// Its ID is the provider's idempotency key: asking again under it never
// captures or voids twice.
type HoldAction struct {
	ID      string
	OrderID string
	Kind    HoldActionKind
	// Amount is what a capture asks for (the order's amount when the
	// merchant named none); zero for a void or a lapse.
	Amount   decimal.Decimal
	Currency Currency
	// RequestID is the idempotency key of the request that made it, ""
	// for the job's lapse.
	RequestID   string
	Status      HoldActionStatus
	FailureCode string
	// LeasedUntil is when the lease of whoever works on the unsettled
	// action ends: until then nobody else asks the provider about it.
	LeasedUntil time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// HoldClaimable reports whether an action of kind k may claim o at now:
// o is authorized and no other action holds it, and a capture comes
// before capture_before (a void or a lapse may come after: the provider
// may have lapsed the hold already, and saying so settles it).
func (o Order) HoldClaimable(k HoldActionKind, now time.Time) bool {
	if o.Status != StatusAuthorized || o.HoldAction != "" {
		return false
	}
	return k != HoldCapture || (o.CaptureBefore != nil && o.CaptureBefore.After(now))
}

// Captured is the money the order's charge took: what a manual order's
// capture took, the whole amount of an order a charge paid whole (an
// automatic one; a manual one a provider charged in full, which captured
// nothing), zero while authorized or never paid.
func (o Order) Captured() decimal.Decimal {
	switch {
	case o.CaptureMethod == CaptureManual && o.CapturedAmount.IsPositive():
		return o.CapturedAmount
	case o.Status.WasPaid():
		return o.Amount
	}
	return decimal.Zero
}
