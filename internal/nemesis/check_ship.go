package nemesis

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/payd/payd/domain"
)

// The shipment invariant (ADR 0060): a shipment raises its lines' shipped
// counts by guarded statements in one transaction with the shipment and
// the order's fulfilment, so no line ever ships more than it holds, the
// counts and the shipments agree, and a key ships at most once.

func (c *checker) shipped() []Violation {
	return c.eachOrder(InvShipped, func(o OrderState) string {
		if why := c.shippedWhy(o); why != "" {
			return "order " + o.ID + ": " + why
		}
		return ""
	})
}

// shippedWhy says how order o breaks InvShipped, or "".
func (c *checker) shippedWhy(o OrderState) string {
	if o.Fulfillment == "" { // payd's view of it was read without its fulfilment
		return ""
	}
	var why []string
	byLines := map[string]int64{}
	goods, full, none := 0, 0, true
	for i, l := range o.Lines {
		if l.Shipped < 0 || l.Shipped > l.Quantity {
			why = append(why, fmt.Sprintf("line %d (%s) shipped %d of %d", i, l.SKU, l.Shipped, l.Quantity))
		}
		if l.SKU == "" {
			if l.Shipped != 0 {
				why = append(why, fmt.Sprintf("line %d, a custom line, shipped %d", i, l.Shipped))
			}
			continue
		}
		goods++
		byLines[l.SKU] += l.Shipped
		if l.Shipped == l.Quantity {
			full++
		}
		if l.Shipped != 0 {
			none = false
		}
	}
	byShipments := map[string]int64{}
	held := map[string]bool{}
	for _, sh := range o.Shipments {
		held[sh.ID] = true
		for sku, n := range sh.Units {
			byShipments[sku] += n
		}
	}
	for _, sku := range skusOf(byLines, byShipments) {
		if byLines[sku] != byShipments[sku] {
			why = append(why, fmt.Sprintf("its lines shipped %d of %s, its shipments hold %d", byLines[sku], sku, byShipments[sku]))
		}
	}
	want := domain.FulfillmentPartiallyShipped
	switch {
	case none:
		want = domain.FulfillmentUnfulfilled
	case full == goods:
		want = domain.FulfillmentShipped
	}
	if o.Fulfillment != want {
		why = append(why, fmt.Sprintf("its fulfillment_status is %q, its lines say %q", o.Fulfillment, want))
	}
	if len(o.Shipments) > 0 && !o.Status.WasPaid() {
		why = append(why, fmt.Sprintf("it is %s and holds %d shipments: only a paid order ships", o.Status, len(o.Shipments)))
	}
	keys := map[string]bool{}
	for _, op := range c.byOrder[o.ID] {
		if op.Kind != OpShip {
			continue
		}
		keys[op.Key] = true
		if op.Status != http.StatusCreated {
			continue
		}
		var sh struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(op.Body, &sh) != nil || !held[sh.ID] {
			why = append(why, fmt.Sprintf("ship #%d answered 201 with shipment %q, which the order does not hold", op.ID, sh.ID))
		}
	}
	if len(o.Shipments) > len(keys) {
		why = append(why, fmt.Sprintf("it holds %d shipments from %d keys: a key shipped twice", len(o.Shipments), len(keys)))
	}
	return strings.Join(why, "; ")
}

// skusOf lists the SKUs of both counts, sorted.
func skusOf(a, b map[string]int64) []string {
	var out []string
	for _, m := range []map[string]int64{a, b} {
		for sku := range m {
			if !slices.Contains(out, sku) {
				out = append(out, sku)
			}
		}
	}
	slices.Sort(out)
	return out
}
