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
