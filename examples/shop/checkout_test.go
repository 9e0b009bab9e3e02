package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// fakePayd answers the two order calls as payd's contract says, and
// keeps what it was sent. The real payd is in e2e/shop_test.go.
type fakePayd struct {
	mu   sync.Mutex
	seen []seenCall
	// answer, by "METHOD path": status and body
	answers map[string]func() (int, string)
}

type seenCall struct {
	Method, Path, Auth, Key, Body string
}

func (f *fakePayd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenCall{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), string(body)})
	f.mu.Unlock()
	a, ok := f.answers[r.Method+" "+r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	status, out := a()
	ct := "application/json"
	if status >= 400 {
		ct = "application/problem+json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, out)
}

func (f *fakePayd) calls() []seenCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenCall(nil), f.seen...)
}

const (
	fakeOrder  = "0197d1a4-5f0e-7c3b-9a2e-3f6b8c1d2e4f"
	fakeSecret = fakeOrder + "_secret_c2VjcmV0LXNlY3JldC1zZWNyZXQ"
)

func checkoutShop(t *testing.T, f *fakePayd) *shop {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p, err := newPayd(srv.URL, testMerchantKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{payd: p, catalogue: catalogue, orders: newOrderBook(), log: slog.New(slog.DiscardHandler), out: io.Discard}
	s.hooks, _ = newWebhooks([]string{testNotifySecret}, s.log, io.Discard)
	s.hooks.orders = s.orders
	s.ready.Store(true)
	return s
}

// TestCheckout: the page's cart becomes POST /v1/orders with the merchant
// key, SKUs and quantities only, under the cart's idempotency key; the
// browser gets the order's id, client secret and payd's amount, nothing
// of the key; the pay goes to payd with the browser's client secret and
// key, not the merchant key, and payd's answer comes back as written.
func TestCheckout(t *testing.T) {
	f := &fakePayd{answers: map[string]func() (int, string){
		"POST /v1/orders": func() (int, string) {
			return 201, `{"id":"` + fakeOrder + `","status":"pending","amount":"24.00","currency":"USD","client_secret":"` + fakeSecret + `"}`
		},
		"POST /v1/orders/" + fakeOrder + "/pay": func() (int, string) {
			return 200, `{"id":"` + fakeOrder + `","status":"paid","amount":"24.00","currency":"USD"}`
		},
	}}
	s := checkoutShop(t, f)
	rec := serve(s, httptestRequest(http.MethodPost, "/api/orders",
		`{"cart_id":"cart-0123456789","items":[{"sku":"mug-stoneware","quantity":2,"unit_price":"0.01"}]}`))
	if rec.Code != http.StatusCreated {
		t.Fatalf("checkout = %d %s, want 201", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), testMerchantKey) {
		t.Fatal("the browser was handed the merchant key")
	}
	var got orderCreated
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got != (orderCreated{OrderID: fakeOrder, ClientSecret: fakeSecret, Amount: "24.00", Currency: "USD"}) {
		t.Errorf("the browser got %+v", got)
	}
	create := f.calls()[0]
	if create.Auth != "Bearer "+testMerchantKey || create.Key != "shop-cart-cart-0123456789" {
		t.Errorf("the creation was sent with %q under key %q, want the merchant key under the cart's", create.Auth, create.Key)
	}
	if !sameJSON(t, create.Body, `{"currency":"USD","items":[{"sku":"mug-stoneware","quantity":2}]}`) {
		t.Errorf("the creation's body = %s, want SKUs and quantities only (a price the page sends is dropped)", create.Body)
	}
	if o, ok := s.orders.get(fakeOrder); !ok || o.Status != "pending" || o.Amount != "24.00" {
		t.Errorf("the shop's order = %+v, %v, want it pending at payd's amount", o, ok)
	}

	pay := httptestRequest(http.MethodPost, "/api/orders/"+fakeOrder+"/pay", `{"payment_method":"pm_ok","amount":"0.01"}`)
	pay.Header.Set("Authorization", "Bearer "+fakeSecret)
	pay.Header.Set("Idempotency-Key", "pay-key-1")
	rec = serve(s, pay)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"paid"`) {
		t.Fatalf("pay = %d %s, want payd's 200", rec.Code, rec.Body)
	}
	call := f.calls()[1]
	if call.Auth != "Bearer "+fakeSecret || call.Key != "pay-key-1" || !sameJSON(t, call.Body, `{"payment_method":"pm_ok"}`) {
		t.Errorf("the pay reached payd as %+v, want the browser's client secret and key, and the payment method alone", call)
	}
	// The browser's word is not the shop's: only payd's event marks it paid.
	if o, _ := s.orders.get(fakeOrder); o.Status != "pending" {
		t.Errorf("the shop's order after the pay answer = %+v, want pending until payd's event", o)
	}
}

// sameJSON is true when a and b are the same JSON value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}

// TestCheckoutRefusals: a cart the page could not have sent is 400 and
// never reaches payd; a pay without a client secret is 401 and never
// reaches payd; payd's own refusal (out_of_stock) reaches the page as
// payd wrote it.
func TestCheckoutRefusals(t *testing.T) {
	f := &fakePayd{answers: map[string]func() (int, string){
		"POST /v1/orders": func() (int, string) {
			return 409, `{"type":"/problems/out_of_stock","code":"out_of_stock","status":409,"title":"Out of stock","sku":"notebook-a5"}`
		},
	}}
	s := checkoutShop(t, f)
	for name, body := range map[string]string{
		"no cart id":    `{"items":[{"sku":"tea-green","quantity":1}]}`,
		"no items":      `{"cart_id":"cart-0123456789","items":[]}`,
		"unknown sku":   `{"cart_id":"cart-0123456789","items":[{"sku":"car","quantity":1}]}`,
		"sku twice":     `{"cart_id":"cart-0123456789","items":[{"sku":"tea-green","quantity":1},{"sku":"tea-green","quantity":1}]}`,
		"zero":          `{"cart_id":"cart-0123456789","items":[{"sku":"tea-green","quantity":0}]}`,
		"too many":      `{"cart_id":"cart-0123456789","items":[{"sku":"tea-green","quantity":100}]}`,
		"not JSON":      `tea`,
		"bad cart id":   `{"cart_id":"a b","items":[{"sku":"tea-green","quantity":1}]}`,
		"quantity text": `{"cart_id":"cart-0123456789","items":[{"sku":"tea-green","quantity":"1"}]}`,
	} {
		if rec := serve(s, httptestRequest(http.MethodPost, "/api/orders", body)); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, rec.Code, rec.Body)
		}
	}
	pay := httptestRequest(http.MethodPost, "/api/orders/"+fakeOrder+"/pay", `{"payment_method":"pm_ok"}`)
	if rec := serve(s, pay); rec.Code != http.StatusUnauthorized {
		t.Errorf("a pay without a client secret = %d, want 401", rec.Code)
	}
	if n := len(f.calls()); n != 0 {
		t.Fatalf("payd was called %d times for requests the shop refuses", n)
	}
	rec := serve(s, httptestRequest(http.MethodPost, "/api/orders", `{"cart_id":"cart-0123456789","items":[{"sku":"notebook-a5","quantity":9}]}`))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), `"sku":"notebook-a5"`) ||
		rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("out of stock = %d %s %s, want payd's 409 problem naming the SKU", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// TestPaydAnswersNoCORS pins why the page pays through the shop
// (README.md): payd answers a browser's preflight for a cross-origin pay
// without Access-Control-Allow-Origin, so the browser would refuse to
// send it. Should payd ever allow it, the page could pay payd directly.
func TestPaydAnswersNoCORS(t *testing.T) {
	base := startPayd(t, nil)
	for _, method := range []string{http.MethodOptions, http.MethodPost} {
		req, err := http.NewRequest(method, base+"/v1/orders/"+fakeOrder+"/pay", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", "http://127.0.0.1:4242")
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("%s answered Access-Control-Allow-Origin: %q: payd allows cross-origin calls now; the page could pay payd directly", method, v)
		}
	}
}
