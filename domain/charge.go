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
	// ChargeAuthorized is a manual-capture charge whose money is held and
	// not yet moved (Stripe: requires_capture). A capture makes it
	// succeeded; a void, or the hold lapsing at CaptureBefore, makes it
	// voided. An automatic charge never has it.
	ChargeAuthorized ChargeStatus = "authorized"
	// ChargeVoided is a hold released without moving money: voided on
	// request, or lapsed at the provider (VoidReason says which). It is
	// final. An automatic charge never has it.
	ChargeVoided ChargeStatus = "voided"
)

// CaptureManual is ChargeRequest.CaptureMethod for a charge that only
// holds the money until a Capture (or a Void, or the hold lapsing). The
// empty CaptureMethod is automatic: the charge moves the money at once.
const CaptureManual = "manual"

// The reasons a hold was voided (Charge.VoidReason).
const (
	VoidRequested = "requested" // a Void asked for it
	VoidLapsed    = "lapsed"    // not captured by CaptureBefore: the provider released it
)

// ChargeRequest asks the provider for one charge. IdempotencyKey is payd's
// attempt ID: the provider charges at most once per key.
type ChargeRequest struct {
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	PaymentMethod  string
	// CaptureMethod is "" (automatic: the wire is as it always was) or
	// CaptureManual: a charge that succeeds is then only authorized.
	CaptureMethod string
}

// CaptureRequest asks the provider to capture a held (authorized) charge,
// at most once per IdempotencyKey. A zero Amount captures the whole hold;
// a smaller one captures that much and releases the rest.
type CaptureRequest struct {
	IdempotencyKey string
	ChargeID       string
	Amount         decimal.Decimal
	Currency       string
}

// VoidRequest asks the provider to release a held (authorized) charge
// without moving money, at most once per IdempotencyKey.
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
	// CaptureMethod is "" for an automatic charge and CaptureManual for a
	// hold. Captured, AmountCaptured, CaptureBefore and VoidReason speak of
	// holds only: they stay zero on an automatic charge, whose money moved
	// as it succeeded (see Settled).
	CaptureMethod string
	// Captured reports that a hold was captured (its Status is succeeded).
	Captured bool
	// AmountCaptured is what the capture moved; the rest of the hold was
	// released.
	AmountCaptured decimal.Decimal
	// CaptureBefore is when the hold lapses unless captured.
	CaptureBefore time.Time
	// VoidReason, on a voided hold, is VoidRequested or VoidLapsed.
	VoidReason string
	// Action, on a pending charge, is what the customer must do before the
	// provider can decide (3-D Secure); nil when nothing is asked of them.
	Action *CustomerAction
}

// Settled is the money the charge moved to the merchant: the amount of a
// succeeded automatic charge, what a captured hold captured, and zero
// for anything else (pending, failed, authorized, voided).
func (c Charge) Settled() decimal.Decimal {
	switch {
	case c.Status != ChargeSucceeded:
		return decimal.Zero
	case c.CaptureMethod == CaptureManual:
		return c.AmountCaptured
	}
	return c.Amount
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

// Settlement is what a provider's settlement file lists: its succeeded
// charges (each with the file's refunds of it added up in RefundedAmount)
// and the succeeded refunds it names one by one, for reconciliation.
type Settlement struct {
	Charges []Charge
	Refunds []ProviderRefund
}
