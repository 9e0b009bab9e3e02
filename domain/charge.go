package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// DefaultProviderTimeout bounds one call to the provider unless configured
// otherwise. Past it the outcome is unknown and the caller must ask again.
const DefaultProviderTimeout = 10 * time.Second

// ChargeStatus is where a charge stands at the provider.
type ChargeStatus string

// The statuses of a charge (and of a refund) at the provider.
const (
	ChargePending   ChargeStatus = "pending"   // accepted, outcome will come by webhook (async methods)
	ChargeSucceeded ChargeStatus = "succeeded" // money moved
	ChargeFailed    ChargeStatus = "failed"    // definitively declined; nothing moved
	// ChargeAuthorized is a manual-capture charge the provider approved:
	// the money is held on the buyer's card and nothing is charged until a
	// capture (Charge.CaptureBefore bounds it).
	ChargeAuthorized ChargeStatus = "authorized"
	// ChargeVoided is a hold given up before any of it was captured:
	// voided on request, or lapsed at the provider (FailureCode
	// HoldLapsed). Nothing was charged.
	ChargeVoided ChargeStatus = "voided"
)

// CaptureMethod is how a successful charge takes the money: at once
// (automatic), or held until the merchant captures it (manual).
type CaptureMethod string

// The capture methods.
const (
	CaptureAutomatic CaptureMethod = "automatic"
	CaptureManual    CaptureMethod = "manual"
)

// Valid reports whether m is a capture method; the zero value is not.
func (m CaptureMethod) Valid() bool { return m == CaptureAutomatic || m == CaptureManual }

// HoldLapsed is the failure code of a voided charge whose hold ran past
// its CaptureBefore at the provider: nobody voided it, it lapsed.
const HoldLapsed = "authorization_expired"

// The provider's refusals of a capture or a void (ProviderRequestError
// codes): each means nothing happened, and the request cannot succeed as
// sent.
const (
	// CaptureTooLarge: more than the charge holds.
	CaptureTooLarge = "amount_too_large"
	// ChargeAlreadyCaptured: the hold was captured already (by another
	// key), so it can be neither captured again nor voided.
	ChargeAlreadyCaptured = "charge_already_captured"
	// ChargeAlreadyVoided: the hold was voided, or lapsed (then the code
	// is HoldLapsed).
	ChargeAlreadyVoided = "charge_voided"
	// ChargeNotCapturable: the charge holds nothing: it was never a
	// manual one, or it is pending or failed.
	ChargeNotCapturable = "charge_not_capturable"
)

// ChargeRequest asks the provider for one charge. IdempotencyKey is payd's
// attempt ID: the provider charges at most once per key.
type ChargeRequest struct {
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	PaymentMethod  string
	// CaptureMethod is automatic when empty. A manual charge that succeeds
	// is ChargeAuthorized: the provider holds the money until Capture.
	CaptureMethod CaptureMethod
}

// CaptureRequest asks the provider to capture Amount of an authorized
// charge, at most once per IdempotencyKey: one capture per hold, and the
// rest of the hold is released.
type CaptureRequest struct {
	IdempotencyKey string
	ChargeID       string
	Amount         decimal.Decimal
	Currency       string
}

// VoidRequest asks the provider to give up an authorized charge's hold,
// at most once per IdempotencyKey.
type VoidRequest struct {
	IdempotencyKey string
	ChargeID       string
}

// Charge is the provider's record of a charge, in payd's terms.
type Charge struct {
	ID             string
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	PaymentMethod  string
	Status         ChargeStatus
	FailureCode    string // card_declined, insufficient_funds, ... when Status is failed
	RefundedAmount decimal.Decimal
	// DisputedAmount is what disputes of the charge withdrew and have not
	// given back (open or lost).
	DisputedAmount decimal.Decimal
	CreatedAt      time.Time
	// CaptureMethod is how the charge takes its money (automatic when the
	// provider does not say).
	CaptureMethod CaptureMethod
	// AmountCaptured is the money the charge took: Amount for an
	// automatic charge that succeeded, what its capture took for a manual
	// one (at most Amount), zero while held, voided or failed.
	AmountCaptured decimal.Decimal
	// CaptureBefore is when an authorized charge's hold lapses; zero for
	// any other charge.
	CaptureBefore time.Time
	// Action, on a pending charge, is what the customer must do before the
	// provider can decide (3-D Secure); nil when nothing is asked of them.
	Action *CustomerAction
}

// Captured reports whether the charge took money: it succeeded, at once
// or by its capture.
func (c Charge) Captured() bool { return c.Status == ChargeSucceeded }

// ChargePage is one page of the provider's charges created in a window.
// Next, when not empty, is where the next page starts: the provider's
// cursor, to be handed back as is; "" after the last page.
type ChargePage struct {
	Charges []Charge
	Next    string
}

// CustomerAction is a step the customer's browser must complete for a
// pending payment, such as Stripe's 3-D Secure challenge (ADR 0019). It is
// part of the pay answer only; the provider's webhook settles the payment.
type CustomerAction struct {
	// Type is the provider's name for the step (Stripe: use_stripe_sdk,
	// redirect_to_url).
	Type string
	// ClientSecret lets the customer's browser complete the step with the
	// provider's script (Stripe.js handleNextAction); it is meant for that
	// browser and no one else.
	ClientSecret string
	// RedirectURL, when set, is where the browser completes the step.
	RedirectURL string
}

// ProviderRefundRequest asks the provider to give back part or all of a
// charge, at most once per IdempotencyKey.
type ProviderRefundRequest struct {
	IdempotencyKey string
	ChargeID       string
	Amount         decimal.Decimal
	Currency       string
	Reason         string
}

// ProviderRefund is the provider's record of a refund (payd's own record
// of it is a Refund).
type ProviderRefund struct {
	ID             string
	IdempotencyKey string
	ChargeID       string
	// OrderID is the order of the refunded charge, when the provider
	// reports it.
	OrderID   string
	Amount    decimal.Decimal
	Currency  string
	Status    ChargeStatus
	CreatedAt time.Time
}

// Settlement is a provider's settlement file, checked whole: the succeeded
// refunds it names one by one, and its succeeded charges (each with the
// file's refunds of it added up in RefundedAmount), handed out a page at a
// time, for reconciliation.
type Settlement struct {
	// Charges hands out the file's succeeded charges in the file's order;
	// nil when it lists none. Every line was checked before the Settlement
	// was made, so a run never starts from a file it would refuse halfway;
	// the charges themselves are read again from the file page by page,
	// never held whole (ADR 0066).
	Charges ChargePages
	// Refunds are the succeeded refunds the file names by the provider's
	// refund id; nil when the file does not name refunds that way.
	Refunds []ProviderRefund
}

// ChargePages hands out a list of charges a page at a time, in order: it
// calls yield with each page and stops at the first error, yield's or its
// own, which it returns. A page is yield's only until yield returns (its
// array may be reused for the next page). A ChargePages may be walked more
// than once; each walk starts again from the first page.
type ChargePages func(yield func(page []Charge) error) error
