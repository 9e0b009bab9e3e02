package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// product is a product as payd answers it.
type product struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	UnitPrice string `json:"unit_price"`
	Currency  string `json:"currency"`
	Stock     *int64 `json:"stock"`
	Active    bool   `json:"active"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// merchant is one call with a merchant key and an idempotency key.
func (d *driver) merchant(token, method, path, key string, body any) reply {
	d.t.Helper()
	return d.do(request{method: method, path: path, token: token, key: key, body: body})
}

// newProduct creates a product with the test's merchant key or fails.
func (d *driver) newProduct(sku, price string, stock any) product {
	d.t.Helper()
	r := d.merchant(testMerchantKey, "POST", "/v1/products", uuid.NewString(),
		map[string]any{"sku": sku, "name": "Product " + sku, "unit_price": price, "currency": "USD", "stock": stock})
	if r.Status != http.StatusCreated {
		d.t.Fatalf("create product %s = %d %s, want 201", sku, r.Status, r.Body)
	}
	return decode[product](d.t, r)
}

// auditOf is the audit trail of a product: actor, action, result, in order.
func (s *stack) auditOf(sku string) []string {
	s.t.Helper()
	var rows []struct {
		Actor, Action string
		Result        int
	}
	if err := s.db.Gorm().Raw("SELECT actor, action, result FROM audit_log WHERE target = ? ORDER BY created_at, id", "product:"+sku).
		Scan(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Actor + " " + r.Action + " " + http.StatusText(r.Result)
	}
	return out
}

// productCount is how many products the database holds.
func (s *stack) productCount() int64 {
	s.t.Helper()
	var n int64
	if err := s.db.Gorm().Raw("SELECT COUNT(*) FROM products").Scan(&n).Error; err != nil {
		s.t.Fatal(err)
	}
	return n
}

// TestCatalogue: the merchant creates, changes and stocks products with
// its key; every write replays byte for byte under its key and is audited
// as merchant:default; a SKU taken under another key is 409 sku_taken; the
// public reads show active products only; nothing of the key reaches the
// log.
func TestCatalogue(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		create := map[string]any{"sku": "tea-green.100g", "name": "Green tea", "unit_price": "4.95", "currency": "USD", "stock": 10}
		key := uuid.NewString()
		first := s.merchant(testMerchantKey, "POST", "/v1/products", key, create)
		if first.Status != http.StatusCreated || first.Header.Get("Location") != "/v1/products/tea-green.100g" {
			t.Fatalf("create = %d %s (Location %q), want 201 at /v1/products/tea-green.100g", first.Status, first.Body, first.Header.Get("Location"))
		}
		p := decode[product](t, first)
		if p.UnitPrice != "4.95" || p.Currency != "USD" || p.Stock == nil || *p.Stock != 10 || !p.Active || p.CreatedAt == "" {
			t.Errorf("created product = %+v, want 4.95 USD, stock 10, active", p)
		}
		again := s.merchant(testMerchantKey, "POST", "/v1/products", key, create)
		if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replayed create = %d %s (replayed %q), want the first answer byte for byte", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/products", uuid.NewString(), create); r.Status != http.StatusConflict || r.problemCode() != "sku_taken" {
			t.Errorf("create the same SKU under another key = %d %s, want 409 sku_taken", r.Status, r.Body)
		}
		changed := map[string]any{"sku": "tea-green.100g", "name": "Green tea", "unit_price": "5.95", "currency": "USD", "stock": 10}
		if r := s.merchant(testMerchantKey, "POST", "/v1/products", key, changed); r.Status != http.StatusUnprocessableEntity || r.problemCode() != "idempotency_key_reused" {
			t.Errorf("another body under the create's key = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}

		patchKey := uuid.NewString()
		patch := map[string]any{"unit_price": "5.25", "name": "Green tea, 100 g"}
		r := s.merchant(testMerchantKey, "PATCH", "/v1/products/tea-green.100g", patchKey, patch)
		if got := decode[product](t, r); r.Status != http.StatusOK || got.UnitPrice != "5.25" || got.Name != "Green tea, 100 g" || *got.Stock != 10 {
			t.Fatalf("patch = %d %s, want 200 at 5.25, renamed, stock kept", r.Status, r.Body)
		}
		if re := s.merchant(testMerchantKey, "PATCH", "/v1/products/tea-green.100g", patchKey, patch); !bytes.Equal(re.Body, r.Body) || re.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replayed patch = %d %s, want the first answer", re.Status, re.Body)
		}

		stockKey := uuid.NewString()
		r = s.merchant(testMerchantKey, "POST", "/v1/products/tea-green.100g/stock", stockKey, map[string]any{"adjust": -4})
		if got := decode[product](t, r); r.Status != http.StatusOK || *got.Stock != 6 {
			t.Fatalf("adjust -4 = %d %s, want 200 with stock 6", r.Status, r.Body)
		}
		if re := s.merchant(testMerchantKey, "POST", "/v1/products/tea-green.100g/stock", stockKey, map[string]any{"adjust": -4}); !bytes.Equal(re.Body, r.Body) {
			t.Errorf("replayed adjust = %d %s, want the first answer (and the stock taken once)", re.Status, re.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/products/tea-green.100g/stock", uuid.NewString(), map[string]any{"adjust": -7}); r.Status != http.StatusConflict || r.problemCode() != "insufficient_stock" {
			t.Errorf("adjust -7 of 6 = %d %s, want 409 insufficient_stock", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/products/tea-green.100g"}); r.Status != http.StatusOK || *decode[product](t, r).Stock != 6 {
			t.Errorf("public read = %d %s, want 200 with stock 6 (one adjustment, a refusal changing nothing)", r.Status, r.Body)
		}

		s.newProduct("unlimited", "1.00", nil)
		if r := s.merchant(testMerchantKey, "POST", "/v1/products/unlimited/stock", uuid.NewString(), map[string]any{"adjust": 5}); r.Status != http.StatusConflict || r.problemCode() != "stock_unlimited" {
			t.Errorf("adjust an unlimited stock = %d %s, want 409 stock_unlimited", r.Status, r.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/products/nosuch/stock", uuid.NewString(), map[string]any{"adjust": 5}); r.Status != http.StatusNotFound || r.problemCode() != "product_not_found" {
			t.Errorf("adjust an unknown product = %d %s, want 404 product_not_found", r.Status, r.Body)
		}

		// Hidden, a product is gone for buyers and still the merchant's.
		if r := s.merchant(testMerchantKey, "PATCH", "/v1/products/unlimited", uuid.NewString(), map[string]any{"active": false}); r.Status != http.StatusOK || decode[product](t, r).Active {
			t.Fatalf("deactivate = %d %s, want 200 inactive", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/products/unlimited"}); r.Status != http.StatusNotFound || r.problemCode() != "product_not_found" {
			t.Errorf("read an inactive product = %d %s, want 404 product_not_found", r.Status, r.Body)
		}
		list := decode[struct {
			Data       []product `json:"data"`
			NextCursor *string   `json:"next_cursor"`
		}](t, s.do(request{method: "GET", path: "/v1/products"}))
		if len(list.Data) != 1 || list.Data[0].SKU != "tea-green.100g" || list.NextCursor != nil {
			t.Errorf("public list = %+v, want the one active product", list)
		}

		want := []string{
			"merchant:default create_product Created", "merchant:default create_product Created",
			"merchant:default create_product Conflict", "merchant:default create_product Unprocessable Entity",
			"merchant:default update_product OK", "merchant:default update_product OK",
			"merchant:default adjust_stock OK", "merchant:default adjust_stock OK", "merchant:default adjust_stock Conflict",
		}
		if got := s.auditOf("tea-green.100g"); strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("audit trail =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if strings.Contains(s.logs.String(), testMerchantKey) {
			t.Error("the merchant key reached the log")
		}
	})
}

// TestCataloguePaging: the public list pages by SKU with next_cursor.
func TestCataloguePaging(t *testing.T) {
	s := start(t)
	for _, sku := range []string{"a", "b", "c"} {
		s.newProduct(sku, "2.00", 1)
	}
	var got []string
	path := "/v1/products?limit=2"
	for range 3 {
		page := decode[struct {
			Data       []product `json:"data"`
			NextCursor *string   `json:"next_cursor"`
		}](t, s.do(request{method: "GET", path: path}))
		for _, p := range page.Data {
			got = append(got, p.SKU)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/products?limit=2&cursor=" + *page.NextCursor
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("pages = %v, want a,b,c", got)
	}
}

// TestMerchantKeysShareAScope: the named keys of PAYD_MERCHANT_KEYS write
// the catalogue beside PAYD_MERCHANT_KEY, each audited under its name, and
// a request retried with another key (a rotation) replays the first
// answer: every merchant key has one idempotency scope.
func TestMerchantKeysShareAScope(t *testing.T) {
	const oldKey, newKey = "sk_old_7Hq2xWv9Lr4Kp8Zt3Ny6Bc1Md5Fg0J", "sk_new_Qe3Rt7Yu1Io5Pa9Sd2Fg6Hj0Kl4Zx8C"
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_MERCHANT_KEYS": "old:" + oldKey + ",new:" + newKey}))
		body := map[string]any{"sku": "rotated", "name": "Rotated", "unit_price": "3.00", "currency": "EUR"}
		key := uuid.NewString()
		first := s.merchant(oldKey, "POST", "/v1/products", key, body)
		if first.Status != http.StatusCreated {
			t.Fatalf("create with the old key = %d %s, want 201", first.Status, first.Body)
		}
		retry := s.merchant(newKey, "POST", "/v1/products", key, body)
		if retry.Status != http.StatusCreated || !bytes.Equal(retry.Body, first.Body) || retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retry with the new key = %d %s, want the first answer replayed", retry.Status, retry.Body)
		}
		if r := s.merchant(testMerchantKey, "PATCH", "/v1/products/rotated", uuid.NewString(), map[string]any{"unit_price": "3.50"}); r.Status != http.StatusOK {
			t.Errorf("PAYD_MERCHANT_KEY beside the named ones = %d %s, want 200", r.Status, r.Body)
		}
		want := "merchant:old create_product Created; merchant:new create_product Created; merchant:default update_product OK"
		if got := strings.Join(s.auditOf("rotated"), "; "); got != want {
			t.Errorf("audit trail = %s, want %s", got, want)
		}
		for _, k := range []string{oldKey, newKey} {
			if strings.Contains(s.logs.String(), k) {
				t.Error("a merchant key reached the log")
			}
		}
	})
}

// TestMerchantAuthMatrix: each caller on each kind of route. A merchant
// route refuses a customer or admin token as a known caller of the wrong
// kind (403) and no or an unknown token with 401; a merchant key is 403 on
// customer and operator routes; the catalogue's reads take anyone.
func TestMerchantAuthMatrix(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, customer := s.register(newEmail())
		s.newProduct("matrix", "1.00", 5)
		callers := []struct{ name, token string }{
			{"nothing", ""}, {"unknown", "sk_unknown_0123456789abcdef0123456789"},
			{"customer", customer}, {"admin", testAdminToken}, {"merchant", testMerchantKey},
		}
		routes := []struct {
			name string
			req  func() request
			want map[string]int // by caller
		}{
			{"merchant write", func() request {
				return request{method: "POST", path: "/v1/products/matrix/stock", key: uuid.NewString(), body: map[string]any{"adjust": 1}}
			}, map[string]int{"nothing": 401, "unknown": 401, "customer": 403, "admin": 403, "merchant": 200}},
			{"merchant create", func() request {
				return request{method: "POST", path: "/v1/products", key: uuid.NewString(),
					body: map[string]any{"sku": "m-" + uuid.NewString()[:8], "name": "M", "unit_price": "1.00", "currency": "USD"}}
			}, map[string]int{"nothing": 401, "unknown": 401, "customer": 403, "admin": 403, "merchant": 201}},
			{"public read", func() request { return request{method: "GET", path: "/v1/products/matrix"} },
				map[string]int{"nothing": 200, "unknown": 200, "customer": 200, "admin": 200, "merchant": 200}},
			{"orders list (the merchant sees every order)", func() request { return request{method: "GET", path: "/v1/orders"} },
				map[string]int{"nothing": 401, "unknown": 401, "customer": 200, "admin": 403, "merchant": 200}},
			{"pay (the buyer's alone)", func() request {
				return request{method: "POST", path: "/v1/orders/" + uuid.NewString() + "/pay", key: uuid.NewString(), body: map[string]any{"payment_method": "pm_ok"}}
			}, map[string]int{"nothing": 401, "unknown": 401, "customer": 404, "admin": 403, "merchant": 403}},
			{"admin route", func() request { return request{method: "GET", path: "/v1/admin/whoami"} },
				map[string]int{"nothing": 401, "unknown": 401, "customer": 403, "admin": 200, "merchant": 403}},
		}
		for _, rt := range routes {
			for _, c := range callers {
				req := rt.req()
				req.token = c.token
				if r := s.do(req); r.Status != rt.want[c.name] {
					t.Errorf("%s with %s = %d %s, want %d", rt.name, c.name, r.Status, r.Body, rt.want[c.name])
				}
			}
		}
		if n := s.productCount(); n != 2 {
			t.Errorf("products = %d, want 2 (only the merchant's creation)", n)
		}
	})
}

// TestStockRace: twenty adjustments of -1 at once on a stock of 5: exactly
// five succeed, fifteen are 409 insufficient_stock, and the stock ends at
// 0, never below, on every database.
func TestStockRace(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		s.newProduct("last-five", "9.99", 5)
		const n = 20
		statuses := make([]int, n)
		codes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := s.merchant(testMerchantKey, "POST", "/v1/products/last-five/stock", uuid.NewString(), map[string]any{"adjust": -1})
				statuses[i], codes[i] = r.Status, r.problemCode()
			})
		}
		wg.Wait()
		ok, short := 0, 0
		for i := range n {
			switch {
			case statuses[i] == http.StatusOK:
				ok++
			case statuses[i] == http.StatusConflict && codes[i] == "insufficient_stock":
				short++
			default:
				t.Errorf("adjustment %d = %d %s, want 200 or 409 insufficient_stock", i, statuses[i], codes[i])
			}
		}
		if ok != 5 || short != 15 {
			t.Errorf("%d succeeded and %d were short, want 5 and 15", ok, short)
		}
		if r := s.do(request{method: "GET", path: "/v1/products/last-five"}); *decode[product](t, r).Stock != 0 {
			t.Errorf("stock after the race = %s, want 0", r.Body)
		}
	})
}

// TestCatalogueBadInput: every malformed write is a 4xx problem naming
// what is wrong, and writes nothing: no product, no change of one.
func TestCatalogueBadInput(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		kept := s.newProduct("kept", "10.00", 3)
		valid := func(change map[string]any) map[string]any {
			b := map[string]any{"sku": "new-sku", "name": "New", "unit_price": "1.00", "currency": "USD", "stock": 1}
			for k, v := range change {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		tests := []struct {
			name, method, path string
			body               any
			status             int
			field              string // the invalid field named, if any
		}{
			{"empty SKU", "POST", "/v1/products", valid(map[string]any{"sku": ""}), 400, "sku"},
			{"65-character SKU", "POST", "/v1/products", valid(map[string]any{"sku": strings.Repeat("s", 65)}), 400, "sku"},
			{"SKU with a slash", "POST", "/v1/products", valid(map[string]any{"sku": "a/b"}), 400, "sku"},
			{"SKU with a space", "POST", "/v1/products", valid(map[string]any{"sku": "a b"}), 400, "sku"},
			{"SKU not ASCII", "POST", "/v1/products", valid(map[string]any{"sku": "thé"}), 400, "sku"},
			{"no name", "POST", "/v1/products", valid(map[string]any{"name": nil}), 400, "name"},
			{"blank name", "POST", "/v1/products", valid(map[string]any{"name": "   "}), 400, "name"},
			{"long name", "POST", "/v1/products", valid(map[string]any{"name": strings.Repeat("n", 201)}), 400, "name"},
			{"no price", "POST", "/v1/products", valid(map[string]any{"unit_price": nil}), 400, "unit_price"},
			{"zero price", "POST", "/v1/products", valid(map[string]any{"unit_price": "0.00"}), 400, "unit_price"},
			{"negative price", "POST", "/v1/products", valid(map[string]any{"unit_price": "-1.00"}), 400, "unit_price"},
			{"price as a number", "POST", "/v1/products", valid(map[string]any{"unit_price": 1.5}), 400, "unit_price"},
			{"too many decimals", "POST", "/v1/products", valid(map[string]any{"unit_price": "1.005"}), 400, "unit_price"},
			{"decimals on JPY", "POST", "/v1/products", valid(map[string]any{"unit_price": "1.5", "currency": "JPY"}), 400, "unit_price"},
			{"price over the maximum", "POST", "/v1/products", valid(map[string]any{"unit_price": "1000000.01"}), 400, "unit_price"},
			{"exponent price", "POST", "/v1/products", valid(map[string]any{"unit_price": "1e3"}), 400, "unit_price"},
			{"unknown currency", "POST", "/v1/products", valid(map[string]any{"currency": "XXX"}), 400, "currency"},
			{"lower-case currency", "POST", "/v1/products", valid(map[string]any{"currency": "usd"}), 400, "currency"},
			{"negative stock", "POST", "/v1/products", valid(map[string]any{"stock": -1}), 400, "stock"},
			{"huge stock", "POST", "/v1/products", valid(map[string]any{"stock": 1000000001}), 400, "stock"},
			{"stock beyond int64", "POST", "/v1/products", `{"sku":"x","name":"X","unit_price":"1.00","currency":"USD","stock":99999999999999999999}`, 400, "stock"},
			{"fractional stock", "POST", "/v1/products", valid(map[string]any{"stock": 1.5}), 400, "stock"},
			{"stock as text", "POST", "/v1/products", valid(map[string]any{"stock": "5"}), 400, "stock"},
			{"unknown field", "POST", "/v1/products", valid(map[string]any{"color": "green"}), 400, "color"},
			{"active on create", "POST", "/v1/products", valid(map[string]any{"active": false}), 400, "active"},
			{"not JSON", "POST", "/v1/products", "{", 400, ""},
			{"patch nothing", "PATCH", "/v1/products/kept", map[string]any{}, 400, ""},
			{"patch a zero price", "PATCH", "/v1/products/kept", map[string]any{"unit_price": "0"}, 400, "unit_price"},
			{"patch too many decimals", "PATCH", "/v1/products/kept", map[string]any{"unit_price": "1.001"}, 400, "unit_price"},
			{"patch an empty name", "PATCH", "/v1/products/kept", map[string]any{"name": ""}, 400, "name"},
			{"patch the currency", "PATCH", "/v1/products/kept", map[string]any{"currency": "EUR"}, 400, "currency"},
			{"patch the stock", "PATCH", "/v1/products/kept", map[string]any{"stock": 99}, 400, "stock"},
			{"patch active as text", "PATCH", "/v1/products/kept", map[string]any{"active": "no"}, 400, "active"},
			{"patch a SKU no product has", "PATCH", "/v1/products/" + strings.Repeat("s", 65), map[string]any{"name": "X"}, 404, ""},
			{"no adjust", "POST", "/v1/products/kept/stock", map[string]any{}, 400, "adjust"},
			{"adjust 0", "POST", "/v1/products/kept/stock", map[string]any{"adjust": 0}, 400, "adjust"},
			{"huge adjust", "POST", "/v1/products/kept/stock", map[string]any{"adjust": 1000000001}, 400, "adjust"},
			{"huge negative adjust", "POST", "/v1/products/kept/stock", map[string]any{"adjust": -1000000001}, 400, "adjust"},
			{"adjust beyond int64", "POST", "/v1/products/kept/stock", `{"adjust":-99999999999999999999}`, 400, "adjust"},
			{"fractional adjust", "POST", "/v1/products/kept/stock", map[string]any{"adjust": -0.5}, 400, "adjust"},
			{"adjust past the largest stock", "POST", "/v1/products/kept/stock", map[string]any{"adjust": 999999999}, 400, "adjust"},
			{"adjust as text", "POST", "/v1/products/kept/stock", map[string]any{"adjust": "-1"}, 400, "adjust"},
		}
		for _, tt := range tests {
			r := s.merchant(testMerchantKey, tt.method, tt.path, uuid.NewString(), tt.body)
			if r.Status != tt.status || r.problemCode() == "" {
				t.Errorf("%s = %d %s, want %d and a problem", tt.name, r.Status, r.Body, tt.status)
				continue
			}
			if tt.field != "" && !strings.Contains(string(r.Body), `"param":"`+tt.field+`"`) {
				t.Errorf("%s = %s, want the field %s named", tt.name, r.Body, tt.field)
			}
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/products", "", valid(nil)); r.Status != 400 || r.problemCode() != "idempotency_key_missing" {
			t.Errorf("create without a key = %d %s, want 400 idempotency_key_missing", r.Status, r.Body)
		}
		if n := s.productCount(); n != 1 {
			t.Errorf("products = %d after the bad input, want 1", n)
		}
		if r := s.do(request{method: "GET", path: "/v1/products/kept"}); !bytes.Equal(r.Body, mustJSON(t, kept)) {
			t.Errorf("the product after the bad input = %s, want it unchanged", r.Body)
		}
	})
}
