package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const (
	testNotifySecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oDv2QFTwQHbWc="
	otherSecret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
)

// hookShop is a shop with only its order book and webhook receiver, and
// what it printed.
func hookShop(t *testing.T, secrets ...string) (*shop, *bytes.Buffer) {
	t.Helper()
	out := &bytes.Buffer{}
	hooks, err := newWebhooks(secrets, slog.New(slog.DiscardHandler), out)
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{orders: newOrderBook(), hooks: hooks, log: slog.New(slog.DiscardHandler), out: out, catalogue: catalogue}
	hooks.orders = s.orders
	return s, out
}

// event is an order event's body as payd sends it.
func event(id, typ, orderID, status string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "type": typ, "created_at": "2026-01-02T03:04:05.000000Z",
		"cause": map[string]string{"kind": "pay_request", "ref": "k"},
		"order": map[string]any{"id": orderID, "status": status, "amount": "24.00", "currency": "USD"}})
	return b
}

// signed is a delivery of body under webhook-id id, signed with secret at
// ts.
func signed(t *testing.T, secret, id string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/payd", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	return req
}

func serve(s *shop, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.routes().ServeHTTP(rec, req)
	return rec
}

// TestWebhookPaidOnce: a signed order.paid marks the shop's order paid and
// is printed once; the same webhook-id again (payd's retry) is answered
// 204 and changes nothing more.
func TestWebhookPaidOnce(t *testing.T) {
	s, out := hookShop(t, testNotifySecret)
	s.orders.add(shopOrder{ID: "ord-1", Amount: "24.00", Currency: "USD"})
	body := event("evt-1", "order.paid", "ord-1", "paid")
	for i := range 3 {
		if rec := serve(s, signed(t, testNotifySecret, "evt-1", time.Now(), body)); rec.Code != http.StatusNoContent {
			t.Fatalf("delivery %d = %d %s, want 204", i+1, rec.Code, rec.Body)
		}
	}
	o, _ := s.orders.get("ord-1")
	if o.Status != "paid" || len(o.Events) != 1 || o.Events[0] != "order.paid" {
		t.Errorf("order after three deliveries of one event = %+v, want paid with one order.paid", o)
	}
	if n := strings.Count(out.String(), "evt-1 "); n != 1 {
		t.Errorf("the event was printed %d times, want once:\n%s", n, out)
	}
	// Another event of the order is acted on: the dedupe is by webhook-id.
	if rec := serve(s, signed(t, testNotifySecret, "evt-2", time.Now(), event("evt-2", "order.refunded", "ord-1", "refunded"))); rec.Code != http.StatusNoContent {
		t.Fatalf("a second event = %d, want 204", rec.Code)
	}
	if o, _ := s.orders.get("ord-1"); o.Status != "refunded" || len(o.Events) != 2 {
		t.Errorf("order after a second event = %+v, want refunded with two events", o)
	}
}

// TestWebhookRefused: a delivery whose signature does not hold — a
// tampered body, another secret, a stale timestamp, no signature, a
// signature of another webhook-id — is 401 and changes nothing, and
// does not use up its webhook-id: the genuine delivery after it is
// acted on.
func TestWebhookRefused(t *testing.T) {
	now := time.Now()
	paid := event("evt-1", "order.paid", "ord-1", "paid")
	cases := map[string]func(t *testing.T) *http.Request{
		"tampered body": func(t *testing.T) *http.Request {
			r := signed(t, testNotifySecret, "evt-1", now, event("evt-1", "order.paid", "ord-1", "pending"))
			r.Body = io.NopCloser(bytes.NewReader(paid))
			return r
		},
		"another secret": func(t *testing.T) *http.Request { return signed(t, otherSecret, "evt-1", now, paid) },
		"stale": func(t *testing.T) *http.Request {
			return signed(t, testNotifySecret, "evt-1", now.Add(-time.Hour), paid)
		},
		"unsigned": func(t *testing.T) *http.Request {
			r := signed(t, testNotifySecret, "evt-1", now, paid)
			r.Header.Del("webhook-signature")
			return r
		},
		"another id's signature": func(t *testing.T) *http.Request {
			r := signed(t, testNotifySecret, "evt-0", now, paid)
			r.Header.Set("webhook-id", "evt-1")
			return r
		},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			s, out := hookShop(t, testNotifySecret)
			s.orders.add(shopOrder{ID: "ord-1", Amount: "24.00", Currency: "USD"})
			if rec := serve(s, req(t)); rec.Code != http.StatusUnauthorized {
				t.Fatalf("answer = %d %s, want 401", rec.Code, rec.Body)
			}
			if o, _ := s.orders.get("ord-1"); o.Status != "pending" || len(o.Events) != 0 {
				t.Errorf("order after a refused delivery = %+v, want pending and untouched", o)
			}
			if out.Len() != 0 {
				t.Errorf("a refused delivery printed %q", out)
			}
			if rec := serve(s, signed(t, testNotifySecret, "evt-1", time.Now(), paid)); rec.Code != http.StatusNoContent {
				t.Fatalf("the genuine delivery after it = %d, want 204", rec.Code)
			}
			if o, _ := s.orders.get("ord-1"); o.Status != "paid" {
				t.Errorf("order after the genuine delivery = %+v, want paid", o)
			}
		})
	}
}

// TestWebhookRotation: while payd signs with two secrets, the shop given
// either (or both) accepts the delivery.
func TestWebhookRotation(t *testing.T) {
	s, _ := hookShop(t, otherSecret, testNotifySecret)
	s.orders.add(shopOrder{ID: "ord-1"})
	if rec := serve(s, signed(t, testNotifySecret, "evt-1", time.Now(), event("evt-1", "order.paid", "ord-1", "paid"))); rec.Code != http.StatusNoContent {
		t.Fatalf("signed by the second secret = %d, want 204", rec.Code)
	}
}

// TestWebhookNotAnEvent: a signed body that is no order event, or whose
// id is not its webhook-id, is 400 and changes nothing.
func TestWebhookNotAnEvent(t *testing.T) {
	s, _ := hookShop(t, testNotifySecret)
	s.orders.add(shopOrder{ID: "ord-1"})
	for name, body := range map[string][]byte{
		"not JSON":    []byte("paid!"),
		"other id":    event("evt-9", "order.paid", "ord-1", "paid"),
		"no order id": event("evt-1", "order.paid", "", "paid"),
	} {
		if rec := serve(s, signed(t, testNotifySecret, "evt-1", time.Now(), body)); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: answer = %d, want 400", name, rec.Code)
		}
	}
	if o, _ := s.orders.get("ord-1"); o.Status != "pending" {
		t.Errorf("order = %+v, want pending", o)
	}
}

// TestWebhookUnknownOrder: an event of an order the page did not create
// (payd tells the endpoint of every order) is acknowledged and noted.
func TestWebhookUnknownOrder(t *testing.T) {
	s, out := hookShop(t, testNotifySecret)
	if rec := serve(s, signed(t, testNotifySecret, "evt-1", time.Now(), event("evt-1", "order.paid", "ord-x", "paid"))); rec.Code != http.StatusNoContent {
		t.Fatalf("answer = %d, want 204", rec.Code)
	}
	if !strings.Contains(out.String(), "not an order of this shop's page") {
		t.Errorf("printed %q, want the order named as not the page's", out)
	}
	if _, ok := s.orders.get("ord-x"); ok {
		t.Error("an unknown order was added to the shop's orders")
	}
}

// TestConfig: the merchant key and the notify secret are required, and
// the listen address comes from SHOP_ADDR or -addr.
func TestConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, err := loadConfig(nil, env(nil)); err == nil || !strings.Contains(err.Error(), "PAYD_MERCHANT_KEY") || !strings.Contains(err.Error(), "PAYD_NOTIFY_SECRET") {
		t.Errorf("no settings: %v, want both required settings named", err)
	}
	full := map[string]string{"PAYD_MERCHANT_KEY": "sk_x", "PAYD_NOTIFY_SECRET": testNotifySecret, "SHOP_ADDR": "127.0.0.1:9999", "PAYD_URL": "http://p:1/"}
	c, err := loadConfig(nil, env(full))
	if err != nil || c.addr != "127.0.0.1:9999" || c.paydURL != "http://p:1" {
		t.Errorf("config = %+v, %v", c, err)
	}
	if c, _ := loadConfig([]string{"-addr", ":0"}, env(full)); c.addr != ":0" {
		t.Errorf("-addr: %q, want :0", c.addr)
	}
	full["PAYD_NOTIFY_SECRET"] = "not base64!"
	if err := run(t.Context(), nil, env(full), io.Discard); err == nil || !strings.Contains(err.Error(), "PAYD_NOTIFY_SECRET") {
		t.Errorf("a bad secret: %v, want a refusal naming PAYD_NOTIFY_SECRET", err)
	}
}

// TestPage: the page and its script are served, the script is the one
// that pays with the client secret.
func TestPage(t *testing.T) {
	s, _ := hookShop(t, testNotifySecret)
	for path, want := range map[string]string{"/": "The example shop", "/app.js": "client_secret", "/style.css": "#products"} {
		rec := serve(s, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s = %d, want 200 containing %q", path, rec.Code, want)
		}
	}
	if rec := serve(s, httptest.NewRequest(http.MethodGet, "/api/orders/nope", nil)); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown order = %d, want 404", rec.Code)
	}
}
