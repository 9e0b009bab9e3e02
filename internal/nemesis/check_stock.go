package nemesis

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// The stock invariant (ADR 0059): counted stock is taken like a payment
// is claimed, never below 0, and given back exactly once by the
// transition that closes an unpaid order.

// StockCount is what InvStock counted of one product: what the merchant
// put in, what is left, the units the orders still holding them took
// (Sold, by Holding orders) and those the cancelled or expired orders
// gave back (Back, by Closed orders).
type StockCount struct {
	SKU                        string
	Received, Left, Sold, Back int64
	Holding, Closed            int
}

func (s Stock) count() StockCount {
	n := StockCount{SKU: s.SKU, Received: s.Received, Left: s.Left}
	for id, took := range s.Taken {
		if s.Closed[id] {
			n.Back += took
			n.Closed++
		} else {
			n.Sold += took
			n.Holding++
		}
	}
	return n
}

func (c *checker) stockCounts() []StockCount {
	var out []StockCount
	for _, s := range c.w.Stock {
		out = append(out, s.count())
	}
	return out
}

func (c *checker) stock() []Violation {
	var out []Violation
	for _, s := range c.w.Stock {
		n := s.count()
		var why []string
		if s.Left < 0 {
			why = append(why, fmt.Sprintf("the database holds %d left, below 0", s.Left))
		}
		switch {
		case s.Shown == nil:
			why = append(why, "the storefront shows no count")
		case *s.Shown < 0:
			why = append(why, fmt.Sprintf("the storefront shows %d left, below 0", *s.Shown))
		case *s.Shown != s.Left:
			why = append(why, fmt.Sprintf("the storefront shows %d left, the database %d", *s.Shown, s.Left))
		}
		if n.Received != n.Left+n.Sold {
			what := "units are missing: taken and never given back, or taken without an order holding them"
			if n.Left+n.Sold > n.Received {
				what = "more units than were received: given back more than once, or sold without being taken"
			}
			why = append(why, fmt.Sprintf("received %d, but left %d + sold %d (by %d orders) = %d: %s (%d units given back by %d cancelled or expired orders)",
				n.Received, n.Left, n.Sold, n.Holding, n.Left+n.Sold, what, n.Back, n.Closed))
		}
		if len(why) > 0 {
			out = append(out, Violation{Invariant: InvStock, Detail: fmt.Sprintf("product %s: %s", s.SKU, strings.Join(why, "; ")), Slice: c.stockSlice(s)})
		}
		for _, op := range c.ops {
			if op.Kind != OpCreate || op.Status != http.StatusCreated {
				continue
			}
			o, ok := orderOf(op.Body)
			if !ok || o.ID == "" {
				continue
			}
			if asked, took := askedOf(op.ReqBody)[s.SKU], s.Taken[o.ID]; asked != took {
				out = append(out, Violation{Invariant: InvStock, Slice: append([]Op{op}, c.byOrder[o.ID]...),
					Detail: fmt.Sprintf("create #%d answered 201 with order %s, which asked for %d of %s, but its lines took %d", op.ID, o.ID, asked, s.SKU, took)})
			}
		}
	}
	return out
}

// stockSlice is what shows a product's balance: the requests of the
// orders that gave units back, where a give-back missed or doubled shows.
func (c *checker) stockSlice(s Stock) []Op {
	var out []Op
	for _, id := range slices.Sorted(maps.Keys(s.Taken)) {
		if s.Closed[id] {
			out = append(out, c.byOrder[id]...)
		}
	}
	sortOps(out)
	return out
}

// askedOf is how many units of each SKU an order creation's body asks
// for, over its lines.
func askedOf(body []byte) map[string]int64 {
	var b struct {
		Items []struct {
			SKU      string `json:"sku"`
			Quantity int64  `json:"quantity"`
		} `json:"items"`
	}
	out := map[string]int64{}
	if json.Unmarshal(body, &b) != nil {
		return out
	}
	for _, it := range b.Items {
		out[it.SKU] += it.Quantity
	}
	return out
}
