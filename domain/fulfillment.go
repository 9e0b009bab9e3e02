package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// FulfillmentStatus is how much of a paid order the merchant has shipped:
// a second machine on the order, in a column of its own beside its status
// (docs/adr/0060-holds-captures-and-shipments.md). The zero value is
// invalid.
type FulfillmentStatus string

// The statuses of an order's fulfilment.
const (
	FulfillmentUnfulfilled      FulfillmentStatus = "unfulfilled"       // nothing shipped yet
	FulfillmentPartiallyShipped FulfillmentStatus = "partially_shipped" // some units shipped, some not
	FulfillmentShipped          FulfillmentStatus = "shipped"           // every unit of every shippable line shipped
)

// FulfillmentStatuses lists every fulfilment status.
var FulfillmentStatuses = []FulfillmentStatus{FulfillmentUnfulfilled, FulfillmentPartiallyShipped, FulfillmentShipped}

// FulfillmentEvent is a shipment, as the fulfilment machine sees it.
type FulfillmentEvent string

// The events of the fulfilment machine.
const (
	FulfillmentShipPart FulfillmentEvent = "ship_part" // a shipment that leaves units to ship
	FulfillmentShipAll  FulfillmentEvent = "ship_all"  // the shipment that ships the last units
)

// FulfillmentMachine is the fulfilment machine: an order is created
// unfulfilled, and each shipment moves it by one guarded statement. A
// shipped order takes no more shipments: it has nothing left to ship.
var FulfillmentMachine = newMachine("fulfillment", FulfillmentStatuses, []FulfillmentStatus{FulfillmentUnfulfilled},
	step[FulfillmentStatus, FulfillmentEvent]{FulfillmentShipPart, []FulfillmentStatus{FulfillmentUnfulfilled, FulfillmentPartiallyShipped}, FulfillmentPartiallyShipped},
	step[FulfillmentStatus, FulfillmentEvent]{FulfillmentShipAll, []FulfillmentStatus{FulfillmentUnfulfilled, FulfillmentPartiallyShipped}, FulfillmentShipped},
)

// Valid reports whether s is a fulfilment status.
func (s FulfillmentStatus) Valid() bool { return FulfillmentMachine.Valid(s) }

// ErrOrderNotPaid: only a paid order ships (an order refunded in full, one
// not paid yet, or one whose money is only held is 409 order_not_paid).
var ErrOrderNotPaid = errors.New("order is not paid")

// Limits of a shipment's body.
const (
	// MaxShipmentLines bounds a shipment's lines, as DefaultLimits bounds
	// an order's.
	MaxShipmentLines = 100
	// MaxShipmentText bounds carrier and tracking_number, in characters.
	MaxShipmentText = 200
	// maxLineSKU is the longest SKU an order line may carry: a catalogue
	// line's is ValidSKU's, and a merchant's custom line may carry one of
	// its own (any text, or none), which is never shipped.
	maxLineSKU = 64
	// MaxShipQuantity bounds a shipment line's units, as MaxStock bounds a
	// product's: no order line holds more, and no sum of a shipment's
	// lines comes near overflowing.
	MaxShipQuantity = MaxStock
)

// ShipLine is quantity units of the order's lines with SKU.
type ShipLine struct {
	SKU      string
	Quantity int64
}

// NewShipment is what the merchant asks to ship of one order.
type NewShipment struct {
	Items          []ShipLine
	Carrier        string
	TrackingNumber string
}

// Shipment is one parcel of an order, as it was shipped. It never changes.
type Shipment struct {
	ID             string
	OrderID        string
	Items          []ShipLine
	Carrier        string
	TrackingNumber string
	CreatedAt      time.Time
	// RequestKey and RequestFingerprint are the idempotency key the
	// shipment was asked under and its request's fingerprint (empty
	// without a key): a request that runs again after its answer was lost
	// finds its shipment by them instead of shipping again. Never shown.
	RequestKey, RequestFingerprint string
}

// Check refuses a shipment no order could take: no lines, too many, a
// SKU no line could have, a quantity under 1, a carrier or tracking
// number too long. It trims the texts. Every bad field is named.
func (n *NewShipment) Check() error {
	var invalid ValidationErrors
	switch {
	case len(n.Items) == 0:
		invalid = append(invalid, &ValidationError{Field: "items", Reason: "must list at least one line to ship"})
	case len(n.Items) > MaxShipmentLines:
		invalid = append(invalid, &ValidationError{Field: "items", Reason: fmt.Sprintf("must list at most %d lines", MaxShipmentLines)})
	}
	for i, l := range n.Items {
		if len(n.Items) > MaxShipmentLines {
			break
		}
		if l.SKU == "" || len(l.SKU) > maxLineSKU || !utf8.ValidString(l.SKU) {
			invalid = append(invalid, &ValidationError{Field: fmt.Sprintf("items[%d].sku", i), Reason: "must be the SKU of a line of the order"})
		}
		if l.Quantity < 1 || l.Quantity > MaxShipQuantity {
			invalid = append(invalid, &ValidationError{Field: fmt.Sprintf("items[%d].quantity", i), Reason: fmt.Sprintf("must be a whole number from 1 to %d", MaxShipQuantity)})
		}
	}
	for _, f := range []struct {
		name string
		text *string
	}{{"carrier", &n.Carrier}, {"tracking_number", &n.TrackingNumber}} {
		*f.text = strings.TrimSpace(*f.text)
		switch {
		case !utf8.ValidString(*f.text):
			invalid = append(invalid, &ValidationError{Field: f.name, Reason: "must be UTF-8 text"})
		case utf8.RuneCountInString(*f.text) > MaxShipmentText:
			invalid = append(invalid, &ValidationError{Field: f.name, Reason: fmt.Sprintf("must be at most %d characters", MaxShipmentText)})
		}
	}
	return invalid.Err()
}

// Units is how many units the shipment's lines ask for, in all.
func (n NewShipment) Units() int64 {
	var sum int64
	for _, l := range n.Items {
		sum += l.Quantity
	}
	return sum
}

// LineShipment is what a shipment ships of one order line: the line's
// position in the order, and how many of its units.
type LineShipment struct {
	Position int
	Quantity int64
}

// PlanShipment decides what shipment n ships of o, whose items carry what
// earlier shipments shipped: for each SKU, its units go to o's lines with
// that SKU in the order's order, each line up to its quantity. It returns
// the lines' shares and the fulfilment event the shipment is.
//
// Only a paid order ships (ErrOrderNotPaid). A SKU none of o's lines has,
// or more units of a SKU than its lines have left to ship (counting every
// earlier shipment), is a *ValidationError naming the shipment's line,
// and nothing ships. A line without a SKU (a merchant's custom line: a
// fee, a service) is not a good: it is never shipped, and an order whose
// other lines are all shipped is shipped.
func (o Order) PlanShipment(n NewShipment) ([]LineShipment, FulfillmentEvent, error) {
	if o.Status != StatusPaid {
		return nil, "", ErrOrderNotPaid
	}
	left := make(map[string]int64) // units still to ship, per SKU
	for _, it := range o.Items {
		if it.SKU != "" {
			left[it.SKU] += it.Quantity - it.Shipped
		}
	}
	asked := make(map[string]int64) // units the shipment asks, per SKU, so far
	var invalid ValidationErrors
	for i, l := range n.Items {
		have, ok := left[l.SKU]
		switch {
		case !ok:
			invalid = append(invalid, &ValidationError{Field: fmt.Sprintf("items[%d].sku", i), Reason: "the order has no line with this SKU"})
		case l.Quantity > have-asked[l.SKU]: // never a sum that could overflow
			invalid = append(invalid, &ValidationError{Field: fmt.Sprintf("items[%d].quantity", i),
				Reason: fmt.Sprintf("is more than is left to ship of %s (%d, counting every shipment of the order)", l.SKU, have)})
		default:
			asked[l.SKU] += l.Quantity
		}
	}
	if err := invalid.Err(); err != nil {
		return nil, "", err
	}
	var plan []LineShipment
	done := true
	for pos, it := range o.Items {
		if it.SKU == "" {
			continue
		}
		share := min(asked[it.SKU], it.Quantity-it.Shipped)
		if share > 0 {
			plan = append(plan, LineShipment{Position: pos, Quantity: share})
			asked[it.SKU] -= share
		}
		if it.Shipped+share < it.Quantity {
			done = false
		}
	}
	if done {
		return plan, FulfillmentShipAll, nil
	}
	return plan, FulfillmentShipPart, nil
}
