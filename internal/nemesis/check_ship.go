package nemesis

import (
	"encoding/json"
	"fmt"
	"maps"
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
	// Each key ships at most once, and what it answered is its shipment:
	// every 201 under it names the shipment it made, and its last final
	// answer is one (a request run again after a lost answer finds its
	// shipment; it never ships again, nor answers as if nothing shipped).
	byKey := map[string]string{}
	for _, sh := range o.Shipments {
		if sh.Key == "" {
			why = append(why, fmt.Sprintf("shipment %s has no key", sh.ID))
			continue
		}
		if prev, dup := byKey[sh.Key]; dup {
			why = append(why, fmt.Sprintf("key %s made two shipments, %s and %s", sh.Key, prev, sh.ID))
		}
		byKey[sh.Key] = sh.ID
	}
	last := map[string]Op{} // each key's last final answer
	for _, op := range c.byOrder[o.ID] {
		if op.Kind != OpShip {
			continue
		}
		if classOf(op).final() && (last[op.Key].ID == 0 || op.End.After(last[op.Key].End)) {
			last[op.Key] = op
		}
		if op.Status != http.StatusCreated {
			continue
		}
		var sh struct {
			ID string `json:"id"`
		}
		switch err := json.Unmarshal(op.Body, &sh); {
		case err != nil || !held[sh.ID]:
			why = append(why, fmt.Sprintf("ship #%d answered 201 with shipment %q, which the order does not hold", op.ID, sh.ID))
		case byKey[op.Key] != sh.ID:
			why = append(why, fmt.Sprintf("ship #%d answered 201 with shipment %s, but its key %s made %q", op.ID, sh.ID, op.Key, byKey[op.Key]))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if op, ok := last[key]; ok && op.Status != http.StatusCreated {
			why = append(why, fmt.Sprintf("key %s made shipment %s, but its last answer, ship #%d, is %d %s", key, byKey[key], op.ID, op.Status, codeOf(op.Body)))
		}
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
