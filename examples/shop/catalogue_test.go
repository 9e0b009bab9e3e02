package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/app"
	"github.com/payd/payd/client"
)

const testMerchantKey = "sk_test_shop_0123456789abcdef0123456789"

// startPayd runs a payd of the test's own (development, SQLite in a
// temporary folder, the sandbox in-process) with extra settings, and
// answers its address.
func startPayd(t *testing.T, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"PAYD_DATABASE_URL":         "sqlite://" + filepath.Join(dir, "payd.db"),
		"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(dir, "sandbox.db"),
		"PAYD_SHUTDOWN_DELAY":       "0",
		"PAYD_RATE_LIMIT":           "0",
		"PAYD_MERCHANT_KEY":         testMerchantKey,
	}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := app.LoadConfig("serve", func(k string) string { return env[k] }, func(fs *flag.FlagSet) error {
		fs.SetOutput(io.Discard)
		return fs.Parse(nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	a, err := app.Build(ctx, cfg, app.Listener(ln), app.Logs(io.Discard), app.Banner(io.Discard))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		<-served
		a.Close()
	})
	return "http://" + ln.Addr().String()
}

// syncShop is a shop selling products through the payd at base, and a
// counter of the catalogue writes it sends.
func syncShop(t *testing.T, base string, products []product) (*shop, *writes) {
	t.Helper()
	w := &writes{next: http.DefaultTransport}
	p, err := newPayd(base, testMerchantKey, client.WithHTTPClient(&http.Client{Transport: w}))
	if err != nil {
		t.Fatal(err)
	}
	return &shop{payd: p, catalogue: products, orders: newOrderBook(), log: slog.New(slog.DiscardHandler), out: io.Discard}, w
}

// writes counts the writes a shop sends payd, by method, and what payd
// answered.
type writes struct {
	next http.RoundTripper
	log  []string // "POST 201", "PATCH 200 replayed", ...
}

func (w *writes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	if err == nil && r.Method != http.MethodGet {
		e := r.Method + " " + resp.Status[:3]
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			e += " replayed"
		}
		w.log = append(w.log, e)
	}
	return resp, err
}

func (w *writes) take() string {
	s := strings.Join(w.log, ", ")
	w.log = nil
	return s
}

// merchant is the test's own merchant client: someone else changing the
// catalogue between the shop's starts.
func merchant(t *testing.T, base string) *payd {
	t.Helper()
	p, err := newPayd(base, testMerchantKey)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func shownAs(t *testing.T, p *payd, sku string) client.Product {
	t.Helper()
	got, ok, err := p.shown(context.Background(), sku)
	if err != nil || !ok {
		t.Fatalf("%s is not shown: %v", sku, err)
	}
	return got
}

// TestSyncCatalogue: the shop's catalogue reaches payd on the first start
// and a restart sends the same creations, replayed, without a change; a
// new price is PATCHed; a product someone else changed or hid since is
// brought back; the stock the shop created a product with is not reset.
func TestSyncCatalogue(t *testing.T) {
	base := startPayd(t, nil)
	ctx := context.Background()
	want := []product{
		{SKU: "mug", Name: "Mug", UnitPrice: "12.00", Currency: "USD", Stock: stock(3)},
		{SKU: "tea", Name: "Tea", UnitPrice: "4.95", Currency: "USD"},
	}
	s, w := syncShop(t, base, want)
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got != "POST 201, POST 201" {
		t.Errorf("first start sent %s, want two creations", got)
	}
	list, err := s.payd.products(ctx)
	mine := 0 // a development payd starts with demo products of its own
	for _, p := range list {
		if p.Sku == "mug" || p.Sku == "tea" {
			mine++
		}
	}
	if err != nil || mine != 2 {
		t.Fatalf("payd shows %d of the shop's products (%v), want 2", mine, err)
	}
	if m := shownAs(t, s.payd, "mug"); m.Name != "Mug" || m.UnitPrice != "12.00" || m.Stock == nil || *m.Stock != 3 {
		t.Errorf("mug = %+v", m)
	}

	// A restart: the same creations, replayed; nothing changes.
	s, w = syncShop(t, base, want)
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got != "POST 201 replayed, POST 201 replayed" {
		t.Errorf("a restart sent %s, want the two creations replayed and nothing else", got)
	}

	// The stock moves in payd (orders take it); someone changes the tea's
	// price and hides the mug. The next start puts both back as the shop
	// wants them, and leaves the stock as payd has it.
	other := merchant(t, base)
	if r, err := other.c.AdjustProductStockWithResponse(ctx, "mug", &client.AdjustProductStockParams{IdempotencyKey: ptr(uuid.NewString())},
		client.AdjustProductStockJSONRequestBody{Adjust: -2}, other.asMerchant); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("adjust: %v %s", err, r.Body)
	}
	for sku, ch := range map[string]client.UpdateProductRequest{"tea": {UnitPrice: ptr("3.00")}, "mug": {Active: ptr(false)}} {
		if r, err := other.c.UpdateProductWithResponse(ctx, sku, &client.UpdateProductParams{IdempotencyKey: ptr(uuid.NewString())}, ch, other.asMerchant); err != nil || r.StatusCode() != http.StatusOK {
			t.Fatalf("someone else's change of %s: %v %s", sku, err, r.Body)
		}
	}
	s, w = syncShop(t, base, want)
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got != "POST 201 replayed, PATCH 200, POST 201 replayed, PATCH 200" {
		t.Errorf("after someone else's changes the shop sent %s, want each product PATCHed back", got)
	}
	if m := shownAs(t, s.payd, "mug"); m.Stock == nil || *m.Stock != 1 {
		t.Errorf("mug = %+v, want shown again with the stock payd holds (1)", m)
	}
	if tea := shownAs(t, s.payd, "tea"); tea.UnitPrice != "4.95" {
		t.Errorf("tea = %+v, want 4.95 again", tea)
	}

	// The same again: the hidden mug is hidden a second time. A PATCH
	// keyed by the wanted content alone would now be replayed, not done.
	if r, err := other.c.UpdateProductWithResponse(ctx, "mug", &client.UpdateProductParams{IdempotencyKey: ptr(uuid.NewString())},
		client.UpdateProductRequest{Active: ptr(false)}, other.asMerchant); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("hide the mug again: %v %s", err, r.Body)
	}
	s, _ = syncShop(t, base, want)
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	shownAs(t, s.payd, "mug")

	// A new price in the shop's catalogue: its creation is a new key,
	// answered 409 sku_taken, and the price is PATCHed.
	want[1].UnitPrice = "5.25"
	s, w = syncShop(t, base, want)
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); got != "POST 201 replayed, POST 409, PATCH 200" {
		t.Errorf("a new price sent %s, want the tea's creation refused as sku_taken and a PATCH", got)
	}
	if tea := shownAs(t, s.payd, "tea"); tea.UnitPrice != "5.25" {
		t.Errorf("tea = %+v, want 5.25", tea)
	}
}

// TestSyncRefusals: what no retry changes ends the start with payd's
// answer: a wrong merchant key, a product payd refuses, a currency that
// differs from the one payd holds the SKU in.
func TestSyncRefusals(t *testing.T) {
	base := startPayd(t, nil)
	ctx := context.Background()
	s, _ := syncShop(t, base, []product{{SKU: "mug", Name: "Mug", UnitPrice: "12.00", Currency: "USD"}})
	s.payd.merchantKey = "sk_not_the_key_0123456789abcdef0123"
	var r *refusal
	if err := s.syncCatalogue(ctx); !asRefusal(err, &r) || r.status != http.StatusUnauthorized {
		t.Errorf("a wrong key: %v, want payd's 401 as a refusal", err)
	}
	s, _ = syncShop(t, base, []product{{SKU: "mug", Name: "Mug", UnitPrice: "-1", Currency: "USD"}})
	if err := s.syncCatalogue(ctx); !asRefusal(err, &r) || r.status != http.StatusBadRequest {
		t.Errorf("a negative price: %v, want payd's 400 as a refusal", err)
	}
	s, _ = syncShop(t, base, []product{{SKU: "mug", Name: "Mug", UnitPrice: "12.00", Currency: "USD"}})
	if err := s.syncCatalogue(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ = syncShop(t, base, []product{{SKU: "mug", Name: "Mug", UnitPrice: "12.00", Currency: "EUR"}})
	if err := s.syncCatalogue(ctx); !asRefusal(err, &r) || !strings.Contains(err.Error(), "currency") {
		t.Errorf("another currency: %v, want a refusal naming the currency", err)
	}
}

func asRefusal(err error, r **refusal) bool { return errors.As(err, r) }

func httptestRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestSyncWaitsForPayd: a shop started before payd keeps trying, and
// serves its page meanwhile; order creation waits for the catalogue.
func TestSyncWaitsForPayd(t *testing.T) {
	s, _ := syncShop(t, "http://127.0.0.1:1", catalogue) // nothing listens on port 1
	s.hooks, _ = newWebhooks([]string{testNotifySecret}, s.log, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.syncUntilDone(ctx) }()
	rec := serve(s, httptestRequest(http.MethodPost, "/api/orders", `{"cart_id":"0123456789","items":[{"sku":"tea-green","quantity":1}]}`))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("an order before the catalogue is in payd = %d, want 503 with Retry-After", rec.Code)
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("the sync ended without error, with payd unreachable")
	}
	if s.ready.Load() {
		t.Error("the shop is ready without its catalogue in payd")
	}
}
