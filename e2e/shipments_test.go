package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestShipments (ADR 0060): the merchant ships a paid order in parts.
// Each shipment is 201 with its lines, a repeat of its key is the same
// answer, more than ordered in all shipments together is 400 and writes
// nothing, only a paid order ships, only the merchant ships; the order
// shows its fulfilment and its shipments, and every shipment reaches the
// shop as order.shipped naming it.
func TestShipments(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		s := start(t, on(dialect), withEnv(notifyEnv(rcv)))
		s.newProduct("mug", "12.00", 5)
		s.newProduct("tea", "4.00", nil)
		_, tok := s.register(newEmail())
		r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(),
			`{"currency":"USD","items":[{"sku":"mug","quantity":3},{"name":"Gift wrap","quantity":1,"unit_price":"2.50"},{"sku":"tea","quantity":1}]}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("merchant's order = %d %s", r.Status, r.Body)
		}
		o := r.json(t)
		id, secret := o["id"].(string), o["client_secret"].(string)
		if o["fulfillment_status"] != "unfulfilled" {
			t.Errorf("a new order's fulfillment_status = %v, want unfulfilled", o["fulfillment_status"])
		}
		path := "/v1/orders/" + id + "/shipments"

		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusConflict || r.problemCode() != "order_not_paid" {
			t.Fatalf("a shipment of an unpaid order = %d %s, want 409 order_not_paid", r.Status, r.Body)
		}
		if p := s.pay(secret, id, uuid.NewString(), "pm_ok"); p.Status != http.StatusOK {
			t.Fatalf("pay = %d %s", p.Status, p.Body)
		}
		for _, who := range []string{tok, secret} {
			if r := s.do(request{method: "POST", path: path, token: who, key: uuid.NewString(), body: `{"items":[{"sku":"mug","quantity":1}]}`}); r.Status != http.StatusForbidden && r.Status != http.StatusUnauthorized {
				t.Errorf("a buyer's shipment = %d %s, want 401 or 403", r.Status, r.Body)
			}
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/orders/"+uuid.NewString()+"/shipments", uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusNotFound {
			t.Errorf("a shipment of an unknown order = %d %s, want 404", r.Status, r.Body)
		}

		key := uuid.NewString()
		first := s.merchant(testMerchantKey, "POST", path, key, `{"items":[{"sku":"mug","quantity":2}],"carrier":"DHL","tracking_number":"JD014600006281"}`)
		if first.Status != http.StatusCreated {
			t.Fatalf("first shipment = %d %s, want 201", first.Status, first.Body)
		}
		sh := first.json(t)
		if sh["order_id"] != id || sh["carrier"] != "DHL" || sh["tracking_number"] != "JD014600006281" || !strings.Contains(string(first.Body), `"items":[{"sku":"mug","quantity":2}]`) {
			t.Errorf("first shipment = %s", first.Body)
		}
		again := s.merchant(testMerchantKey, "POST", path, key, `{"items":[{"sku":"mug","quantity":2}],"carrier":"DHL","tracking_number":"JD014600006281"}`)
		if again.Status != http.StatusCreated || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the shipment's key again = %d %s (replayed %q), want the first answer", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}

		// The first answer lost before it was stored (its record gone, as
		// after a takeover or a kill after COMMIT): the request runs
		// again, finds its shipment, and ships nothing more.
		s.exec("DELETE FROM idempotency_records WHERE idem_key = ?", key)
		rerun := s.merchant(testMerchantKey, "POST", path, key, `{"items":[{"sku":"mug","quantity":2}],"carrier":"DHL","tracking_number":"JD014600006281"}`)
		if n := s.count("shipments WHERE order_id = ?", id); rerun.Status != http.StatusCreated || rerun.json(t)["id"] != sh["id"] || n != 1 {
			t.Errorf("the request run again = %d %s with %d shipments, want 201 with shipment %v and one shipment", rerun.Status, rerun.Body, n, sh["id"])
		}
		if r := s.merchant(testMerchantKey, "POST", path, key, `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusUnprocessableEntity || r.problemCode() != "idempotency_key_reused" {
			t.Errorf("the shipment's key with another body = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}

		before := s.count("shipments")
		for _, c := range []struct{ body, field string }{
			{`{"items":[{"sku":"mug","quantity":2}]}`, "items[0].quantity"},                                              // 1 mug left
			{`{"items":[{"sku":"mug","quantity":1},{"sku":"mug","quantity":1}]}`, "items[1].quantity"},                   // the same, in two lines
			{`{"items":[{"sku":"mug","quantity":1},{"sku":"mug","quantity":9223372036854775807}]}`, "items[1].quantity"}, // past int64
			{`{"items":[{"sku":"pen","quantity":1}]}`, "items[0].sku"},                                                   // not in the order
			{`{"items":[{"sku":"Gift wrap","quantity":1}]}`, "items[0].sku"},                                             // a custom line has no SKU
			{`{"items":[]}`, "items"}, // nothing
			{`{"items":[{"sku":"mug","quantity":0}]}`, "items[0].quantity"},                                    // no units
			{`{"items":[{"sku":"mug","quantity":1.5}]}`, "items[0].quantity"},                                  // half a mug
			{`{"items":[{"sku":"mug","quantity":1}],"carrier":"` + strings.Repeat("x", 201) + `"}`, "carrier"}, // too long
			{`{"items":[{"sku":"mug","quantity":1}],"unknown":true}`, "unknown"},                               // a field payd does not know
		} {
			r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), c.body)
			if f := problemFields(t, r); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" || !slices.Contains(f, c.field) {
				t.Errorf("shipment %s = %d %s, want 400 validation_failed naming %s", c.body, r.Status, r.Body, c.field)
			}
		}
		if n := s.count("shipments"); n != before {
			t.Fatalf("refused shipments wrote %d shipments", n-before)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: secret}); r.json(t)["fulfillment_status"] != "partially_shipped" {
			t.Errorf("after one of two shipments the order = %s, want partially_shipped", r.Body)
		}

		last := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"items":[{"sku":"tea","quantity":1},{"sku":"mug","quantity":1}]}`)
		if last.Status != http.StatusCreated {
			t.Fatalf("last shipment = %d %s, want 201", last.Status, last.Body)
		}
		got := s.do(request{method: "GET", path: "/v1/orders/" + id, token: testMerchantKey})
		var view struct {
			Status            string `json:"status"`
			FulfillmentStatus string `json:"fulfillment_status"`
			Shipments         []struct {
				ID    string `json:"id"`
				Items []struct {
					SKU      string `json:"sku"`
					Quantity int64  `json:"quantity"`
				} `json:"items"`
			} `json:"shipments"`
		}
		if err := json.Unmarshal(got.Body, &view); err != nil {
			t.Fatal(err)
		}
		if view.Status != "paid" || view.FulfillmentStatus != "shipped" || len(view.Shipments) != 2 ||
			view.Shipments[0].ID != sh["id"] || view.Shipments[1].ID != last.json(t)["id"] {
			t.Errorf("the shipped order = %s, want paid, shipped, with both shipments in order", got.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusBadRequest {
			t.Errorf("a shipment of a shipped order = %d %s, want 400", r.Status, r.Body)
		}

		// The operators' view: the order with its shipments, each on the
		// timeline, and the merchant's calls on the audit trail.
		var timeline struct {
			Order struct {
				FulfillmentStatus string            `json:"fulfillment_status"`
				Shipments         []json.RawMessage `json:"shipments"`
			} `json:"order"`
			Timeline []struct {
				Kind    string `json:"kind"`
				Summary string `json:"summary"`
			} `json:"timeline"`
		}
		if r := s.admin("GET", "/v1/admin/orders/"+id, "", nil); r.Status != http.StatusOK || json.Unmarshal(r.Body, &timeline) != nil {
			t.Fatalf("admin order = %d %s", r.Status, r.Body)
		}
		var onTimeline []string
		for _, e := range timeline.Timeline {
			if e.Kind == "shipment" {
				onTimeline = append(onTimeline, e.Summary)
			}
		}
		if timeline.Order.FulfillmentStatus != "shipped" || len(timeline.Order.Shipments) != 2 ||
			strings.Join(onTimeline, "; ") != "shipped 2 × mug (DHL JD014600006281); shipped 1 × tea, 1 × mug" {
			t.Errorf("admin order: %s with %d shipments, timeline %q", timeline.Order.FulfillmentStatus, len(timeline.Order.Shipments), onTimeline)
		}
		if n := s.count("audit_log WHERE action = 'ship_order' AND actor = 'merchant:default' AND order_id = ?", id); n < 4 {
			t.Errorf("%d ship_order entries on the audit trail, want every merchant call", n)
		}

		// A return: a refund after shipping is allowed and restocks nothing.
		var stock int64
		scanRows(t, s.db, &stock, "SELECT stock FROM products WHERE sku = 'mug'")
		if r := s.refund(id, uuid.NewString(), "12.00"); r.Status != http.StatusOK {
			t.Fatalf("a refund of a shipped order = %d %s, want 200", r.Status, r.Body)
		}
		var after int64
		scanRows(t, s.db, &after, "SELECT stock FROM products WHERE sku = 'mug'")
		if stock != 2 || after != stock {
			t.Errorf("mug stock %d before the refund, %d after; want 2 both times (5 less the order's 3)", stock, after)
		}
		// Refunded in full, it is no longer paid: nothing more ships.
		if r := s.refund(id, uuid.NewString(), ""); r.Status != http.StatusOK {
			t.Fatalf("the rest refunded = %d %s", r.Status, r.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusConflict || r.problemCode() != "order_not_paid" {
			t.Errorf("a shipment of a refunded order = %d %s, want 409 order_not_paid", r.Status, r.Body)
		}

		// The shop hears of each shipment, with the shipment and the
		// fulfilment it left.
		type told struct {
			Type  string `json:"type"`
			Order struct {
				FulfillmentStatus string `json:"fulfillment_status"`
			} `json:"order"`
			Shipment *struct {
				ID string `json:"id"`
			} `json:"shipment"`
		}
		var bodies []told
		eventually(t, 30*time.Second, "the order.shipped events were not delivered", func() bool {
			var rows []struct{ Body []byte }
			scanRows(t, s.db, &rows, `SELECT e.body FROM notify_events e JOIN notify_deliveries d ON d.event_id = e.id
				WHERE e.order_id = ? AND e.type = 'order.shipped' AND d.status = 'delivered' ORDER BY e.seq`, id)
			bodies = bodies[:0]
			for _, r := range rows {
				var b told
				if err := json.Unmarshal(r.Body, &b); err != nil {
					t.Fatalf("event body %s: %v", r.Body, err)
				}
				bodies = append(bodies, b)
			}
			return len(bodies) == 2
		})
		if bodies[0].Shipment == nil || bodies[0].Shipment.ID != sh["id"] || bodies[0].Order.FulfillmentStatus != "partially_shipped" ||
			bodies[1].Shipment == nil || bodies[1].Order.FulfillmentStatus != "shipped" {
			t.Errorf("order.shipped bodies = %+v", bodies)
		}
	})
}
