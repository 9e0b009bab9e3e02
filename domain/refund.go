package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// RefundStatus is where a refund stands with the provider.
type RefundStatus string

// The statuses of a refund.
const (
	RefundPending   RefundStatus = "pending"   // reserved on the order, provider asked (or about to be)
	RefundSucceeded RefundStatus = "succeeded" // the provider gave the money back
	RefundFailed    RefundStatus = "failed"    // the provider refused; the reservation was released
)

// RefundStatuses lists every refund status.
var RefundStatuses = []RefundStatus{RefundPending, RefundSucceeded, RefundFailed}

// Valid reports whether s is a known refund status.
func (s RefundStatus) Valid() bool { return RefundMachine.Valid(s) }

// RefundEvent is something that happens to a refund.
type RefundEvent string

// The events of the refund machine; the comment names the store
// transition that performs each.
const (
	RefundEventSucceed  RefundEvent = "succeed"  // Finish: the provider gave the money back
	RefundEventFail     RefundEvent = "fail"     // Finish: the provider refused the refund
	RefundEventIdentify RefundEvent = "identify" // RecordProviderID: the provider named a refund it answered pending
	RefundEventReverse  RefundEvent = "reverse"  // Reverse: the provider took back a refund it had confirmed
)

// RefundMachine is the whole refund machine: a refund is recorded pending
// before the provider is asked, and settles once, succeeded or failed (the
// reply, the webhook and the recoverer race; exactly one settles it, and
// so exactly one releases a failed refund's reservation). The repository
// builds each guarded UPDATE from its entry; Finish performs both
// settlements with one UPDATE, so they share their statuses (a domain test
// holds them to it).
var RefundMachine = newMachine("refund", RefundStatuses, []RefundStatus{RefundPending},
	step[RefundStatus, RefundEvent]{RefundEventSucceed, []RefundStatus{RefundPending}, RefundSucceeded},
	step[RefundStatus, RefundEvent]{RefundEventFail, []RefundStatus{RefundPending}, RefundFailed},
	step[RefundStatus, RefundEvent]{RefundEventIdentify, []RefundStatus{RefundPending}, RefundPending},
	step[RefundStatus, RefundEvent]{RefundEventReverse, []RefundStatus{RefundSucceeded}, RefundFailed},
)

// FinishEvent returns the event that settles a refund as to: succeeded or
// failed, and false for any other status.
func FinishEvent(to RefundStatus) (RefundEvent, bool) {
	switch to {
	case RefundSucceeded:
		return RefundEventSucceed, true
	case RefundFailed:
		return RefundEventFail, true
	}
	return "", false
}

// Refund kinds.
const (
	RefundManual = "manual" // an operator gave back part or all of an order's payment
	RefundAuto   = "auto"   // payd gave back a charge the order could not take (duplicate, after close)
)

// Refund gives money back. ProviderKey is the provider's idempotency key:
// the refund ID for manual refunds, "auto-<charge ID>" for automatic ones,
// so one charge is never refunded automatically twice.
type Refund struct {
	ID        string
	OrderID   string
	ChargeID  string
	RequestID string // the admin request's idempotency key (manual refunds)
	// RequestFingerprint is the fingerprint of the request that created a
	// manual refund under RequestID (ADR 0011); empty when unknown.
	RequestFingerprint string
	Kind               string
	ProviderKey        string
	ProviderRefundID   string
	Amount             decimal.Decimal
	Currency           Currency
	Status             RefundStatus
	Reason             string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Apply returns r as event e leaves it, as the store's guarded UPDATE for
// e leaves its row: the status the refund machine gives, and the
// provider's refund ID when one is given (an empty one keeps the known
// ID). It reports false, with r as it was, where the machine has no such
// move. The time of the change is the store's: UpdatedAt is left alone.
func (r Refund) Apply(e RefundEvent, providerRefundID string) (Refund, bool) {
	to, ok := RefundMachine.Next(r.Status, e)
	if !ok {
		return r, false
	}
	r.Status = to
	if providerRefundID != "" {
		r.ProviderRefundID = providerRefundID
	}
	return r, true
}
