package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The order every benchmark order is, and its total in minor units: one
// unit of the catalogue's product (productBody, which the merchant's key
// creates before the buyers order it). The catalogue phase orders one unit
// of a product with counted stock instead (stockProductBody, its stock
// filled in by the run). The SKUs carry the run's tag (tagRun): a kept
// database (-preload-keep) holds an earlier run's products, and their
// stock.
var runTag, benchSKU, productBody, orderBody, stockSKU, stockProductBody, stockOrderBody string

// tagRun gives this run's products their own SKUs.
func tagRun() {
	runTag = randomHex()[:8]
	benchSKU = "bench-" + runTag
	productBody = `{"sku":"` + benchSKU + `","name":"Benchmark item","unit_price":"9.99","currency":"USD"}`
	orderBody = `{"items":[{"sku":"` + benchSKU + `","quantity":1}]}`
	stockSKU = "bench-stock-" + runTag
	stockProductBody = `{"sku":"` + stockSKU + `","name":"Benchmark item in stock","unit_price":"9.99","currency":"USD","stock":%d}`
	stockOrderBody = `{"items":[{"sku":"` + stockSKU + `","quantity":1}]}`
}

const (
	orderMinor    = 999
	orderCurrency = "USD"
	payBody       = `{"payment_method":"pm_ok"}`
)

// client talks to payd's API over keep-alive connections, one per worker.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, workers int) *client {
	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// reply is one answer of payd: status, body and whether it was a replay.
type reply struct {
	status   int
	body     []byte
	replayed bool
}

// post sends one JSON request and reads the whole answer (so the
// connection goes back to the pool).
func (c *client) post(ctx context.Context, path, token, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, body: b, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}, nil
}

// customer is a registered customer: its ID, email and bearer token.
type customer struct{ ID, Email, Token string }

func (c *client) register(ctx context.Context, i int, key string) (customer, error) {
	body := fmt.Sprintf(`{"email":"bench-%d-%s@example.com","name":"Bench %d"}`, i, key[:8], i)
	r, err := c.post(ctx, "/v1/customers", "", key, body)
	if err := expect(r, err, http.StatusCreated, false); err != nil {
		return customer{}, fmt.Errorf("register: %w", err)
	}
	var out struct {
		Customer struct{ ID string }
		Token    string
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		return customer{}, fmt.Errorf("register: %w", err)
	}
	return customer{ID: out.Customer.ID, Email: fmt.Sprintf("bench-%d-%s@example.com", i, key[:8]), Token: out.Token}, nil
}

// createProduct puts a product of the benchmark (body) in the catalogue
// with the merchant's key, under key.
func (c *client) createProduct(ctx context.Context, merchantKey, key, body string) error {
	r, err := c.post(ctx, "/v1/products", merchantKey, key, body)
	if err := expect(r, err, http.StatusCreated, false); err != nil {
		return fmt.Errorf("create product: %w", err)
	}
	return nil
}

// stockOf reads what is left of sku's counted stock, as the storefront does.
func (c *client) stockOf(ctx context.Context, sku string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/products/"+sku, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read product %s: %w", sku, err)
	}
	defer resp.Body.Close()
	var out struct{ Stock *int64 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Stock == nil {
		return 0, fmt.Errorf("read product %s: status %d, stock %v, %v", sku, resp.StatusCode, out.Stock, err)
	}
	return *out.Stock, nil
}

func (c *client) createOrder(ctx context.Context, token string) (string, error) {
	return c.createOrderOf(ctx, token, orderBody)
}

// createOrderOf creates the order body asks for and returns its ID.
func (c *client) createOrderOf(ctx context.Context, token, body string) (string, error) {
	r, err := c.post(ctx, "/v1/orders", token, "", body)
	if err := expect(r, err, http.StatusCreated, false); err != nil {
		return "", fmt.Errorf("create order: %w", err)
	}
	var out struct{ ID string }
	if err := json.Unmarshal(r.body, &out); err != nil {
		return "", fmt.Errorf("create order: %w", err)
	}
	return out.ID, nil
}

// pay pays order id under key; a replay must be answered from the stored
// record (Idempotent-Replayed), a new pay must not.
func (c *client) pay(ctx context.Context, token, id, key string, replay bool) ([]byte, error) {
	r, err := c.post(ctx, "/v1/orders/"+id+"/pay", token, key, payBody)
	if err := expect(r, err, http.StatusOK, replay); err != nil {
		return nil, fmt.Errorf("pay: %w", err)
	}
	return r.body, nil
}

// expect checks an answer's status and whether it was a replay.
func expect(r reply, err error, status int, replayed bool) error {
	switch {
	case err != nil:
		return err
	case r.status != status:
		return fmt.Errorf("status %d, want %d: %.200s", r.status, status, r.body)
	case r.replayed != replayed:
		return fmt.Errorf("Idempotent-Replayed = %t, want %t", r.replayed, replayed)
	}
	return nil
}
