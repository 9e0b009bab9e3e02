package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// OrderStatus is where an order stands in its life. The zero value is invalid.
type OrderStatus string

// The statuses of an order.
const (
	StatusPending    OrderStatus = "pending"    // created, waiting to be paid
	StatusProcessing OrderStatus = "processing" // claimed by one pay request; the provider is being asked
	// StatusAuthorized: a manual-capture order's pay succeeded and the
	// provider holds its money until the merchant captures it (before
	// Order.CaptureBefore); nothing is charged yet.
	StatusAuthorized OrderStatus = "authorized"
	StatusPaid       OrderStatus = "paid"      // the provider confirmed a charge
	StatusRefunded   OrderStatus = "refunded"  // everything paid has been given back
	StatusCancelled  OrderStatus = "cancelled" // the customer gave up before paying
	StatusExpired    OrderStatus = "expired"   // nobody paid within the order TTL
)

// StatusReason is the validation error's reason for a status that is none
// of Statuses: it lists them, so the caller can correct the request.
func StatusReason(s OrderStatus) string {
	names := make([]string, len(Statuses))
	for i, st := range Statuses {
		names[i] = string(st)
	}
	return fmt.Sprintf("%q is not an order status (one of %s)", s, strings.Join(names, ", "))
}

// Valid reports whether s is one of the statuses above.
func (s OrderStatus) Valid() bool { return slices.Contains(Statuses, s) }

// Final reports whether no payment can ever move the order again.
func (s OrderStatus) Final() bool {
	return s == StatusRefunded || s == StatusCancelled || s == StatusExpired
}

// Event is something that happens to an order.
type Event string

// The events of the order state machine.
const (
	EventClaim          Event = "claim"           // a pay request takes the order for itself
	EventSucceed        Event = "succeed"         // the provider confirmed the claimed charge
	EventRelease        Event = "release"         // the provider declined: the customer may try again
	EventCancel         Event = "cancel"          // the customer cancels an unpaid order
	EventExpire         Event = "expire"          // the order TTL ran out
	EventRefundPartial  Event = "refund_partial"  // some, not all, of the payment was given back
	EventRefundFull     Event = "refund_full"     // the rest of the payment was given back
	EventRefundReversed Event = "refund_reversed" // the provider took back a refund it had confirmed (Stripe's succeeded, then failed)
	EventAuthorize      Event = "authorize"       // the provider confirmed the claimed charge of a manual-capture order: its money is held
	EventCapture        Event = "capture"         // the provider confirmed the hold's capture: the order is paid what was captured
	EventVoid           Event = "void"            // the provider confirmed the hold voided, on a cancel
	EventLapse          Event = "lapse"           // the hold ran past capture_before and the provider voided it or says it lapsed
)

// Events lists every event, for table tests and documentation.
var Events = []Event{EventClaim, EventSucceed, EventRelease, EventCancel, EventExpire, EventRefundPartial, EventRefundFull, EventRefundReversed,
	EventAuthorize, EventCapture, EventVoid, EventLapse}

// Statuses lists every status, for table tests and documentation.
var Statuses = []OrderStatus{StatusPending, StatusProcessing, StatusAuthorized, StatusPaid, StatusRefunded, StatusCancelled, StatusExpired}

// OrderMachine is the whole order state machine: for each event, the
// statuses it may leave from and the one it leads to. Anything else is
// ErrInvalidTransition. The repository builds each guarded UPDATE from its
// entry: WHERE status IN (From) ... SET status = To. An order is created
// pending.
var OrderMachine = newMachine("order", Statuses, []OrderStatus{StatusPending},
	step[OrderStatus, Event]{EventClaim, []OrderStatus{StatusPending}, StatusProcessing},
	step[OrderStatus, Event]{EventSucceed, []OrderStatus{StatusProcessing}, StatusPaid},
	step[OrderStatus, Event]{EventRelease, []OrderStatus{StatusProcessing}, StatusPending},
	step[OrderStatus, Event]{EventCancel, []OrderStatus{StatusPending}, StatusCancelled},
	step[OrderStatus, Event]{EventExpire, []OrderStatus{StatusPending}, StatusExpired},
	step[OrderStatus, Event]{EventRefundPartial, []OrderStatus{StatusPaid}, StatusPaid},
	step[OrderStatus, Event]{EventRefundFull, []OrderStatus{StatusPaid}, StatusRefunded},
	step[OrderStatus, Event]{EventRefundReversed, []OrderStatus{StatusPaid, StatusRefunded}, StatusPaid},
	step[OrderStatus, Event]{EventAuthorize, []OrderStatus{StatusProcessing}, StatusAuthorized},
	step[OrderStatus, Event]{EventCapture, []OrderStatus{StatusAuthorized}, StatusPaid},
	step[OrderStatus, Event]{EventVoid, []OrderStatus{StatusAuthorized}, StatusCancelled},
	step[OrderStatus, Event]{EventLapse, []OrderStatus{StatusAuthorized}, StatusExpired},
)

// From returns the statuses e may leave from (none for an unknown event).
func (e Event) From() []OrderStatus { return OrderMachine.From(e) }

// To returns the status e leads to (the zero status for an unknown event).
func (e Event) To() OrderStatus { return OrderMachine.To(e) }

// Next returns the status that event leads to from status from, or
// ErrInvalidTransition.
func Next(from OrderStatus, event Event) (OrderStatus, error) {
	to, ok := OrderMachine.Next(from, event)
	if !ok {
		return "", ErrInvalidTransition
	}
	return to, nil
}

// PaidStatuses are the statuses of an order a charge has paid: paid, or
// refunded since (in part or in full). WasPaid accepts exactly these.
func PaidStatuses() []OrderStatus { return []OrderStatus{StatusPaid, StatusRefunded} }

// WasPaid reports whether a charge has paid an order in status s: it is
// paid, or has been refunded since.
func (s OrderStatus) WasPaid() bool { return s == StatusPaid || s == StatusRefunded }

// Item is one line of an order. UnitPrice is in the order's currency.
type Item struct {
	SKU       string
	Name      string
	Quantity  int64
	UnitPrice decimal.Decimal
	// StockTaken is how many of the line's units its creation took from
	// the product's counted stock (Product.Line): what a cancel or an
	// expiry gives back, once. 0 for a custom line, a product whose stock
	// is unlimited, and every order created before stock was counted.
	StockTaken int64
	// Shipped is how many of the line's units the order's shipments have
	// shipped (Order.PlanShipment): never more than Quantity.
	Shipped int64
}

// Order is what a customer buys and pays for once.
type Order struct {
	ID string
	// CustomerID is the buyer's customer, or "" for a guest's order the
	// merchant created without one (its client secret is its buyer's only
	// credential).
	CustomerID string
	// Creator is who created the order, as its idempotency scope: the
	// customer's (CustomerScope) or the merchant's (ScopeMerchant). A
	// creation key is unique within its creator.
	Creator         string
	Status          OrderStatus
	Amount          decimal.Decimal
	Currency        Currency
	Items           []Item
	PayRequestID    string // the request ID of the pay call that claimed (and maybe paid) the order
	CreateRequestID string // the idempotency key the order was created under, if any
	PaidAt          *time.Time
	RefundedAmount  decimal.Decimal // what the provider confirmed given back (RefundBook.Refunded)
	// RefundPending is what payd's refunds still in flight have reserved
	// (RefundBook.Reserved): not money yet, and never in the status.
	RefundPending decimal.Decimal
	// Fulfillment is how much of the paid order has shipped
	// (FulfillmentMachine); Shipments are its parcels, oldest first, where
	// the reader asked for them.
	Fulfillment FulfillmentStatus
	Shipments   []Shipment
	// CaptureMethod is how a successful pay takes the money: at once
	// (automatic), or held until the merchant captures it (manual: the
	// order is authorized until then).
	CaptureMethod CaptureMethod
	// CaptureBefore is when an authorized order's hold lapses; nil before
	// the order is authorized, and for an automatic order.
	CaptureBefore *time.Time
	// CapturedAmount is what a manual order's capture took (at most
	// Amount); zero until then, and for an automatic order (which takes
	// Amount: Captured says so).
	CapturedAmount decimal.Decimal
	// HoldAction is the capture or void that holds the authorized order's
	// hold (its HoldAction.ID), "" when none does: the claim one request
	// or job makes before it asks the provider, as a pay's claim is.
	HoldAction string
	Version    int64 // 1 when created; every change raises it
	ExpiresAt  time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time

	// CreateFingerprint is the fingerprint of the request that created the
	// order under CreateRequestID (empty for orders stored before it was
	// kept): a repeated creation is answered with this order only if it is
	// the same request.
	CreateFingerprint string

	// Action is set only on the answer to a pay request whose payment
	// waits for the customer (3-D Secure): never stored, it travels with
	// the 202 (and its idempotent replays). ADR 0019.
	Action *CustomerAction
}

// CreatedBy is o's Creator, or, for an order that names none, its
// customer's scope: an order was its customer's before the merchant
// created any.
func (o Order) CreatedBy() string {
	if o.Creator != "" {
		return o.Creator
	}
	return CustomerScope(o.CustomerID)
}

// AnyCustomer, as the customer a request acts for, lets it act on any
// order: the edge has already bound its caller to the order (the order's
// client secret) or its caller is the merchant. Customer IDs are UUIDs,
// so no customer is ever AnyCustomer.
const AnyCustomer = "*"

// VisibleTo reports whether a request acting for customerID may see and
// act on o: o is the customer's, or customerID is AnyCustomer. Any other
// order is ErrOrderNotFound to it, so its existence does not leak.
func (o Order) VisibleTo(customerID string) bool {
	return customerID == AnyCustomer || o.CustomerID == customerID
}

// AnyVersion, given as the version an order must be at for a change, lets
// the change act on whatever version the order is at.
const AnyVersion int64 = 0

// CreatedVersion is an order's version when it is created. Every change
// raises it by one, and only a claim moves an order to processing: an
// order processing at CreatedVersion+1 has had its first claim and
// nothing else.
const CreatedVersion int64 = 1

// Limits bounds what a single order may contain.
type Limits struct {
	MaxAmount   decimal.Decimal // largest total, in major units
	MaxItems    int
	MaxQuantity int64
}

// DefaultLimits are used when nothing else is configured.
var DefaultLimits = Limits{MaxAmount: DefaultMaxAmount, MaxItems: 100, MaxQuantity: 10_000}

// Total computes Σ quantity × unit_price of items, exactly.
func Total(items []Item) decimal.Decimal {
	sum := decimal.Zero
	for _, it := range items {
		sum = sum.Add(it.UnitPrice.Mul(decimal.NewFromInt(it.Quantity)))
	}
	return sum
}

// Refundable is what a new refund may still ask of a paid order: the
// payment less what the provider confirmed and what refunds in flight
// reserved (RefundBook.Refundable).
func (o Order) Refundable() decimal.Decimal {
	if o.Status != StatusPaid {
		return decimal.Zero
	}
	return decimal.Max(o.Captured().Sub(o.RefundedAmount).Sub(o.RefundPending), decimal.Zero)
}

// PayOutcome decides what a pay request with requestID gets when its claim
// affected no row: the order was not pending. The same request ID that
// claimed the order gets its own outcome back (nil error, the order as it
// stands); any other request gets the conflict that explains why it may not pay.
func (o Order) PayOutcome(requestID string) error {
	switch o.Status {
	case StatusPending:
		return nil // released meanwhile: the caller may claim again
	case StatusProcessing:
		if o.PayRequestID == requestID {
			return nil
		}
		return ErrPaymentInProgress
	case StatusAuthorized, StatusPaid, StatusRefunded:
		if o.PayRequestID == requestID {
			return nil
		}
		return ErrOrderAlreadyPaid // a charge holds or took the money
	case StatusExpired:
		return ErrOrderExpired
	default:
		return ErrOrderNotPayable
	}
}

// Expired reports whether the order's time to be paid has run out at now.
func (o Order) Expired(now time.Time) bool { return !o.ExpiresAt.After(now) }

// Claimable reports whether a pay request may claim the order at now: it
// is pending and not expired, which is what the claim's guard asks of the
// row.
func (o Order) Claimable(now time.Time) bool { return o.Status == StatusPending && !o.Expired(now) }

// Apply returns o as event e leaves it at now, the change the store's
// guarded UPDATE for e makes to its row: the status the order machine
// gives, the version raised, UpdatedAt now; a claim records requestID as
// the claiming pay request, a release clears it, a success stamps PaidAt.
// It refuses, with ErrInvalidTransition, what the guard refuses: a status
// e does not leave from, a success or release by another request than the
// claiming one, a claim of an order past its expiry (ErrOrderExpired).
// The refund events and the hold's end (capture, void, lapse) change
// amounts the store computes; Apply refuses them, and the caller reads the
// order back.
func (o Order) Apply(e Event, requestID string, now time.Time) (Order, error) {
	to, err := Next(o.Status, e)
	if err != nil {
		return o, err
	}
	switch e {
	case EventClaim:
		if o.Expired(now) {
			return o, ErrOrderExpired
		}
		o.PayRequestID = requestID
	case EventSucceed:
		if o.PayRequestID != requestID {
			return o, ErrInvalidTransition
		}
		o.PaidAt = &now
	case EventAuthorize:
		// The hold's deadline is the provider's word: the caller sets
		// CaptureBefore.
		if o.PayRequestID != requestID {
			return o, ErrInvalidTransition
		}
	case EventRelease:
		if o.PayRequestID != requestID {
			return o, ErrInvalidTransition
		}
		o.PayRequestID = ""
	case EventRefundPartial, EventRefundFull, EventRefundReversed, EventCapture, EventVoid, EventLapse:
		return o, ErrInvalidTransition
	}
	o.Status, o.UpdatedAt, o.Version = to, now, o.Version+1
	return o, nil
}

// ClaimedBy reports whether attempt a's pay request holds o's claim: o is
// processing for a's request, whose outcome is still being settled.
func (o Order) ClaimedBy(a Attempt) bool {
	return o.Status == StatusProcessing && o.PayRequestID == a.RequestID
}

// PaidBy reports whether attempt a's pay request paid o: a's request
// claimed the order and a charge paid it (WasPaid). Whether a is the
// attempt of that request that succeeded is the attempt's part
// (PaidByAttempt).
func (o Order) PaidBy(a Attempt) bool {
	return o.Status.WasPaid() && o.PayRequestID == a.RequestID
}

// PaidByAttempt reports whether attempt a is what paid o: a succeeded,
// and its pay request paid the order.
func PaidByAttempt(o Order, a Attempt) bool {
	return a.Status == AttemptSucceeded && o.PaidBy(a)
}
