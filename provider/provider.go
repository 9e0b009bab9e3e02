// Package provider is payd's anti-corruption layer towards the payment
// provider: the Provider interface in payd's own terms, an HTTP client for
// the provider API, and (in the top-level sandbox package) a card-processor stand-in that
// speaks that API. No wire or SDK type escapes this package.
package provider

import (
	"context"
	"errors"
	"time"

	"github.com/shopspring/decimal"
)

// ChargeStatus is the provider's view of one charge.
type ChargeStatus string

// The statuses of a charge at the provider.
const (
	ChargePending   ChargeStatus = "pending"   // accepted, outcome will come by webhook (async methods)
	ChargeSucceeded ChargeStatus = "succeeded" // money moved
	ChargeFailed    ChargeStatus = "failed"    // definitively declined; nothing moved
)

// ErrNotFound means the provider has no charge (or refund) under that key.
var ErrNotFound = errors.New("provider: not found")

// ErrUnavailable means the outcome of the call is unknown: a timeout, a
// connection error or a 5xx. The caller must ask (GetCharge) before acting.
var ErrUnavailable = errors.New("provider: outcome unknown")

// ChargeRequest asks for one charge. IdempotencyKey is payd's attempt ID: the
// provider charges at most once per key.
type ChargeRequest struct {
	IdempotencyKey string
	OrderID        string
	Amount         decimal.Decimal
	Currency       string
	PaymentMethod  string
}

// Charge is the provider's record of a charge.
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
	CreatedAt      time.Time
}

// RefundRequest asks to give back part or all of a charge.
type RefundRequest struct {
	IdempotencyKey string
	ChargeID       string
	Amount         decimal.Decimal
	Currency       string
	Reason         string
}

// Refund is the provider's record of a refund.
type Refund struct {
	ID             string
	IdempotencyKey string
	ChargeID       string
	Amount         decimal.Decimal
	Currency       string
	Status         ChargeStatus
	CreatedAt      time.Time
}

// Provider is what payd needs from a payment provider. Every mutating call
// carries an idempotency key the provider honours.
type Provider interface {
	// Charge creates (or, for a key seen before, returns) a charge. A
	// definitive decline is returned as a Charge with Status failed and a nil
	// error; ErrUnavailable means the outcome is unknown.
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	// GetCharge looks a charge up by the idempotency key it was created with.
	GetCharge(ctx context.Context, idempotencyKey string) (Charge, error)
	// Refund gives back req.Amount of a succeeded charge.
	Refund(ctx context.Context, req RefundRequest) (Refund, error)
	// ListCharges returns every charge created in [from, to).
	ListCharges(ctx context.Context, from, to time.Time) ([]Charge, error)
}
