package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// histStart is the start of every synthetic history.
var histStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func atMS(n int) time.Time { return histStart.Add(time.Duration(n) * time.Millisecond) }

func decOf(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// orderBody renders an order as payd does, with what the checker reads.
func orderBody(id, status, amount, by, refunded string) []byte {
	pr := "null"
	if by != "" {
		pr = fmt.Sprintf("%q", by)
	}
	return fmt.Appendf(nil, `{"id":%q,"customer_id":"c1","status":%q,"amount":%q,"currency":"USD","items":[],"pay_request_id":%s,"paid_at":null,"refunded_amount":%q}`,
		id, status, amount, pr, refunded)
}

func problemBody(status int, code, requestID string) []byte {
	return fmt.Appendf(nil, `{"type":"/problems/%s","title":"t","status":%d,"detail":"d","code":%q,"request_id":%q}`, code, status, code, requestID)
}

// opAt is one request from client c, sent at start ms and answered at end ms.
func opAt(c int, kind OpKind, order, key string, start, end int, status int, body []byte) Op {
	method, path := "POST", "/v1/orders/"+order+"/"+string(kind)
	switch kind {
	case OpRead:
		method, path = "GET", "/v1/orders/"+order
	case OpRequest:
		method, path = "GET", "/v1/requests/"+key
	case OpRefund:
		path = "/v1/admin/orders/" + order + "/refund"
	}
	op := Op{Client: c, Kind: kind, OrderID: order, Key: key, Method: method, Path: path,
		Status: status, Body: body, Start: atMS(start), End: atMS(end)}
	if kind == OpPay {
		op.ReqBody = []byte(`{"payment_method":"pm_ok"}`)
	}
	switch {
	case status == 202:
		op.RetryAfter = "2"
	case status == 409 && codeOf(body) == "idempotency_key_in_use":
		op.RetryAfter = "1"
	}
	return op
}

func sweep(op Op) Op { op.Settled = true; return op }

// cleanWorld is a run in which payd kept every promise: o1 paid by k1
// after a 202, o2 cancelled, o3 paid and refunded in part, o4 declined
// twice under one key (each decline a new execution).
func cleanWorld() World {
	paid1 := orderBody("o1", "paid", "12.30", "k1", "0.00")
	paid3 := orderBody("o3", "paid", "12.30", "k3", "0.00")
	refund3 := fmt.Appendf(nil, `{"refund":{"id":"r1","status":"succeeded","amount":"5.00","provider_charge_id":"ch3"},"order":%s}`,
		orderBody("o3", "paid", "12.30", "k3", "5.00"))
	lookup1 := fmt.Appendf(nil, `{"key":"k1","status":"succeeded","method":"POST","path":"/v1/orders/o1/pay","response":{"status":200,"body":%s}}`, paid1)
	ops := []Op{
		opAt(1, OpRead, "o1", "", 0, 5, 200, orderBody("o1", "pending", "12.30", "", "0.00")),
		opAt(1, OpPay, "o1", "k1", 10, 100, 202, orderBody("o1", "processing", "12.30", "k1", "0.00")),
		opAt(2, OpPay, "o1", "k1", 20, 60, 409, problemBody(409, "idempotency_key_in_use", "x1")),
		opAt(1, OpPay, "o1", "k1", 200, 260, 200, paid1),
		opAt(2, OpRead, "o1", "", 150, 300, 200, orderBody("o1", "paid", "12.30", "k1", "0.00")),
		opAt(3, OpRequest, "", "k1", 400, 410, 200, lookup1),
		opAt(3, OpRead, "o2", "", 0, 10, 200, orderBody("o2", "pending", "20.00", "", "0.00")),
		opAt(3, OpCancel, "o2", "c2", 20, 40, 200, orderBody("o2", "cancelled", "20.00", "", "0.00")),
		opAt(3, OpCancel, "o2", "c2", 50, 60, 0, nil),
		opAt(3, OpPay, "o3", "k3", 0, 50, 200, paid3),
		opAt(4, OpRefund, "o3", "rk3", 100, 150, 200, refund3),
		opAt(4, OpRefund, "o3", "rk3", 120, 130, 503, problemBody(503, "service_unavailable", "x2")),
		opAt(5, OpPay, "o4", "k4", 0, 30, 402, problemBody(402, "card_declined", "x3")),
		opAt(5, OpPay, "o4", "k4", 40, 70, 402, problemBody(402, "card_declined", "x4")),
		opAt(5, OpRead, "o4", "", 80, 90, 200, orderBody("o4", "pending", "9.99", "", "0.00")),
		sweep(opAt(6, OpPay, "o1", "k1", 1000, 1010, 200, paid1)),
		sweep(opAt(6, OpRead, "o1", "", 1000, 1010, 200, orderBody("o1", "paid", "12.30", "k1", "0.00"))),
		sweep(opAt(6, OpCancel, "o2", "c2", 1000, 1010, 200, orderBody("o2", "cancelled", "20.00", "", "0.00"))),
		sweep(opAt(6, OpPay, "o3", "k3", 1000, 1010, 200, paid3)),
		sweep(opAt(6, OpRefund, "o3", "rk3", 1000, 1010, 200, refund3)),
		sweep(opAt(6, OpPay, "o4", "k4", 1000, 1010, 402, problemBody(402, "card_declined", "x5"))),
	}
	// o3's one shipment, under key s3: answered 201, then a retry
	// waited for it, and the sweep heard the same answer.
	ship3 := []byte(`{"id":"sh1","order_id":"o3","items":[{"sku":"usd-12.30","quantity":1}],"carrier":null,"tracking_number":null,"created_at":"2026-01-01T00:00:00.000000Z"}`)
	ops = append(ops,
		Op{Client: 4, Kind: OpShip, OrderID: "o3", Key: "s3", Method: "POST", Path: "/v1/orders/o3/shipments", Status: 201, Start: atMS(200), End: atMS(220), Body: ship3},
		Op{Client: 4, Kind: OpShip, OrderID: "o3", Key: "s3", Method: "POST", Path: "/v1/orders/o3/shipments", Status: 409, RetryAfter: "1", Start: atMS(205), End: atMS(215),
			Body: problemBody(409, "idempotency_key_in_use", "x6")},
		sweep(Op{Client: 6, Kind: OpShip, OrderID: "o3", Key: "s3", Method: "POST", Path: "/v1/orders/o3/shipments", Status: 201, Start: atMS(1000), End: atMS(1010), Body: ship3}),
	)
	ops[11].RetryAfter = "1"
	ops[8].Err = "read: connection reset by peer"
	// The creations of o1, which took 2 of the mug's counted stock and
	// holds them, and of o2, whose cancel gave its 1 back.
	ops = append(ops,
		Op{Client: 1, Kind: OpCreate, OrderID: "o1", Key: "n1", Method: "POST", Path: "/v1/orders", Status: 201, Start: atMS(0), End: atMS(8),
			ReqBody: []byte(`{"items":[{"sku":"usd-8.30","quantity":1},{"sku":"mug","quantity":2}]}`), Body: orderBody("o1", "pending", "12.30", "", "0.00")},
		Op{Client: 3, Kind: OpCreate, OrderID: "o2", Key: "n2", Method: "POST", Path: "/v1/orders", Status: 201, Start: atMS(0), End: atMS(9),
			ReqBody: []byte(`{"items":[{"sku":"usd-18.00","quantity":1},{"sku":"mug","quantity":1}]}`), Body: orderBody("o2", "pending", "20.00", "", "0.00")},
	)
	for i := range ops {
		ops[i].ID = i + 1
	}
	w := World{
		Setup: "sqlite", Seed: 7, Ops: ops,
		Charges: []Charge{
			{ID: "ch1", OrderID: "o1", Key: "a1", Amount: decOf("12.30"), Succeeded: true, Created: atMS(150)},
			{ID: "ch3", OrderID: "o3", Key: "a3", Amount: decOf("12.30"), Succeeded: true, Refunded: decOf("5.00"), Created: atMS(20)},
			{ID: "ch4", OrderID: "o4", Key: "a4", Amount: decOf("9.99"), Created: atMS(10)},
		},
		Orders: map[string]OrderState{
			"o1": {ID: "o1", Status: domain.StatusPaid, Amount: decOf("12.30"), ChargeID: "ch1", Attempts: 1, Books: Money{Charged: decOf("12.30")},
				Told: []Told{{ID: "e1", Type: domain.NotifyOrderPaid, Seq: 3, Status: domain.StatusPaid, Amounts: told("0.00", "12.30", "0.00")}}},
			"o2": {ID: "o2", Status: domain.StatusCancelled, Amount: decOf("20.00"),
				Told: []Told{{ID: "e2", Type: domain.NotifyOrderCancelled, Seq: 2, Status: domain.StatusCancelled}}},
			"o3": {ID: "o3", Status: domain.StatusPaid, Amount: decOf("12.30"), Refunded: decOf("5.00"), ChargeID: "ch3", Attempts: 1, RefundsBooked: 1,
				Books: Money{Charged: decOf("12.30"), Refunded: decOf("5.00")},
				Told: []Told{
					{ID: "e3", Type: domain.NotifyOrderPaid, Seq: 3, Status: domain.StatusPaid, Amounts: told("0.00", "12.30", "0.00")},
					{ID: "e4", Type: domain.NotifyOrderRefunded, Seq: 5, Status: domain.StatusPaid, Amounts: told("5.00", "12.30", "5.00")},
					{ID: "e6", Type: domain.NotifyOrderShipped, Seq: 6, Status: domain.StatusPaid, Amounts: told("5.00", "12.30", "5.00")},
				},
				Fulfillment: domain.FulfillmentShipped, Lines: []Line{{SKU: "usd-12.30", Quantity: 1, Shipped: 1}, {Quantity: 1}},
				Shipments: []Shipment{{ID: "sh1", Key: "s3", Units: map[string]int64{"usd-12.30": 1}}}},
			"o4": {ID: "o4", Status: domain.StatusPending, Amount: decOf("9.99"), Attempts: 1,
				Told: []Told{{ID: "e5", Type: domain.NotifyOrderPaymentFailed, Seq: 3, Status: domain.StatusPending}}},
		},
		Payd:     Money{Charged: decOf("24.60"), Refunded: decOf("5.00")},
		Provider: Money{Charged: decOf("24.60"), Refunded: decOf("5.00")},
		Stock: []Stock{{SKU: "mug", Received: 10, Left: 8, Shown: new(int64(8)),
			Taken: map[string]int64{"o1": 2, "o2": 1}, Closed: map[string]bool{"o2": true}}},
		// The merchant heard every event but o3's refund, which payd shows
		// pending; o3's payment arrived twice (its first answer was lost).
		Merchant: &Merchant{
			Subscribed: domain.NotifyTypes,
			Arrivals: []Arrival{
				arrival("e1", "o1", "h1", 300, "payd-1"), arrival("e2", "o2", "h2", 50, "payd-2"),
				arrival("e3", "o3", "h3", 60, "payd-1"), arrival("e3", "o3", "h3", 900, "payd-2"),
				arrival("e5", "o4", "h5", 40, "payd-1"),
			},
			// e9, which the one_event_per_change cases add, would be pending too.
			// e6, o3's shipment, waits behind its refund.
			Shown: map[string]domain.DeliveryStatus{"e4": domain.DeliveryPending, "e6": domain.DeliveryPending, "e9": domain.DeliveryPending},
		},
	}
	for _, id := range []string{"o1", "o2", "o4"} {
		o := w.Orders[id]
		o.Fulfillment, o.Lines = domain.FulfillmentUnfulfilled, []Line{{SKU: "usd-" + o.Amount.StringFixed(2), Quantity: 1}}
		w.Orders[id] = o
	}
	bodiesAsTold(&w)
	return w
}

// arrival is a verified arrival of event id at ms, its body telling no
// money.
func arrival(id, order, hash string, ms int, via string) Arrival {
	return Arrival{WebhookID: id, EventID: id, OrderID: order, BodyHash: hash, Verified: true, At: atMS(ms), Via: via, Amounts: &Amounts{}}
}

// told is the money an event tells: the order's refunded_amount, and its
// ledger's charged and refunded.
func told(refunded, charged, booksRefunded string) Amounts {
	return Amounts{Refunded: decOf(refunded), Books: Money{Charged: decOf(charged), Refunded: decOf(booksRefunded)}}
}

// bodiesAsTold gives each arrival of w the money its event tells in payd's
// timeline: the body the shop heard is the event's.
func bodiesAsTold(w *World) {
	for i, a := range w.Merchant.Arrivals {
		for _, o := range w.Orders {
			for _, e := range o.Told {
				if e.ID == a.EventID {
					m := e.Amounts
					w.Merchant.Arrivals[i].Amounts = &m
				}
			}
		}
	}
}

func TestCheckCleanWorldPasses(t *testing.T) {
	r := Check(cleanWorld())
	if err := r.Err(); err != nil {
		t.Fatalf("Check(clean world) = %v, want no violation", err)
	}
	if !slices.Equal(r.Checked, Invariants) || len(r.Checked) != 14 {
		t.Errorf("Checked = %v, want the 14 invariants %v", r.Checked, Invariants)
	}
	if want := (StockCount{SKU: "mug", Received: 10, Left: 8, Sold: 2, Holding: 1, Back: 1, Closed: 1}); len(r.Stock) != 1 || r.Stock[0] != want {
		t.Errorf("Stock = %+v, want %+v", r.Stock, want)
	}
	if d := r.Delivered; d == nil || *d != (Delivered{Events: 6, Arrived: 4, Pending: 2, Arrivals: 5, Again: 1}) {
		t.Errorf("Delivered = %+v, want 6 events, 4 arrived, 2 pending, 5 arrivals, 1 again", d)
	}
}

// opIndex finds the op of w with id.
func opIndex(w *World, id int) *Op {
	for i := range w.Ops {
		if w.Ops[i].ID == id {
			return &w.Ops[i]
		}
	}
	panic(fmt.Sprintf("no op %d", id))
}

func addOp(w *World, op Op) {
	op.ID = len(w.Ops) + 1
	w.Ops = append(w.Ops, op)
}

func TestCheckFindsEachBrokenInvariant(t *testing.T) {
	tests := []struct {
		name   string
		want   string
		mutate func(w *World)
	}{
		{"two unrefunded charges", InvOneCharge, func(w *World) {
			// payd's view of o9 was not read, so only the provider's books speak.
			addOp(w, opAt(7, OpPay, "o9", "k9", 0, 10, 202, orderBody("o9", "processing", "1.00", "k9", "0.00")))
			w.Charges = append(w.Charges,
				Charge{ID: "ch9a", OrderID: "o9", Amount: decOf("1.00"), Succeeded: true},
				Charge{ID: "ch9b", OrderID: "o9", Amount: decOf("1.00"), Succeeded: true, Refunded: decOf("0.50")})
		}},
		{"a cancelled order keeps a charge", InvPaidOneCharge, func(w *World) {
			w.Charges = append(w.Charges, Charge{ID: "ch2", OrderID: "o2", Amount: decOf("20.00"), Succeeded: true})
		}},
		{"payd's refunded amount is not the provider's", InvPaidOneCharge, func(w *World) {
			o := w.Orders["o3"]
			o.Refunded = decOf("4.00")
			w.Orders["o3"] = o
		}},
		{"an order still processing once settled", InvPaidOneCharge, func(w *World) {
			o := w.Orders["o4"]
			o.Status = domain.StatusProcessing
			w.Orders["o4"] = o
		}},
		{"books differ", InvBooks, func(w *World) { w.Payd.Refunded = decOf("0") }},
		{"a replay that differs", InvSameFinal, func(w *World) {
			opIndex(w, 16).Body = orderBody("o1", "paid", "12.30", "k1", "1.00")
		}},
		{"the request lookup stores another answer", InvSameFinal, func(w *World) {
			opIndex(w, 6).Body = []byte(`{"key":"k1","status":"succeeded","response":{"status":200,"body":{"id":"o1","status":"pending"}}}`)
		}},
		{"another request under a used key is no 422", InvSameFinal, func(w *World) {
			op := opAt(7, OpPay, "o1", "k1", 500, 510, 200, orderBody("o1", "paid", "12.30", "k1", "0.00"))
			op.ReqBody = []byte(`{"payment_method":"pm_declined"}`)
			addOp(w, op)
		}},
		{"a 202 after the final answer", InvPendingFirst, func(w *World) {
			addOp(w, opAt(7, OpPay, "o1", "k1", 300, 320, 202, orderBody("o1", "processing", "12.30", "k1", "0.00")))
		}},
		{"the sweep hears no final answer", InvPendingFirst, func(w *World) {
			op := opIndex(w, 21)
			op.Status, op.Body, op.RetryAfter = 409, problemBody(409, "idempotency_key_in_use", "y"), "1"
		}},
		{"a 200 before the charge", InvNoUnpaid200, func(w *World) { w.Charges[0].Created = atMS(280) }},
		{"a 200 explained by a charge of unknown time", InvNoUnpaid200, func(w *World) { w.Charges[0].Created = time.Time{} }},
		{"a 500", InvNo5xx, func(w *World) {
			addOp(w, opAt(7, OpRead, "o2", "", 70, 80, 500, problemBody(500, "internal_error", "z")))
		}},
		{"a 503 without Retry-After", InvNo5xx, func(w *World) { opIndex(w, 12).RetryAfter = "" }},
		{"a 200 for a charge of other money", InvPayExplained, func(w *World) {
			addOp(w, opAt(7, OpPay, "o5", "k5", 0, 10, 200, orderBody("o5", "paid", "3.00", "k5", "0.00")))
			w.Charges = append(w.Charges, Charge{ID: "ch5", OrderID: "o5", Amount: decOf("2.00"), Succeeded: true, Created: atMS(5)})
		}},
		{"a 202 that is not this request's", InvPayExplained, func(w *World) {
			opIndex(w, 2).Body = orderBody("o1", "processing", "12.30", "k-other", "0.00")
		}},
		{"paid, then pending", InvLinearizable, func(w *World) {
			addOp(w, opAt(7, OpRead, "o1", "", 400, 410, 200, orderBody("o1", "pending", "12.30", "", "0.00")))
		}},
		{"a payment told twice", InvOneEvent, func(w *World) {
			o := w.Orders["o1"]
			o.Told = append(o.Told, Told{ID: "e9", Type: domain.NotifyOrderPaid, Seq: 4, Status: domain.StatusPaid})
			w.Orders["o1"] = o
		}},
		{"a payment never told", InvOneEvent, func(w *World) {
			o := w.Orders["o1"]
			o.Told = nil
			w.Orders["o1"] = o
			w.Merchant.Arrivals = w.Merchant.Arrivals[1:] // nor heard by the merchant
		}},
		{"a refund booked but not told", InvOneEvent, func(w *World) {
			o := w.Orders["o3"]
			o.RefundsBooked = 2
			w.Orders["o3"] = o
		}},
		{"a change that rolled back, told", InvOneEvent, func(w *World) {
			o := w.Orders["o2"]
			o.Told = append([]Told{{ID: "e9", Type: domain.NotifyOrderPaid, Seq: 1, Status: domain.StatusPaid}}, o.Told...)
			w.Orders["o2"] = o
			w.Merchant.Shown["e9"] = domain.DeliveryFailed // the merchant's order of events is not this case's
		}},
		{"two events of one version", InvOneEvent, func(w *World) {
			o := w.Orders["o3"]
			o.Told[1].Seq = o.Told[0].Seq
			w.Orders["o3"] = o
		}},
		{"an event that shows another status", InvOneEvent, func(w *World) {
			o := w.Orders["o4"]
			o.Told[0].Status = domain.StatusPaid
			w.Orders["o4"] = o
		}},
		{"a decline told twice", InvOneEvent, func(w *World) {
			o := w.Orders["o4"]
			o.Told = append(o.Told, Told{ID: "e9", Type: domain.NotifyOrderPaymentFailed, Seq: 5, Status: domain.StatusPending})
			w.Orders["o4"] = o
		}},
		{"a paid order last told it was declined", InvOneEvent, func(w *World) {
			o := w.Orders["o1"]
			o.Told = append(o.Told, Told{ID: "e9", Type: domain.NotifyOrderPaymentFailed, Seq: 5, Status: domain.StatusPending})
			o.Attempts = 2
			w.Orders["o1"] = o
		}},
		{"an event neither delivered nor shown", InvDelivered, func(w *World) {
			delete(w.Merchant.Shown, "e4")
		}},
		{"an event delivered only unsigned", InvDelivered, func(w *World) {
			w.Merchant.Arrivals[0].Verified = false
		}},
		{"an event shown delivered that never arrived", InvDelivered, func(w *World) {
			w.Merchant.Arrivals = w.Merchant.Arrivals[1:]
			w.Merchant.Shown["e1"] = domain.DeliveryDelivered
		}},
		{"one webhook-id, two bodies", InvDelivered, func(w *World) {
			w.Merchant.Arrivals[3].BodyHash = "h3-other"
		}},
		{"an invented event", InvDelivered, func(w *World) {
			w.Merchant.Arrivals = append(w.Merchant.Arrivals, arrival("e-none", "o1", "h9", 500, "payd-1"))
		}},
		{"an invented event, before its order was read", InvDelivered, func(w *World) {
			o := w.Orders["o1"]
			o.ReadAt = atMS(2000)
			w.Orders["o1"] = o
			w.Merchant.Arrivals = append(w.Merchant.Arrivals, arrival("e-none", "o1", "h9", 1999, "payd-1"))
		}},
		{"a body naming another event", InvDelivered, func(w *World) {
			w.Merchant.Arrivals[0].EventID = "e2"
		}},
		{"a refund before its payment", InvDelivered, func(w *World) {
			w.Merchant.Arrivals = append(w.Merchant.Arrivals, arrival("e4", "o3", "h4", 10, "payd-2"))
			delete(w.Merchant.Shown, "e4")
		}},
		{"a refund arrived, its payment never", InvDelivered, func(w *World) {
			w.Merchant.Arrivals = append(w.Merchant.Arrivals[:2], arrival("e4", "o3", "h4", 70, "payd-2"), w.Merchant.Arrivals[4])
			w.Merchant.Shown = map[string]domain.DeliveryStatus{"e3": domain.DeliveryPending}
		}},
		{"a reservation told as money, then refused", InvConfirmedMoney, func(w *World) {
			// o3's 5.00 refund was told with 4.00 more in flight, which
			// the provider then refused.
			w.Orders["o3"].Told[1].Amounts = told("9.00", "12.30", "5.00")
		}},
		{"the shop heard a reservation as money", InvConfirmedMoney, func(w *World) {
			w.Merchant.Arrivals[3].Amounts = &Amounts{Refunded: decOf("4.00"), Books: Money{Charged: decOf("12.30")}}
		}},
		{"a ledger refund the provider never made", InvConfirmedMoney, func(w *World) {
			w.Orders["o3"].Told[1].Amounts = told("5.00", "12.30", "7.00")
		}},
		{"a charge the provider never made", InvConfirmedMoney, func(w *World) {
			w.Orders["o1"].Told[0].Amounts = told("0.00", "24.60", "0.00")
			bodiesAsTold(w)
		}},
		{"an arrival whose amounts cannot be read", InvConfirmedMoney, func(w *World) {
			w.Merchant.Arrivals[0].Amounts = nil
		}},
		{"stock below 0", InvStock, func(w *World) { w.Stock[0].Left, w.Stock[0].Shown, w.Stock[0].Received = -1, new(int64(-1)), 1 }},
		{"a cancelled order's units given back twice", InvStock, func(w *World) { w.Stock[0].Left, w.Stock[0].Shown = 9, new(int64(9)) }},
		{"a cancelled order's units never given back", InvStock, func(w *World) { w.Stock[0].Left, w.Stock[0].Shown = 7, new(int64(7)) }},
		{"units sold by an order that is not cancelled, but given back", InvStock, func(w *World) { delete(w.Stock[0].Closed, "o2"); w.Stock[0].Closed["o1"] = true }},
		{"the storefront shows another count", InvStock, func(w *World) { w.Stock[0].Shown = new(int64(7)) }},
		{"the storefront shows no count", InvStock, func(w *World) { w.Stock[0].Shown = nil }},
		{"a line shipped past its quantity", InvShipped, func(w *World) {
			o := w.Orders["o3"]
			o.Lines[0].Shipped, o.Shipments[0].Units["usd-12.30"] = 2, 2
			w.Orders["o3"] = o
		}},
		{"lines and shipments disagree", InvShipped, func(w *World) {
			o := w.Orders["o3"]
			o.Shipments = append(o.Shipments, Shipment{ID: "sh2", Key: "s4", Units: map[string]int64{"usd-12.30": 1}})
			o.Told = append(o.Told, Told{ID: "e7", Type: domain.NotifyOrderShipped, Seq: 7, Status: domain.StatusPaid, Amounts: told("5.00", "12.30", "5.00")})
			w.Orders["o3"] = o
			w.Merchant.Shown["e7"] = domain.DeliveryPending
		}},
		{"a key shipped twice", InvShipped, func(w *World) {
			o := w.Orders["o3"]
			o.Lines = []Line{{SKU: "usd-12.30", Quantity: 2, Shipped: 2}}
			o.Shipments = append(o.Shipments, Shipment{ID: "sh2", Key: "s3", Units: map[string]int64{"usd-12.30": 1}})
			o.Told = append(o.Told, Told{ID: "e7", Type: domain.NotifyOrderShipped, Seq: 7, Status: domain.StatusPaid, Amounts: told("5.00", "12.30", "5.00")})
			w.Orders["o3"] = o
			w.Merchant.Shown["e7"] = domain.DeliveryPending
		}},
		{"a key that shipped, last answered as if nothing had", InvShipped, func(w *World) {
			// The first answer was lost; the sweep ran the request again and
			// shipped nothing more, but answered 400 where the key had
			// shipped.
			first := opIndex(w, 22)
			first.Status, first.Body, first.Err = 0, nil, "read: connection reset by peer"
			op := opIndex(w, 24)
			op.Status, op.Body = 400, problemBody(400, "validation_failed", "x7")
		}},
		{"a fulfilment its lines do not say", InvShipped, func(w *World) {
			o := w.Orders["o1"]
			o.Fulfillment = domain.FulfillmentPartiallyShipped
			w.Orders["o1"] = o
		}},
		{"a shipment answered 201 the order does not hold", InvShipped, func(w *World) {
			o := w.Orders["o3"]
			o.Shipments[0].ID = "sh9"
			w.Orders["o3"] = o
		}},
		{"a cancelled order shipped", InvShipped, func(w *World) {
			o := w.Orders["o2"]
			o.Lines[0].Shipped, o.Fulfillment = 1, domain.FulfillmentShipped
			o.Shipments = []Shipment{{ID: "sh5", Units: map[string]int64{o.Lines[0].SKU: 1}}}
			o.Told = append(o.Told, Told{ID: "e8", Type: domain.NotifyOrderShipped, Seq: 3, Status: domain.StatusPaid})
			w.Orders["o2"] = o
			w.Merchant.Shown["e8"] = domain.DeliveryPending
		}},
		{"a shipment never told", InvOneEvent, func(w *World) {
			o := w.Orders["o3"]
			o.Told = o.Told[:2]
			w.Orders["o3"] = o
		}},
		{"a creation answered 201 took fewer units than it asked", InvStock, func(w *World) {
			w.Stock[0].Taken["o1"], w.Stock[0].Left, w.Stock[0].Shown = 1, 9, new(int64(9))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := cleanWorld()
			tt.mutate(&w)
			r := Check(w)
			if len(r.Violations) == 0 {
				t.Fatalf("Check = no violation, want %s", tt.want)
			}
			for _, v := range r.Violations {
				if v.Invariant != tt.want {
					t.Errorf("violation %s (%s), want only %s", v.Invariant, v.Detail, tt.want)
				}
				if len(v.Slice) == 0 {
					t.Errorf("violation %s has an empty slice", v.Invariant)
				}
			}
			if r.Err() == nil {
				t.Error("Err() = nil with violations")
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		kind       OpKind
		status     int
		retryAfter string
		code       string
		want       answerClass
	}{
		{OpPay, 0, "", "", ansNone},
		{OpPay, 503, "1", "service_unavailable", ansTransient},
		{OpPay, 503, "", "service_unavailable", ansRetryable},
		{OpPay, 429, "1", "rate_limited", ansTransient},
		{OpPay, 202, "2", "", ansPending},
		{OpPay, 409, "3", "idempotency_key_in_use", ansPending},
		{OpPay, 409, "", "order_already_paid", ansRetryable},
		{OpPay, 402, "", "card_declined", ansRetryable},
		{OpPay, 422, "", "idempotency_key_reused", ansRetryable},
		{OpPay, 200, "", "", ansBinding},
		{OpRefund, 502, "", "refund_refused", ansBinding},
		{OpRefund, 503, "2", "payment_outcome_unknown", ansRetryable},
		{OpPay, 502, "", "payment_amount_mismatch", ansRetryable},
	}
	for _, tt := range tests {
		op := Op{Kind: tt.kind, Status: tt.status, RetryAfter: tt.retryAfter}
		if tt.code != "" {
			op.Body = problemBody(tt.status, tt.code, "r")
		}
		if got := classOf(op); got != tt.want {
			t.Errorf("classOf(%s %d %s RA=%q) = %s, want %s", tt.kind, tt.status, tt.code, tt.retryAfter, got, tt.want)
		}
	}
}

// TestCheckEventAfterTheRead: payd goes on working while the checker
// reads it (an order expires, the shop is told), so an arrival of an
// event the order's timeline did not hold when it was read is no
// invention if it came after that read; it is counted, not judged.
func TestCheckEventAfterTheRead(t *testing.T) {
	w := cleanWorld()
	o := w.Orders["o4"]
	o.ReadAt = atMS(2000)
	w.Orders["o4"] = o
	w.Merchant.Arrivals = append(w.Merchant.Arrivals, arrival("e-later", "o4", "h9", 2001, "payd-1"))
	r := Check(w)
	if err := r.Err(); err != nil {
		t.Fatalf("Check = %v, want no violation", err)
	}
	if r.Delivered == nil || r.Delivered.Late != 1 {
		t.Fatalf("Delivered = %+v, want 1 arrival after the read", r.Delivered)
	}
	if got := Summary("sqlite", 7, nil, nil, r); !strings.Contains(got, "arrivals 6 (1 again, 1 after payd was read)") {
		t.Errorf("Summary = %s, want it to count the arrival after the read", got)
	}
}

func TestCheckDeclineThenSuccessUnderOneKey(t *testing.T) {
	// A declined key runs again: its later success is the key's answer,
	// and a 202 of the new execution comes before it, legitimately.
	paid := orderBody("o1", "paid", "5.00", "k1", "0.00")
	w := World{
		Ops: []Op{
			opAt(1, OpPay, "o1", "k1", 0, 10, 402, problemBody(402, "card_declined", "a")),
			opAt(1, OpPay, "o1", "k1", 20, 30, 202, orderBody("o1", "processing", "5.00", "k1", "0.00")),
			opAt(1, OpPay, "o1", "k1", 40, 50, 200, paid),
			sweep(opAt(1, OpPay, "o1", "k1", 60, 70, 200, paid)),
		},
		Charges: []Charge{{ID: "ch", OrderID: "o1", Amount: decOf("5.00"), Succeeded: true, Created: atMS(35)}},
		Orders: map[string]OrderState{"o1": {ID: "o1", Status: domain.StatusPaid, Amount: decOf("5.00"), Attempts: 2,
			Told: []Told{{ID: "e1", Type: domain.NotifyOrderPaymentFailed, Seq: 3, Status: domain.StatusPending}, {ID: "e2", Type: domain.NotifyOrderPaid, Seq: 5, Status: domain.StatusPaid}}}},
	}
	for i := range w.Ops {
		w.Ops[i].ID = i + 1
	}
	if err := Check(w).Err(); err != nil {
		t.Fatalf("Check = %v, want no violation", err)
	}
	// The same history with a decline after the success breaks the key's promise.
	addOp(&w, opAt(1, OpPay, "o1", "k1", 80, 90, 402, problemBody(402, "card_declined", "b")))
	r := Check(w)
	// Its slice is the smallest that shows it: the key's first final
	// answer and the answer that contradicts it, not the key's 5 ops.
	if len(r.Violations) != 1 || r.Violations[0].Invariant != InvSameFinal || !sliceIDs(r.Violations[0].Slice, 3, 5) {
		t.Fatalf("Check = %v, want one %s violation over #3 and #5", r.Err(), InvSameFinal)
	}
	// Another wrong answer under the key adds to that violation.
	addOp(&w, opAt(1, OpPay, "o1", "k1", 100, 110, 402, problemBody(402, "card_declined", "c")))
	r = Check(w)
	if len(r.Violations) != 1 || !sliceIDs(r.Violations[0].Slice, 3, 5, 6) || !strings.Contains(r.Violations[0].Detail, "#6") {
		t.Fatalf("Check = %v, want one %s violation over #3, #5 and #6", r.Err(), InvSameFinal)
	}
}

// TestCheckKeySliceWithoutAFinal: a pending answer that breaks the rules
// under a key with no final answer yet is shown alone.
func TestCheckKeySliceWithoutAFinal(t *testing.T) {
	w := cleanWorld()
	for i := range 6 {
		addOp(&w, opAt(3, OpPay, "o9", "k9", 1000+10*i, 1005+10*i, 409, problemBody(409, "idempotency_key_in_use", "x")))
	}
	bad := opAt(3, OpPay, "o9", "k9", 1100, 1110, 202, orderBody("o9", "processing", "1.00", "k9", "0.00"))
	bad.RetryAfter = "" // a 202 must say when to ask again
	addOp(&w, bad)
	var got []Violation
	for _, v := range Check(w).Violations {
		if v.Invariant == InvPendingFirst {
			got = append(got, v)
		}
	}
	id := w.Ops[len(w.Ops)-1].ID
	if len(got) != 1 || !sliceIDs(got[0].Slice, id) {
		t.Fatalf("%s violations = %+v, want one over #%d alone", InvPendingFirst, got, id)
	}
}

// sliceIDs reports whether slice holds exactly the ops with these ids, in
// this order.
func sliceIDs(slice []Op, ids ...int) bool {
	if len(slice) != len(ids) {
		return false
	}
	for i, op := range slice {
		if op.ID != ids[i] {
			return false
		}
	}
	return true
}

// TestCheckBooksNameTheOrders: when payd's books and the provider's
// differ, the violation names the orders whose own books differ: one
// whose ledger lacks its charge, and one the provider charged that payd
// was never read for.
func TestCheckBooksNameTheOrders(t *testing.T) {
	w := cleanWorld()
	o := w.Orders["o3"]
	o.Books.Charged = decOf("0")
	w.Orders["o3"] = o
	w.Payd.Charged = decOf("12.30")
	w.Charges = append(w.Charges, Charge{ID: "ch7", OrderID: "o7", Amount: decOf("3.00"), Succeeded: true, Created: atMS(30)})
	w.Provider.Charged = decOf("27.60")
	var books []Violation
	for _, v := range Check(w).Violations {
		if v.Invariant == InvBooks {
			books = append(books, v)
		}
	}
	if len(books) != 1 {
		t.Fatalf("violations of %s = %+v, want one", InvBooks, books)
	}
	for _, want := range []string{
		"order o3 (paid, 12.3): its ledger says charged 0 refunded 5, the provider charged 12.3 refunded 5",
		"order o7: the provider charged 3 refunded 0, and payd's view of it was never read",
	} {
		if !strings.Contains(books[0].Detail, want) {
			t.Errorf("detail = %q, want it to say %q", books[0].Detail, want)
		}
	}
	if strings.Contains(books[0].Detail, "order o1") {
		t.Errorf("detail = %q names o1, whose books agree", books[0].Detail)
	}
}
