package domain

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers match with errors.Is. The handler package maps each
// to an HTTP status and a stable problem code, in one table.
var (
	ErrOrderNotFound      = errors.New("order not found")
	ErrCustomerNotFound   = errors.New("customer not found")
	ErrAttemptNotFound    = errors.New("payment attempt not found")
	ErrRecordNotFound     = errors.New("idempotency record not found")
	ErrEmailTaken         = errors.New("email already registered")
	ErrOrderExists        = errors.New("an order was already created under this request ID")
	ErrInvalidTransition  = errors.New("invalid order transition")
	ErrOrderAlreadyPaid   = errors.New("order already paid")
	ErrPaymentInProgress  = errors.New("order payment in progress")
	ErrOrderNotPayable    = errors.New("order is not payable")
	ErrOrderNotCancelable = errors.New("order can no longer be cancelled")
	ErrPaymentDeclined    = errors.New("card declined")
	ErrOutcomeUnknown     = errors.New("payment outcome unknown")
	ErrUnauthorized       = errors.New("unauthorized")
	ErrForbidden          = errors.New("forbidden")

	ErrKeyMissing = errors.New("idempotency key missing")
	ErrKeyInvalid = errors.New("idempotency key invalid")
	ErrKeyInUse   = errors.New("idempotency key in use")
	ErrKeyReused  = errors.New("idempotency key reused with another request")

	// ErrUnavailable says the database cannot serve this request right
	// now: it is unreachable, shutting down or not part of its cluster, or
	// a write kept conflicting with concurrent ones after every retry. The
	// caller answers 503 with Retry-After: sending the same request again
	// (same idempotency key) is safe.
	ErrUnavailable = errors.New("database unavailable")
)

// ValidationError says which input field is wrong and why. Its text is safe
// to show to the caller.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Reason)
}

// ValidationErrors is every invalid field of one request, so the caller can
// correct them all at once. errors.As finds a *ValidationError in it (the
// first), as it does for a single one.
type ValidationErrors []*ValidationError

// Error joins the fields' messages: a readable summary.
func (es ValidationErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap exposes each field's error to errors.Is and errors.As.
func (es ValidationErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Add collects err: the validation errors it holds are kept, and anything
// else (an error that is not about the input) is returned for the caller
// to stop on.
func (es *ValidationErrors) Add(err error) error {
	var list ValidationErrors
	var one *ValidationError
	switch {
	case err == nil:
	case errors.As(err, &list):
		*es = append(*es, list...)
	case errors.As(err, &one):
		*es = append(*es, one)
	default:
		return err
	}
	return nil
}

// Err is nil when nothing was collected, the one *ValidationError when
// there is one, and the list otherwise.
func (es ValidationErrors) Err() error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return es
}

// NotCharged is the failure code of a payment the provider says it charged
// nothing for without declining it: a processor fault it recorded under the
// key, or no charge under the key where none can come any more (Stripe past
// its replay window). Never a look-up's "not found" alone (ADR 54): nothing
// was charged and the customer may simply pay again.
const NotCharged = "not_charged"

// DeclineError is a definitive refusal from the provider, with its reason
// code (card_declined, insufficient_funds, ...). It matches ErrPaymentDeclined.
type DeclineError struct {
	Code string
}

func (e *DeclineError) Error() string { return "payment declined: " + e.Code }

// Is lets errors.Is(err, ErrPaymentDeclined) match every decline.
func (e *DeclineError) Is(target error) bool { return target == ErrPaymentDeclined }

// Errors of the operator side.
var (
	ErrDiscrepancyNotFound = errors.New("discrepancy not found")
	ErrRunNotFound         = errors.New("reconciliation run not found")
	ErrWindowNotFound      = errors.New("reconcile window not found")
	ErrRefundNotFound      = errors.New("refund not found")
	ErrRefundExists        = errors.New("refund already exists")
	ErrRefundTooLarge      = errors.New("refund exceeds what remains refundable")
	ErrOrderNotRefundable  = errors.New("order is not paid")
	ErrAlreadyResolved     = errors.New("discrepancy already resolved")
)

// ErrAmountMismatch means the provider reported a charge for another amount
// or currency than payd asked for: it is not applied, and an operator
// settles the money (ADR 0010).
var ErrAmountMismatch = errors.New("payment amount or currency mismatch")

// ErrRefundRefused means the provider definitively refused a refund.
var ErrRefundRefused = errors.New("refund refused by the provider")

// ErrResolutionNotApplicable means a resolve action does not fit the
// discrepancy (e.g. apply to a missing provider charge).
var ErrResolutionNotApplicable = errors.New("resolution not applicable to this discrepancy")

// Errors of paying an order that the provider or the clock rule out.
var (
	// ErrOrderExpired is an order past its expires_at: not payable, whether
	// or not the expiry job has marked it expired yet. It matches
	// ErrOrderNotPayable.
	ErrOrderExpired = fmt.Errorf("%w: it has expired", ErrOrderNotPayable)
	// ErrPaymentMethodInvalid is the provider refusing a payment method it
	// does not know: nothing was charged and the caller's input is at fault.
	ErrPaymentMethodInvalid = errors.New("payment method invalid")
)

// Errors of the catalogue (docs/adr/0058-the-merchant-key-and-the-catalogue.md).
var (
	ErrProductNotFound   = errors.New("product not found")
	ErrSKUTaken          = errors.New("a product with this SKU already exists")
	ErrInsufficientStock = errors.New("stock may not go below 0")
	// ErrStockUnlimited is an adjustment of a product whose stock is not
	// counted (null): there is no number to adjust.
	ErrStockUnlimited = errors.New("the product's stock is unlimited")
	// ErrOutOfStock is an order line beyond what is left of its product's
	// stock: the order is not created and nothing is taken. It comes as an
	// *OutOfStockError naming the SKU.
	ErrOutOfStock = errors.New("out of stock")
)

// OutOfStockError is the line of an order its product's stock could not
// take; it matches ErrOutOfStock.
type OutOfStockError struct{ SKU string }

func (e *OutOfStockError) Error() string { return "out of stock: " + e.SKU }

// Is makes an OutOfStockError match ErrOutOfStock.
func (e *OutOfStockError) Is(target error) bool { return target == ErrOutOfStock }
