package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestHolds: a merchant's manual-capture order, over HTTP on both
// databases: the pay only authorizes it (nothing ships); the merchant
// captures part of it once (the same key answers the same, another is
// refused); refunds stop at what was captured; a cancel of another held
// order voids it and gives its stock back; and the shop is told of each
// step with the hold as the change left it.
func TestHolds(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		s := start(t, on(dialect), withEnv(notifyEnv(rcv)))
		s.newProduct("mug", "12.00", 5)
		create := func() (string, string) {
			t.Helper()
			r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), `{"items":[{"sku":"mug","quantity":2}],"capture_method":"manual"}`)
			if r.Status != http.StatusCreated {
				t.Fatalf("a manual order = %d %s", r.Status, r.Body)
			}
			o := r.json(t)
			if o["capture_method"] != "manual" || o["captured_amount"] != "0.00" || o["capture_before"] != nil {
				t.Errorf("a new manual order = %s", r.Body)
			}
			return o["id"].(string), o["client_secret"].(string)
		}
		id, secret := create()
		p := s.pay(secret, id, uuid.NewString(), "pm_ok")
		held := p.json(t)
		if p.Status != http.StatusOK || held["status"] != "authorized" || held["capture_before"] == nil || held["paid_at"] != nil {
			t.Fatalf("pay of a manual order = %d %s, want 200 authorized with capture_before", p.Status, p.Body)
		}
		if before, err := time.Parse(time.RFC3339Nano, held["capture_before"].(string)); err != nil || time.Until(before) < 6*24*time.Hour {
			t.Errorf("capture_before = %v (%v), want about 7 days on", held["capture_before"], err)
		}
		path := "/v1/orders/" + id + "/capture"
		if r := s.merchant(testMerchantKey, "POST", "/v1/orders/"+id+"/shipments", uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusConflict || r.problemCode() != "order_not_paid" {
			t.Errorf("a shipment of a held order = %d %s, want 409 order_not_paid", r.Status, r.Body)
		}
		if r := s.do(request{method: "POST", path: path, token: secret, key: uuid.NewString(), body: `{}`}); r.Status != http.StatusForbidden && r.Status != http.StatusUnauthorized {
			t.Errorf("a buyer's capture = %d %s, want 401 or 403", r.Status, r.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"amount":"24.01"}`); r.Status != http.StatusConflict || r.problemCode() != "capture_too_large" {
			t.Errorf("a capture of 24.01 of 24.00 = %d %s, want 409 capture_too_large", r.Status, r.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{"amount":"ten"}`); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
			t.Errorf("a capture of ten = %d %s, want 400 validation_failed", r.Status, r.Body)
		}
		key := uuid.NewString()
		first := s.merchant(testMerchantKey, "POST", path, key, `{"amount":"10.00"}`)
		paid := first.json(t)
		if first.Status != http.StatusOK || paid["status"] != "paid" || paid["captured_amount"] != "10.00" || paid["capture_before"] != nil || paid["paid_at"] == nil {
			t.Fatalf("a capture of 10.00 = %d %s, want 200 paid with 10.00 captured", first.Status, first.Body)
		}
		again := s.merchant(testMerchantKey, "POST", path, key, `{"amount":"10.00"}`)
		if again.Status != http.StatusOK || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the capture's key again = %d %s, want the first answer replayed", again.Status, again.Body)
		}
		// The answer lost before it was stored: the request runs again,
		// finds its own capture, and captures nothing more.
		s.exec("DELETE FROM idempotency_records WHERE idem_key = ?", key)
		if rerun := s.merchant(testMerchantKey, "POST", path, key, `{"amount":"10.00"}`); rerun.Status != http.StatusOK || rerun.json(t)["captured_amount"] != "10.00" {
			t.Errorf("the capture run again = %d %s, want 200 with 10.00 captured", rerun.Status, rerun.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", path, uuid.NewString(), `{}`); r.Status != http.StatusConflict || r.problemCode() != "order_not_capturable" {
			t.Errorf("a second capture = %d %s, want 409 order_not_capturable", r.Status, r.Body)
		}
		if n := s.count("hold_actions WHERE order_id = ? AND kind = 'capture' AND status = 'succeeded'", id); n != 1 {
			t.Errorf("%d captures succeeded, want 1", n)
		}
		if r := s.refund(id, uuid.NewString(), "10.01"); r.Status != http.StatusConflict || r.problemCode() != "refund_too_large" {
			t.Errorf("a refund of 10.01 of 10.00 captured = %d %s, want 409 refund_too_large", r.Status, r.Body)
		}
		if r := s.refund(id, uuid.NewString(), ""); r.Status != http.StatusOK {
			t.Errorf("a refund of what was captured = %d %s, want 200", r.Status, r.Body)
		} else if o := r.json(t)["order"].(map[string]any); o["status"] != "refunded" || o["refunded_amount"] != "10.00" {
			t.Errorf("after the refund of all that was captured the order = %v", o)
		}

		// A cancel of a held order voids its hold: cancelled, stock back.
		other, otherSecret := create()
		if p := s.pay(otherSecret, other, uuid.NewString(), "pm_ok"); p.Status != http.StatusOK || p.json(t)["status"] != "authorized" {
			t.Fatalf("pay = %d %s", p.Status, p.Body)
		}
		var stock int64
		scanRows(t, s.db, &stock, "SELECT stock FROM products WHERE sku = 'mug'")
		c := s.merchant(testMerchantKey, "POST", "/v1/orders/"+other+"/cancel", uuid.NewString(), `{}`)
		if c.Status != http.StatusOK || c.json(t)["status"] != "cancelled" {
			t.Fatalf("a cancel of a held order = %d %s, want 200 cancelled", c.Status, c.Body)
		}
		var after int64
		scanRows(t, s.db, &after, "SELECT stock FROM products WHERE sku = 'mug'")
		if stock != 1 || after != 3 {
			t.Errorf("mug stock %d before the cancel, %d after; want 1, then 3", stock, after)
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/orders/"+other+"/capture", uuid.NewString(), `{}`); r.Status != http.StatusConflict || r.problemCode() != "order_not_capturable" {
			t.Errorf("a capture of a voided hold = %d %s, want 409 order_not_capturable", r.Status, r.Body)
		}

		// The shop is told: authorized (its hold), then paid (what was
		// captured, and booked as charged), then refunded; authorized,
		// then cancelled.
		type told struct {
			Type  string `json:"type"`
			Order struct {
				Status         string  `json:"status"`
				CapturedAmount string  `json:"captured_amount"`
				CaptureBefore  *string `json:"capture_before"`
				Money          struct {
					Authorized string `json:"authorized"`
					Charged    string `json:"charged"`
				} `json:"money"`
			} `json:"order"`
		}
		want := map[string][]string{id: {"order.authorized authorized 0.00 held 24.00", "order.paid paid 10.00 charged 10.00", "order.refunded refunded 10.00"},
			other: {"order.authorized authorized 0.00 held 24.00", "order.cancelled cancelled 0.00"}}
		for order, steps := range want {
			var got []string
			eventually(t, 30*time.Second, "the hold's events were not delivered", func() bool {
				var rows []struct{ Body []byte }
				scanRows(t, s.db, &rows, `SELECT e.body FROM notify_events e JOIN notify_deliveries d ON d.event_id = e.id
					WHERE e.order_id = ? AND d.status = 'delivered' ORDER BY e.seq`, order)
				got = got[:0]
				for _, r := range rows {
					var b told
					if err := json.Unmarshal(r.Body, &b); err != nil {
						t.Fatalf("event body %s: %v", r.Body, err)
					}
					step := b.Type + " " + b.Order.Status + " " + b.Order.CapturedAmount
					if b.Order.CaptureBefore != nil {
						step += " held " + b.Order.Money.Authorized
					}
					if b.Type == "order.paid" {
						step += " charged " + b.Order.Money.Charged
					}
					got = append(got, step)
				}
				return len(got) >= len(steps)
			})
			if len(got) != len(steps) {
				t.Errorf("order %s: events %q, want %q", order, got, steps)
				continue
			}
			for i := range steps {
				if got[i] != steps[i] {
					t.Errorf("order %s: events %q, want %q", order, got, steps)
					break
				}
			}
		}
		if n := s.count("audit_log WHERE action = 'capture_order' AND actor = 'merchant:default' AND order_id = ?", id); n < 3 {
			t.Errorf("%d capture_order entries on the audit trail, want every merchant call", n)
		}
	})
}
