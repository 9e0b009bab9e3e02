package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/nemesis"
)

// The final reads the checker judges: the provider's books, payd's view
// of every order, and the merchant's (nemesis_merchant_test.go).

// world is what the checker is given: the history, the provider's books
// (the sandbox's charges and their refunds) and payd's final view of each
// order with its money (GET /v1/admin/orders/{id}).
func (w *nemWorkload) world(setup string, seed int64) nemesis.World {
	t := w.t
	wd := nemesis.World{Setup: setup, Seed: seed, Ops: w.hist.Ops(), Orders: map[string]nemesis.OrderState{}}
	if setup == "mysql" {
		wd.MySQLDSN = os.Getenv(dbtest.EnvMySQL) // the replay command names it
	}
	if w.s.stripe != nil {
		wd.Charges = w.s.stripe.books(t)
	} else {
		charges, err := w.s.prov.sb.Charges(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range charges {
			wd.Charges = append(wd.Charges, nemesis.Charge{ID: c.ID, OrderID: c.OrderID, Key: c.IdempotencyKey, Amount: c.Amount,
				Succeeded: c.Status == domain.ChargeSucceeded, Refunded: c.RefundedAmount, Created: c.CreatedAt})
		}
	}
	for _, ch := range wd.Charges {
		if ch.Succeeded {
			wd.Provider.Charged = wd.Provider.Charged.Add(ch.Amount)
			wd.Provider.Refunded = wd.Provider.Refunded.Add(ch.Refunded)
		}
	}
	// Every order the clients made, and every order the provider charged
	// that they never heard of: a charge for one would be money payd's
	// books must hold as well.
	ids := w.orderIDs()
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	for _, ch := range wd.Charges {
		if ch.OrderID != "" && !known[ch.OrderID] {
			known[ch.OrderID] = true
			ids = append(ids, ch.OrderID)
		}
	}
	tls, readAt := make([]client.Timeline, len(ids)), make([]time.Time, len(ids))
	forEach(nemClients, len(ids), func(i int) {
		readAt[i] = time.Now() // payd goes on working meanwhile: what reached the shop after this may be newer than the read
		tls[i] = w.s.reps[i%len(w.s.reps)].current().timeline(ids[i])
	})
	for i, id := range ids {
		tl := tls[i]
		st := nemesis.OrderState{ID: id, Status: domain.OrderStatus(tl.Order.Status), ReadAt: readAt[i],
			Amount: nemDecimal(t, string(tl.Order.Amount)), Refunded: nemDecimal(t, string(tl.Order.RefundedAmount))}
		if tl.Order.PayRequestId != nil {
			for _, a := range tl.Attempts {
				if a.RequestId == *tl.Order.PayRequestId && a.Status == "succeeded" && a.ProviderChargeId != nil {
					st.ChargeID = *a.ProviderChargeId
				}
			}
		}
		// The order's outbox events, and what they must tell
		// (nemesis.InvOneEvent), the merchant must have heard
		// (nemesis.InvDelivered) and the provider must have confirmed
		// (nemesis.InvConfirmedMoney).
		for _, e := range tl.Events {
			st.Told = append(st.Told, nemesis.Told{ID: e.Id, Type: domain.NotifyType(e.Type), Seq: e.Seq, Status: domain.OrderStatus(e.OrderStatus),
				Amounts: nemesis.Amounts{Refunded: nemDecimal(t, e.RefundedAmount),
					Books: nemesis.Money{Charged: nemDecimal(t, e.Money.Charged), Refunded: nemDecimal(t, e.Money.Refunded)}}})
		}
		for _, e := range tl.Ledger {
			if e.Kind == client.LedgerEntryKindRefund || e.Kind == client.LedgerEntryKindOutsideRefund {
				st.RefundsBooked++
			}
		}
		st.Attempts = len(tl.Attempts)
		st.Books = nemesis.Money{Charged: nemDecimal(t, tl.Order.Money.Charged), Refunded: nemDecimal(t, tl.Order.Money.Refunded)}
		wd.Orders[id] = st
		wd.Payd.Charged = wd.Payd.Charged.Add(st.Books.Charged)
		wd.Payd.Refunded = wd.Payd.Refunded.Add(st.Books.Refunded)
	}
	w.shipments(wd.Orders)
	wd.Merchant = w.merchant() // after the timelines: every event it heard of is one they hold
	wd.Stock = []nemesis.Stock{w.stock()}
	return wd
}

// stock is the counted product as payd holds it once the world settled:
// what is left, in the database and on the storefront, and what each
// order's lines took of it, every order in the database, those the
// clients never heard of included (a creation whose answer was lost).
func (w *nemWorkload) stock() nemesis.Stock {
	t, ctx := w.t, context.Background()
	st := nemesis.Stock{SKU: w.counted, Received: nemStockUnits, Taken: map[string]int64{}, Closed: map[string]bool{}}
	g := w.s.db.Gorm().WithContext(ctx)
	var left sql.NullInt64
	if err := g.Raw("SELECT stock FROM products WHERE sku = ?", w.counted).Row().Scan(&left); err != nil || !left.Valid {
		t.Fatalf("the stock of %s: %v (counted: %v)", w.counted, err, left.Valid)
	}
	st.Left = left.Int64
	rows, err := g.Raw(`SELECT i.order_id, o.status, SUM(i.stock_taken) FROM order_items i JOIN orders o ON o.id = i.order_id
		WHERE i.sku = ? AND i.stock_taken > 0 GROUP BY i.order_id, o.status`, w.counted).Rows()
	if err != nil {
		t.Fatalf("the orders that took %s: %v", w.counted, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var took int64
		if err := rows.Scan(&id, &status, &took); err != nil {
			t.Fatal(err)
		}
		st.Taken[id] = took
		st.Closed[id] = status == string(domain.StatusCancelled) || status == string(domain.StatusExpired)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The storefront's count, GET /v1/products/{sku} with no token, from
	// each replica in turn until one answers.
	for i := range 3 * len(w.s.reps) {
		rep, err := w.roundTrip(w.s.reps[i%len(w.s.reps)].base, http.MethodGet, "/v1/products/"+w.counted, "", "", nil)
		if err == nil && rep.Status == http.StatusOK {
			var p client.Product
			if err := json.Unmarshal(rep.Body, &p); err != nil {
				t.Fatalf("GET /v1/products/%s: %v", w.counted, err)
			}
			st.Shown = p.Stock
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return st
}

// shipments adds to each order its fulfilment, its lines' shipped counts
// and its shipments, as payd's database holds them once the world
// settled (nemesis.InvShipped).
func (w *nemWorkload) shipments(orders map[string]nemesis.OrderState) {
	t, g := w.t, w.s.db.Gorm().WithContext(context.Background())
	var fulfil []struct {
		ID                string
		FulfillmentStatus string
	}
	scanRows(t, w.s.db, &fulfil, "SELECT id, fulfillment_status FROM orders")
	for _, f := range fulfil {
		if o, ok := orders[f.ID]; ok {
			o.Fulfillment = domain.FulfillmentStatus(f.FulfillmentStatus)
			orders[f.ID] = o
		}
	}
	var lines []struct {
		OrderID           string
		SKU               string
		Quantity, Shipped int64
	}
	if err := g.Raw("SELECT order_id, sku, quantity, shipped FROM order_items ORDER BY order_id, position").Scan(&lines).Error; err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if o, ok := orders[l.OrderID]; ok {
			o.Lines = append(o.Lines, nemesis.Line{SKU: l.SKU, Quantity: l.Quantity, Shipped: l.Shipped})
			orders[l.OrderID] = o
		}
	}
	var units []struct {
		OrderID, ID, RequestKey, SKU string
		Quantity                     int64
	}
	if err := g.Raw(`SELECT s.order_id, s.id, COALESCE(s.request_key, '') AS request_key, i.sku, i.quantity FROM shipments s JOIN shipment_items i ON i.shipment_id = s.id
		ORDER BY s.order_id, s.created_at, s.id, i.position`).Scan(&units).Error; err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		o, ok := orders[u.OrderID]
		if !ok {
			continue
		}
		if n := len(o.Shipments); n == 0 || o.Shipments[n-1].ID != u.ID {
			o.Shipments = append(o.Shipments, nemesis.Shipment{ID: u.ID, Key: u.RequestKey, Units: map[string]int64{}})
		}
		o.Shipments[len(o.Shipments)-1].Units[u.SKU] += u.Quantity
		orders[u.OrderID] = o
	}
}

func nemDecimal(t *testing.T, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatalf("%q is not an amount: %v", s, err)
	}
	return d
}
