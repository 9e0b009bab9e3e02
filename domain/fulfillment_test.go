package domain

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fields lists the fields err names, or nil.
func fields(t *testing.T, err error) []string {
	t.Helper()
	var list ValidationErrors
	var one *ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		out := make([]string, len(list))
		for i, e := range list {
			out[i] = e.Field
		}
		return out
	case errors.As(err, &one):
		return []string{one.Field}
	}
	t.Fatalf("error %v is not a validation error", err)
	return nil
}

// TestNewShipmentCheck: a shipment no order could take is refused before
// any order is read, every bad field named.
func TestNewShipmentCheck(t *testing.T) {
	line := ShipLine{SKU: "mug", Quantity: 1}
	many := make([]ShipLine, MaxShipmentLines+1)
	for i := range many {
		many[i] = line
	}
	tests := []struct {
		name   string
		n      NewShipment
		fields []string
	}{
		{"one line", NewShipment{Items: []ShipLine{line}}, nil},
		{"carrier and tracking", NewShipment{Items: []ShipLine{line}, Carrier: " DHL ", TrackingNumber: "JD0001"}, nil},
		{"no lines", NewShipment{}, []string{"items"}},
		{"too many lines", NewShipment{Items: many}, []string{"items"}},
		{"empty SKU", NewShipment{Items: []ShipLine{{Quantity: 1}}}, []string{"items[0].sku"}},
		{"65-byte SKU", NewShipment{Items: []ShipLine{{SKU: strings.Repeat("a", 65), Quantity: 1}}}, []string{"items[0].sku"}},
		{"zero quantity", NewShipment{Items: []ShipLine{line, {SKU: "mug"}}}, []string{"items[1].quantity"}},
		{"negative quantity", NewShipment{Items: []ShipLine{{SKU: "mug", Quantity: -3}}}, []string{"items[0].quantity"}},
		{"more than any line holds", NewShipment{Items: []ShipLine{{SKU: "mug", Quantity: MaxShipQuantity + 1}}}, []string{"items[0].quantity"}},
		{"long carrier", NewShipment{Items: []ShipLine{line}, Carrier: strings.Repeat("é", MaxShipmentText+1)}, []string{"carrier"}},
		{"long tracking", NewShipment{Items: []ShipLine{line}, TrackingNumber: strings.Repeat("x", MaxShipmentText+1)}, []string{"tracking_number"}},
		{"not UTF-8", NewShipment{Items: []ShipLine{line}, Carrier: "\xff"}, []string{"carrier"}},
	}
	for _, tt := range tests {
		n := tt.n
		got := fields(t, n.Check())
		slices.Sort(got)
		want := slices.Clone(tt.fields)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Check() fields = %v, want %v", tt.name, got, want)
		}
		if tt.name == "carrier and tracking" && n.Carrier != "DHL" {
			t.Errorf("Check() left carrier %q, want it trimmed", n.Carrier)
		}
	}
}

// TestPlanShipment: a shipment's units go to the order's lines of their
// SKU in order, never past what is left, and the last units make the
// order shipped.
func TestPlanShipment(t *testing.T) {
	paid := Order{Status: StatusPaid, Items: []Item{
		{SKU: "mug", Quantity: 2},
		{SKU: "tea", Quantity: 3, Shipped: 1},
		{SKU: "", Name: "Gift wrap", Quantity: 1}, // no SKU: not a good
		{SKU: "mug", Quantity: 1},
	}}
	tests := []struct {
		name   string
		o      Order
		lines  []ShipLine
		plan   []LineShipment
		event  FulfillmentEvent
		err    error
		fields []string
	}{
		{"part of one line", paid, []ShipLine{{"mug", 1}}, []LineShipment{{0, 1}}, FulfillmentShipPart, nil, nil},
		{"a SKU across two lines", paid, []ShipLine{{"mug", 3}}, []LineShipment{{0, 2}, {3, 1}}, FulfillmentShipPart, nil, nil},
		{"a SKU named twice", paid, []ShipLine{{"mug", 2}, {"mug", 1}}, []LineShipment{{0, 2}, {3, 1}}, FulfillmentShipPart, nil, nil},
		{"everything left", paid, []ShipLine{{"tea", 2}, {"mug", 3}}, []LineShipment{{0, 2}, {1, 2}, {3, 1}}, FulfillmentShipAll, nil, nil},
		{"more than left of a shipped line", paid, []ShipLine{{"tea", 3}}, nil, "", nil, []string{"items[0].quantity"}},
		{"more than left, named twice", paid, []ShipLine{{"mug", 2}, {"mug", 2}}, nil, "", nil, []string{"items[1].quantity"}},
		{"a SKU the order lacks", paid, []ShipLine{{"pen", 1}, {"tea", 9}}, nil, "", nil, []string{"items[0].sku", "items[1].quantity"}},
		{"the custom line", paid, []ShipLine{{"", 1}}, nil, "", nil, []string{"items[0].sku"}},
		{"a sum past int64", paid, []ShipLine{{"mug", 1}, {"mug", math.MaxInt64}}, nil, "", nil, []string{"items[1].quantity"}},
		{"pending", Order{Status: StatusPending, Items: paid.Items}, []ShipLine{{"mug", 1}}, nil, "", ErrOrderNotPaid, nil},
		{"refunded", Order{Status: StatusRefunded, Items: paid.Items}, []ShipLine{{"mug", 1}}, nil, "", ErrOrderNotPaid, nil},
		{"processing", Order{Status: StatusProcessing, Items: paid.Items}, []ShipLine{{"mug", 1}}, nil, "", ErrOrderNotPaid, nil},
	}
	for _, tt := range tests {
		plan, event, err := tt.o.PlanShipment(NewShipment{Items: tt.lines})
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s: PlanShipment() error = %v, want %v", tt.name, err, tt.err)
			}
			continue
		}
		if got := fields(t, err); !slices.Equal(got, tt.fields) {
			t.Errorf("%s: PlanShipment() fields = %v (%v), want %v", tt.name, got, err, tt.fields)
		}
		if !slices.Equal(plan, tt.plan) || event != tt.event {
			t.Errorf("%s: PlanShipment() = %v, %q; want %v, %q", tt.name, plan, event, tt.plan, tt.event)
		}
	}
}

// TestPlanShipmentNeverOverships ships random shipments of random orders
// until each is shipped, against a model that counts per SKU: a plan
// never ships a line past its quantity, the units it ships are exactly
// those asked, it is refused exactly when the model says too many, and
// the order is shipped exactly when nothing is left.
func TestPlanShipmentNeverOverships(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 60))
	skus := []string{"a", "b", "c"}
	for round := range 300 {
		o := Order{Status: StatusPaid, Fulfillment: FulfillmentUnfulfilled}
		for range 1 + rng.IntN(5) {
			o.Items = append(o.Items, Item{SKU: skus[rng.IntN(len(skus))], Quantity: 1 + rng.Int64N(4)})
		}
		left := map[string]int64{}
		for _, it := range o.Items {
			left[it.SKU] += it.Quantity
		}
		for step := 0; o.Fulfillment != FulfillmentShipped; step++ {
			if step > 200 {
				t.Fatalf("round %d: the order never shipped: %+v", round, o.Items)
			}
			var lines []ShipLine
			asked := map[string]int64{}
			for range 1 + rng.IntN(3) {
				l := ShipLine{SKU: skus[rng.IntN(len(skus))], Quantity: 1 + rng.Int64N(3)}
				lines = append(lines, l)
				asked[l.SKU] += l.Quantity
			}
			fits := true
			for sku, n := range asked {
				if have, ok := left[sku]; !ok || n > have {
					fits = false
				}
			}
			plan, event, err := o.PlanShipment(NewShipment{Items: lines})
			if fits != (err == nil) {
				t.Fatalf("round %d: PlanShipment(%v) of %+v: error %v, model says fits=%v", round, lines, o.Items, err, fits)
			}
			if err != nil {
				continue
			}
			got := map[string]int64{}
			for _, p := range plan {
				it := &o.Items[p.Position]
				if p.Quantity < 1 || it.Shipped+p.Quantity > it.Quantity {
					t.Fatalf("round %d: plan %v overships line %d %+v", round, plan, p.Position, *it)
				}
				it.Shipped += p.Quantity
				got[it.SKU] += p.Quantity
			}
			if fmt.Sprint(got) != fmt.Sprint(asked) {
				t.Fatalf("round %d: plan ships %v, asked %v", round, got, asked)
			}
			total := int64(0)
			for sku, n := range asked {
				left[sku] -= n
			}
			for _, n := range left {
				total += n
			}
			to, ok := FulfillmentMachine.Next(o.Fulfillment, event)
			if !ok || (to == FulfillmentShipped) != (total == 0) {
				t.Fatalf("round %d: event %s from %s with %d units left", round, event, o.Fulfillment, total)
			}
			o.Fulfillment = to
		}
	}
}
