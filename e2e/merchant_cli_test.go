package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// merchantCLI runs `payd merchant ARGS` in-process against the stack,
// with PAYD_URL and PAYD_MERCHANT_KEY (key; "" for none) set.
func (s *stack) merchantCLI(key string, args ...string) (string, error) {
	s.t.Helper()
	e := env{"PAYD_URL": s.base, "PAYD_MERCHANT_KEY": key}
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"merchant"}, args...), e.get, &out, &errOut)
	return out.String(), err
}

// TestMerchantCLI drives `payd merchant products` against a running payd:
// create, stock, reprice and hide with the merchant key, list and show
// without one; a repeated -key acts once; a refusal is payd's problem, a
// write without the key or with an admin token is refused.
func TestMerchantCLI(t *testing.T) {
	s := start(t)
	must := func(key string, args ...string) string {
		t.Helper()
		out, err := s.merchantCLI(key, args...)
		if err != nil {
			t.Fatalf("payd merchant %s = %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := must(testMerchantKey, "products", "create", "mug-1", "-name", "Blue mug", "-price", "12.50", "-currency", "EUR", "-stock", "3")
	wantLines(t, "create", out, `^mug-1\s+Blue mug\s+12.50 EUR\s+3\s+true$`)
	for range 2 { // one key: one adjustment
		out = must(testMerchantKey, "products", "stock", "mug-1", "-2", "-key", "cli-stock-1")
	}
	wantLines(t, "stock", out, `^mug-1\s+.*\s+1\s+true$`)
	if _, err := s.merchantCLI(testMerchantKey, "products", "stock", "mug-1", "-5"); err == nil || !strings.Contains(err.Error(), "insufficient_stock") {
		t.Errorf("taking 5 of 1 = %v, want payd's insufficient_stock", err)
	}
	must(testMerchantKey, "products", "update", "mug-1", "-price", "13.00")
	wantLines(t, "list", must("", "products", "list"), `^mug-1\s+Blue mug\s+13.00 EUR\s+1\s+true$`)
	must(testMerchantKey, "products", "create", "tea", "-name", "Tea", "-price", "3", "-currency", "JPY")
	wantLines(t, "show", must("", "products", "show", "tea"), `^tea\s+Tea\s+3 JPY\s+unlimited\s+true$`)
	must(testMerchantKey, "products", "update", "tea", "-deactivate")
	if _, err := s.merchantCLI("", "products", "show", "tea"); err == nil || !strings.Contains(err.Error(), "product_not_found") {
		t.Errorf("show an inactive product = %v, want payd's product_not_found", err)
	}
	if _, err := s.merchantCLI("", "products", "stock", "mug-1", "1"); err == nil || !strings.Contains(err.Error(), "PAYD_MERCHANT_KEY") {
		t.Errorf("a write without a key = %v, want it to name PAYD_MERCHANT_KEY", err)
	}
	if _, err := s.merchantCLI(testAdminToken, "products", "stock", "mug-1", "1"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a write with the admin token = %v, want payd's 403", err)
	}
	if _, err := s.merchantCLI(testMerchantKey, "products", "stock", "mug-1", "many"); err == nil || !strings.Contains(err.Error(), "ADJUST") {
		t.Errorf("ADJUST many = %v, want a usage error naming ADJUST", err)
	}
}

// TestMerchantCLIShips drives `payd merchant orders ship` against a
// running payd: a paid order ships in two parcels, a repeated -key ships
// once, more than ordered is payd's problem, and a command line payd
// would refuse is refused before anything is sent.
func TestMerchantCLIShips(t *testing.T) {
	s := start(t)
	s.newProduct("mug", "12.00", nil)
	_, tok := s.register(newEmail())
	r := s.do(request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(), body: `{"items":[{"sku":"mug","quantity":3}]}`})
	if r.Status != http.StatusCreated {
		t.Fatalf("create order = %d %s", r.Status, r.Body)
	}
	id := r.json(t)["id"].(string)
	if p := s.pay(tok, id, uuid.NewString(), "pm_ok"); p.Status != http.StatusOK {
		t.Fatalf("pay = %d %s", p.Status, p.Body)
	}
	out, err := s.merchantCLI(testMerchantKey, "orders", "ship", id, "-items", "mug:2", "-carrier", "DHL", "-key", "cli-ship-1")
	if err != nil || !strings.Contains(out, "of order "+id+": 2 × mug") || !strings.Contains(out, "carrier DHL, tracking none") {
		t.Fatalf("ship 2 = %v\n%s", err, out)
	}
	again, err := s.merchantCLI(testMerchantKey, "orders", "ship", id, "-items", "mug:2", "-carrier", "DHL", "-key", "cli-ship-1")
	if err != nil || !strings.Contains(again, "replayed") || strings.Fields(again)[1] != strings.Fields(out)[1] {
		t.Errorf("the same -key again = %v\n%s\nwant the first shipment, replayed", err, again)
	}
	if _, err := s.merchantCLI(testMerchantKey, "orders", "ship", id, "-items", "mug:2"); err == nil || !strings.Contains(err.Error(), "validation_failed") {
		t.Errorf("ship more than is left = %v, want payd's validation_failed", err)
	}
	out, err = s.merchantCLI(testMerchantKey, "orders", "ship", id, "-items", "mug:1", "-json")
	var sh struct {
		OrderID string `json:"order_id"`
		Items   []struct {
			SKU      string `json:"sku"`
			Quantity int    `json:"quantity"`
		} `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &sh) != nil || sh.OrderID != id || len(sh.Items) != 1 || sh.Items[0].Quantity != 1 {
		t.Errorf("ship the last one, -json = %v\n%s", err, out)
	}
	for _, bad := range [][]string{{id}, {id, "-items", "mug"}, {id, "-items", "mug:0"}, {"not-an-id", "-items", "mug:1"}} {
		if _, err := s.merchantCLI(testMerchantKey, append([]string{"orders", "ship"}, bad...)...); err == nil {
			t.Errorf("payd merchant orders ship %v = nil, want a usage error", bad)
		}
	}
	if n := s.count("shipments WHERE order_id = ?", id); n != 2 {
		t.Errorf("%d shipments, want 2", n)
	}
}

// TestMerchantCLICaptures drives `payd merchant orders capture` and
// `orders cancel` against a running payd: a held order is captured in
// part, once under a repeated -key; a second capture is payd's problem;
// a cancel of another held order voids it.
func TestMerchantCLICaptures(t *testing.T) {
	s := start(t)
	s.newProduct("mug", "12.00", nil)
	held := func() string {
		t.Helper()
		r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), `{"items":[{"sku":"mug","quantity":2}],"capture_method":"manual"}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("create order = %d %s", r.Status, r.Body)
		}
		o := r.json(t)
		id := o["id"].(string)
		if p := s.pay(o["client_secret"].(string), id, uuid.NewString(), "pm_ok"); p.Status != http.StatusOK || p.json(t)["status"] != "authorized" {
			t.Fatalf("pay = %d %s", p.Status, p.Body)
		}
		return id
	}
	id := held()
	out, err := s.merchantCLI(testMerchantKey, "orders", "capture", id, "-amount", "10.00", "-key", "cli-capture-1")
	if err != nil || !strings.Contains(out, "order "+id+": paid, 24.00 USD, captured 10.00") {
		t.Fatalf("capture 10.00 = %v\n%s", err, out)
	}
	again, err := s.merchantCLI(testMerchantKey, "orders", "capture", id, "-amount", "10.00", "-key", "cli-capture-1")
	if err != nil || !strings.Contains(again, "captured 10.00") || !strings.Contains(again, "replayed") {
		t.Errorf("the same -key again = %v\n%s\nwant the first capture, replayed", err, again)
	}
	if _, err := s.merchantCLI(testMerchantKey, "orders", "capture", id); err == nil || !strings.Contains(err.Error(), "order_not_capturable") {
		t.Errorf("a second capture = %v, want payd's order_not_capturable", err)
	}
	other := held()
	if out, err := s.merchantCLI(testMerchantKey, "orders", "cancel", other); err != nil || !strings.Contains(out, "order "+other+": cancelled") {
		t.Errorf("cancel of a held order = %v\n%s", err, out)
	}
	for _, bad := range [][]string{{}, {id, "-amount", "ten"}, {"not-an-id"}} {
		if _, err := s.merchantCLI(testMerchantKey, append([]string{"orders", "capture"}, bad...)...); err == nil {
			t.Errorf("payd merchant orders capture %v = nil, want a usage error", bad)
		}
	}
	if n := s.count("hold_actions WHERE order_id = ? AND kind = 'capture'", id); n != 1 {
		t.Errorf("%d capture actions, want 1", n)
	}
}
