package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/internal/nemesis"
)

// The nemesis's clients: seeded loops of pays, replays, cancels, refunds,
// shipments and reads against the replicas, each request and answer recorded in the
// history.

// nemWorkload is the clients' shared knowledge: the customers, the orders
// they made and every key they sent (for replays and the final sweep),
// and the history of what they sent and heard.
type nemWorkload struct {
	t       *testing.T
	s       *nemSetup
	seed    int64
	hist    nemesis.History
	sampler *nemesis.Sampler
	skus    map[string]string // the catalogue SKU of each of nemAmounts
	counted string            // the catalogue SKU with counted stock (nemStockSKU)
	http    *http.Client
	tokens  []string // the customers' tokens

	mu     sync.Mutex
	orders []*nemOrder
	keys   []*nemKey
	byKey  map[string]*nemKey
}

// nemOrder is an order the clients made.
type nemOrder struct {
	id, amount string
	token      string
	sku        string // its catalogue line's SKU, one unit
	counted    int    // the units of its counted product's line, 0 for none
}

// nemKey is one idempotent request under its key: sent again, it is the
// same request.
type nemKey struct {
	kind   nemesis.OpKind
	order  *nemOrder
	key    string
	amount string // refund: the amount asked for, "" for the rest
	method string // HTTP method
	path   string
	token  string
	body   []byte
}

func newNemWorkload(t *testing.T, s *nemSetup, seed int64) *nemWorkload {
	t.Helper()
	w := &nemWorkload{t: t, s: s, seed: seed, byKey: map[string]*nemKey{},
		http: &http.Client{Timeout: nemOpTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(w.http.CloseIdleConnections)
	d := s.reps[0].current().driver
	for range 3 {
		_, tok := d.register(newEmail())
		w.tokens = append(w.tokens, tok)
	}
	w.skus = map[string]string{}
	for _, amount := range nemAmounts {
		w.skus[amount] = d.priced(amount) // only the merchant sets a price
	}
	// The product with counted stock, made before the faults start: the
	// merchant puts in nemStockUnits, and nothing since.
	r := d.do(request{method: http.MethodPost, path: "/v1/products", token: testMerchantKey, key: "catalogue-" + nemStockSKU,
		body: map[string]any{"sku": nemStockSKU, "name": "Counted thing", "unit_price": "4.00", "currency": "USD", "stock": nemStockUnits}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create product %s = %d %s, want 201", nemStockSKU, r.Status, r.Body)
	}
	w.counted = nemStockSKU
	return w
}

// The product with counted stock the clients buy from (nemesis.InvStock):
// a share of the orders (nemStockShare in 100) adds a line of 1 to 3 of
// it. Its stock runs out within the schedule, so later carts are refused
// out_of_stock and the units that cancels give back are bought again.
const (
	nemStockSKU   = "nem-counted"
	nemStockUnits = 100
	nemStockShare = 40
)

var (
	nemAmounts = []string{"10.00", "25.50", "99.99", "7.30"}
	nemMethods = []struct {
		name   string
		weight int
	}{{"pm_ok", 50}, {"pm_declined", 10}, {"pm_insufficient_funds", 5}, {"pm_async", 15}, {"pm_async_fail", 5}, {"pm_timeout", 10}}
)

func nemMethod(r *rand.Rand) string {
	x := r.IntN(100)
	for _, m := range nemMethods {
		if x -= m.weight; x < 0 {
			return m.name
		}
	}
	return "pm_ok"
}

// client runs one client's loop until ctx ends: each turn, one of the
// operations the issue lists, drawn from the client's seeded stream.
func (w *nemWorkload) client(ctx context.Context, c int) {
	r := nemRand(w.seed, c)
	for ctx.Err() == nil {
		time.Sleep(time.Duration(80+r.IntN(120)) * time.Millisecond) // a client's pace: the history stays quick to drain and check
		switch x := r.IntN(100); {
		case x < 22: // a new order paid with a new key
			if o := w.newOrder(c, r); o != nil {
				w.send(c, r, w.payKey(o, nemMethod(r)))
			}
		case x < 30: // the same key twice at once
			if o := w.newOrder(c, r); o != nil {
				k := w.payKey(o, nemMethod(r))
				w.concurrently(c, r, k, k)
			}
		case x < 40: // competing keys on one order
			if o := w.newOrder(c, r); o != nil {
				w.concurrently(c, r, w.payKey(o, nemMethod(r)), w.payKey(o, "pm_ok"), w.payKey(o, nemMethod(r)))
			}
		case x < 46: // a new key on an order the clients already know, whatever its state
			if o := w.anyOrder(r); o != nil {
				w.send(c, r, w.payKey(o, "pm_ok"))
			}
		case x < 56: // a replay of a key sent before
			if k := w.anyKey(r, nemesis.OpPay); k != nil {
				w.send(c, r, k)
			}
		case x < 62: // a cancel, sometimes racing a pay of a fresh order
			if r.IntN(2) == 0 {
				if o := w.newOrder(c, r); o != nil {
					w.concurrently(c, r, w.cancelKey(o), w.payKey(o, nemMethod(r)))
				}
			} else if o := w.anyOrder(r); o != nil {
				w.send(c, r, w.cancelKey(o))
			}
		case x < 74: // refunds: partial, full, or two at once
			o := w.anyOrder(r)
			if o == nil {
				break
			}
			switch r.IntN(3) {
			case 0:
				w.send(c, r, w.refundKey(o, "1.00"))
			case 1:
				w.send(c, r, w.refundKey(o, ""))
			default:
				w.concurrently(c, r, w.refundKey(o, "2.50"), w.refundKey(o, []string{"", "1.00"}[r.IntN(2)]))
			}
		case x < 78: // a refund replayed
			if k := w.anyKey(r, nemesis.OpRefund); k != nil {
				w.send(c, r, k)
			}
		case x < 88: // GET /v1/requests/{key}: of a pay key mostly, else of a cancel's
			kind := []nemesis.OpKind{nemesis.OpPay, nemesis.OpPay, nemesis.OpCancel}[r.IntN(3)]
			if k := w.anyKey(r, kind); k != nil {
				w.lookup(c, r, k, false)
			}
		case x < 93: // the merchant ships an order's line: once, twice at once, or again under its key
			o := w.anyOrder(r)
			switch {
			case o == nil:
			case r.IntN(4) == 0:
				w.concurrently(c, r, w.shipKey(o, r), w.shipKey(o, r))
			case r.IntN(3) == 0:
				if k := w.anyKey(r, nemesis.OpShip); k != nil {
					w.send(c, r, k)
				}
			default:
				w.send(c, r, w.shipKey(o, r))
			}
		default: // an order read
			if o := w.anyOrder(r); o != nil {
				w.read(c, r, o, false)
			}
		}
	}
}

// lookup asks payd what became of k's request, a customer's (pay or
// cancel): GET /v1/requests/{key} is the customers' route, in their own
// scope; an operator's refund key has none.
func (w *nemWorkload) lookup(c int, r *rand.Rand, k *nemKey, settled bool) {
	if k.kind == nemesis.OpRefund {
		return
	}
	w.do(c, r, nemesis.Op{Kind: nemesis.OpRequest, OrderID: k.order.id, Key: k.key, Method: http.MethodGet, Path: "/v1/requests/" + k.key}, k.token, settled)
}

// newOrder creates an order under a creation key, trying three times;
// nil if none was made. Some carts add a line of the counted product
// (nemStockShare); one refused out_of_stock is tried again, under a new
// key, without it. Each try is part of the history (nemesis.OpCreate): a
// lost answer may still have made an order, which then holds its units
// unknown to the clients, and the stock invariant counts it from the
// database.
func (w *nemWorkload) newOrder(c int, r *rand.Rand) *nemOrder {
	amount, token := nemAmounts[r.IntN(len(nemAmounts))], w.tokens[r.IntN(len(w.tokens))]
	items := []client.ItemRequest{item(w.skus[amount])}
	if r.IntN(100) < nemStockShare {
		items = append(items, client.ItemRequest{Sku: &w.counted, Quantity: 1 + r.IntN(3)})
	}
	counted := func() int {
		if len(items) > 1 {
			return items[1].Quantity
		}
		return 0
	}
	for {
		body, _ := json.Marshal(client.CreateOrderRequest{Items: items})
		key, short := "create-"+uuid.NewString(), false
		for range 3 {
			op := w.do(c, r, nemesis.Op{Kind: nemesis.OpCreate, Key: key, Method: http.MethodPost, Path: "/v1/orders", ReqBody: body}, token, false)
			if op.OrderID != "" {
				var o client.Order
				_ = json.Unmarshal(op.Body, &o) // do read it
				no := &nemOrder{id: op.OrderID, amount: string(o.Amount), token: token, sku: w.skus[amount], counted: counted()}
				w.mu.Lock()
				w.orders = append(w.orders, no)
				w.mu.Unlock()
				return no
			}
			if short = op.Status == http.StatusConflict && problemCode(op.Body) == "out_of_stock"; short {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !short || len(items) == 1 {
			return nil
		}
		items = items[:1]
	}
}

func (w *nemWorkload) anyOrder(r *rand.Rand) *nemOrder {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.orders) == 0 {
		return nil
	}
	return w.orders[r.IntN(len(w.orders))]
}

func (w *nemWorkload) anyKey(r *rand.Rand, kind nemesis.OpKind) *nemKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	var of []*nemKey
	for _, k := range w.keys {
		if k.kind == kind {
			of = append(of, k)
		}
	}
	if len(of) == 0 {
		return nil
	}
	return of[r.IntN(len(of))]
}

// remember notes a new key, for replays and the sweep.
func (w *nemWorkload) remember(k *nemKey) *nemKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, k)
	w.byKey[k.key] = k
	return k
}

func (w *nemWorkload) payKey(o *nemOrder, method string) *nemKey {
	if w.s.stripe != nil {
		method = nemStripeMethods[method]
	}
	body, _ := json.Marshal(client.PayRequest{PaymentMethod: method})
	return w.remember(&nemKey{kind: nemesis.OpPay, order: o, key: "pay-" + uuid.NewString(), method: http.MethodPost,
		path: "/v1/orders/" + o.id + "/pay", token: o.token, body: body})
}

func (w *nemWorkload) cancelKey(o *nemOrder) *nemKey {
	return w.remember(&nemKey{kind: nemesis.OpCancel, order: o, key: "cancel-" + uuid.NewString(), method: http.MethodPost,
		path: "/v1/orders/" + o.id + "/cancel", token: o.token})
}

func (w *nemWorkload) refundKey(o *nemOrder, amount string) *nemKey {
	req := client.RefundRequest{Reason: "customer asked"}
	if amount != "" {
		req.Amount = &amount
	}
	body, _ := json.Marshal(req)
	return w.remember(&nemKey{kind: nemesis.OpRefund, order: o, key: "refund-" + uuid.NewString(), amount: amount, method: http.MethodPost,
		path: "/v1/admin/orders/" + o.id + "/refund", token: testAdminToken, body: body})
}

// shipKey is a shipment of one unit of o's lines, by the merchant: of its
// catalogue line (one unit: one shipment of it can succeed), or of its
// counted product's line (1 to 3 units: an order ships in parts). Only a
// paid order ships.
func (w *nemWorkload) shipKey(o *nemOrder, r *rand.Rand) *nemKey {
	sku := o.sku
	if o.counted > 0 && r.IntN(2) == 0 {
		sku = w.counted
	}
	body, _ := json.Marshal(map[string]any{"items": []map[string]any{{"sku": sku, "quantity": 1}}, "carrier": "nemesis"})
	return w.remember(&nemKey{kind: nemesis.OpShip, order: o, key: "ship-" + uuid.NewString(), method: http.MethodPost,
		path: "/v1/orders/" + o.id + "/shipments", token: testMerchantKey, body: body})
}

// send sends k's request once.
func (w *nemWorkload) send(c int, r *rand.Rand, k *nemKey) {
	w.sendSettled(c, r, k, false)
}

func (w *nemWorkload) sendSettled(c int, r *rand.Rand, k *nemKey, settled bool) {
	w.do(c, r, nemesis.Op{Kind: k.kind, OrderID: k.order.id, Key: k.key, Amount: k.amount, Method: k.method, Path: k.path, ReqBody: k.body}, k.token, settled)
}

// concurrently sends each request at the same moment.
func (w *nemWorkload) concurrently(c int, r *rand.Rand, ks ...*nemKey) {
	var wg sync.WaitGroup
	for _, k := range ks {
		rr := rand.New(rand.NewPCG(r.Uint64(), 0)) // each goroutine its own stream
		wg.Go(func() { w.send(c, rr, k) })
	}
	wg.Wait()
}

// read is an order read.
func (w *nemWorkload) read(c int, r *rand.Rand, o *nemOrder, settled bool) {
	w.do(c, r, nemesis.Op{Kind: nemesis.OpRead, OrderID: o.id, Method: http.MethodGet, Path: "/v1/orders/" + o.id}, o.token, settled)
}

// do sends op's request to a replica picked by r and records it with
// what came back, or why nothing did.
func (w *nemWorkload) do(c int, r *rand.Rand, op nemesis.Op, token string, settled bool) nemesis.Op {
	op.Client, op.Settled = c, settled
	base := w.s.reps[r.IntN(len(w.s.reps))].base
	op.Start = time.Now()
	rep, err := w.roundTrip(base, op.Method, op.Path, token, op.Key, op.ReqBody)
	op.End = time.Now()
	if op.Kind == nemesis.OpRead || op.Kind == nemesis.OpRequest {
		op.Key = ""
		if op.Kind == nemesis.OpRequest {
			op.Key = strings.TrimPrefix(op.Path, "/v1/requests/")
		}
	}
	if err != nil {
		op.Err = err.Error()
	} else {
		op.Status, op.Body, op.RetryAfter = rep.Status, rep.Body, rep.Header.Get("Retry-After")
	}
	if op.Kind == nemesis.OpCreate && op.Status == http.StatusCreated {
		var o client.Order
		if json.Unmarshal(op.Body, &o) == nil {
			op.OrderID = o.Id
		}
	}
	if w.sampler != nil {
		w.sampler.Observe(op.End.Sub(op.Start))
	}
	op.ID = w.hist.Add(op)
	return op
}

// roundTrip is one request with the client's timeout, sent as the e2e
// driver sends: every answer is held to openapi.yaml.
func (w *nemWorkload) roundTrip(base, method, path, token, key string, body []byte) (reply, error) {
	r := request{method: method, path: path, token: token, key: key}
	if body != nil {
		r.body = body // a nil []byte would still be a body
	}
	return (&driver{t: w.t, name: base, base: base, client: w.http}).send(r)
}
