package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestBadInput sends every kind of malformed request and checks its 4xx
// problem response — and that the database is exactly as it was.
func TestBadInput(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("fay@example.com")
		id := s.order(token, "10.00")
		item := func(price string) map[string]any {
			return map[string]any{"currency": "USD", "items": []map[string]any{{"sku": "a", "name": "A", "quantity": 1, "unit_price": price}}}
		}
		huge := `{"payment_method":"pm_ok","x":"` + strings.Repeat("a", 1<<20) + `"}`
		counted := s.newProduct("counted", "4.00", 3).SKU
		eur := "eur-mug"
		if r := s.merchant(testMerchantKey, "POST", "/v1/products", uuid.NewString(),
			map[string]any{"sku": eur, "name": "Mug", "unit_price": "9.00", "currency": "EUR"}); r.Status != http.StatusCreated {
			t.Fatalf("create a EUR product = %d %s", r.Status, r.Body)
		}
		guest := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), map[string]any{"items": []map[string]any{{"sku": counted, "quantity": 1}}})
		if guest.Status != http.StatusCreated {
			t.Fatalf("merchant's order = %d %s, want 201", guest.Status, guest.Body)
		}
		secret := guest.json(t)["client_secret"].(string)
		pay := "/v1/orders/" + id + "/pay"
		tests := []struct {
			name   string
			req    request
			status int
			code   string
		}{
			{"no token", request{method: "POST", path: "/v1/orders", body: item("1.00")}, 401, "unauthorized"},
			{"bad token", request{method: "POST", path: "/v1/orders", token: "ptk_nope", body: item("1.00")}, 401, "unauthorized"},
			{"admin token is no customer", request{method: "GET", path: "/v1/orders", token: testAdminToken}, 403, "forbidden"},
			{"malformed JSON", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":`}, 400, "validation_failed"},
			{"unknown field", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":"USD","items":[],"coupon":"x"}`}, 400, "validation_failed"},
			{"amount as number", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: `{"currency":"USD","items":[{"sku":"a","name":"A","quantity":1,"unit_price":1.5}]}`}, 400, "validation_failed"},
			{"too many decimals", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: item("1.001")}, 400, "validation_failed"},
			{"negative amount", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: item("-1.00")}, 400, "validation_failed"},
			{"zero amount", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: item("0.00")}, 400, "validation_failed"},
			{"over the maximum", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: item("1000000.01")}, 400, "validation_failed"},
			{"unknown currency", request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: map[string]any{"currency": "XXX", "items": []map[string]any{{"sku": "a", "name": "A", "quantity": 1, "unit_price": "1"}}}}, 400, "validation_failed"},
			{"a buyer's price", request{method: "POST", path: "/v1/orders", token: token, body: item("0.01")}, 400, "validation_failed"},
			{"a buyer's customer_id", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"customer_id": uuid.NewString(), "items": []map[string]any{{"sku": s.priced("1.00"), "quantity": 1}}}}, 400, "validation_failed"},
			{"an unknown SKU", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"items": []map[string]any{{"sku": "nosuch", "quantity": 1}}}}, 400, "validation_failed"},
			{"a SKU in another currency", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"currency": "EUR", "items": []map[string]any{{"sku": s.priced("1.00"), "quantity": 1}}}}, 400, "validation_failed"},
			{"lines in two currencies", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"items": []map[string]any{{"sku": s.priced("1.00"), "quantity": 1}, {"sku": eur, "quantity": 1}}}}, 400, "validation_failed"},
			{"a buyer's amount on a line", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"items": []map[string]any{{"sku": counted, "quantity": 1, "amount": "0.01"}}}}, 400, "validation_failed"},
			{"a buyer's amount on the order", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"amount": "0.01", "items": []map[string]any{{"sku": counted, "quantity": 1}}}}, 400, "validation_failed"},
			{"more than the stock", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"items": []map[string]any{{"sku": counted, "quantity": 4}}}}, 409, "out_of_stock"},
			{"the last units and an unknown SKU", request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{"items": []map[string]any{{"sku": counted, "quantity": 3}, {"sku": "nosuch", "quantity": 1}}}}, 400, "validation_failed"},
			{"a client secret on another order", request{method: "GET", path: "/v1/orders/" + id, token: secret}, 404, "order_not_found"},
			{"a client secret that was made up", request{method: "GET", path: "/v1/orders/" + id, token: id + "_secret_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, 401, "unauthorized"},
			{"no items", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":"USD","items":[]}`}, 400, "validation_failed"},
			{"wrong content type", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":"USD"}`, contentType: "text/plain"}, 415, "unsupported_media_type"},
			{"body over 1 MiB", request{method: "POST", path: pay, token: token, key: uuid.NewString(), body: huge}, 413, "payload_too_large"},
			{"pay without key", request{method: "POST", path: pay, token: token, body: `{"payment_method":"pm_ok"}`}, 400, "idempotency_key_missing"},
			{"pay with bad key", request{method: "POST", path: pay, token: token, key: "not a key!", body: `{"payment_method":"pm_ok"}`}, 400, "idempotency_key_invalid"},
			{"header and body keys differ", request{method: "POST", path: pay, token: token, key: "k-1", body: `{"payment_method":"pm_ok","request_id":"k-2"}`}, 400, "idempotency_key_invalid"},
			{"no payment method", request{method: "POST", path: pay, token: token, key: uuid.NewString(), body: `{}`}, 400, "validation_failed"},
			{"bad payment method", request{method: "POST", path: pay, token: token, key: uuid.NewString(), body: `{"payment_method":"pm ok; drop"}`}, 400, "validation_failed"},
			{"unknown order", request{method: "POST", path: "/v1/orders/" + uuid.NewString() + "/pay", token: token, key: uuid.NewString(), body: `{"payment_method":"pm_ok"}`}, 404, "order_not_found"},
			{"register without key", request{method: "POST", path: "/v1/customers", body: `{"email":"x@example.com","name":"X"}`}, 400, "idempotency_key_missing"},
			{"register bad email", request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: `{"email":"nope","name":"X"}`}, 400, "validation_failed"},
			{"bad limit", request{method: "GET", path: "/v1/orders?limit=1000", token: token}, 400, "validation_failed"},
			{"bad status filter", request{method: "GET", path: "/v1/orders?status=lost", token: token}, 400, "validation_failed"},
		}
		before := s.snapshot()
		for _, tt := range tests {
			r := s.do(tt.req)
			if r.Status != tt.status {
				t.Errorf("%s: status = %d %s, want %d", tt.name, r.Status, r.Body, tt.status)
				continue
			}
			if c := r.code(t); c != tt.code {
				t.Errorf("%s: code = %q, want %q", tt.name, c, tt.code)
			}
			if p := r.json(t); p["title"] == "" || p["status"] != float64(tt.status) || p["type"] == "" {
				t.Errorf("%s: problem = %s, want type, title and status", tt.name, r.Body)
			}
		}
		if after := s.snapshot(); after != before {
			t.Errorf("database changed by bad input: before %v, after %v", before, after)
		}
	})
}

// TestValidationLeavesKeyFree: a request refused before execution is not
// recorded, so the same key works once the request is corrected.
func TestValidationLeavesKeyFree(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("gus@example.com")
		id := s.order(token, "4.00")
		key := uuid.NewString()
		if r := s.pay(token, id, key, "bad method!"); r.Status != http.StatusBadRequest {
			t.Fatalf("pay with bad method = %d %s, want 400", r.Status, r.Body)
		}
		if n := s.count("idempotency_records WHERE idem_key = ?", key); n != 0 {
			t.Errorf("records for the refused key = %d, want 0", n)
		}
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("pay with the same key, corrected = %d %s, want 200", r.Status, r.Body)
		}
	})
}

// snapshot counts the rows of every table an order's or a product's
// creation writes, and the stock the catalogue holds.
func (s *stack) snapshot() [7]int64 {
	var stock int64
	scanRows(s.t, s.db, &stock, "SELECT COALESCE(SUM(stock), 0) FROM products")
	return [7]int64{
		s.count("customers"), s.count("orders"), s.count("order_items"),
		s.count("payment_attempts"), s.count("idempotency_records"),
		s.count("products"), stock,
	}
}
