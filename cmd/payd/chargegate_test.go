package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// chargeGate stands between payd and the provider. Armed for one order, it
// lets that order's charge through to the provider and, once the provider
// has answered, runs a hook before the answer goes back to payd: the hook
// acts at the moment "the provider charged, payd does not know yet". It
// can also hold every charge's answer for a while, which widens that
// moment for payments racing a database restart.
type chargeGate struct {
	url   string
	delay time.Duration // how long each charge's answer is held

	mu    sync.Mutex
	order string       // the armed order; "" when disarmed
	hook  func() error // run once, for the armed order's charge
	done  chan error   // the hook's result
}

// gateHookKey carries the hook from the request to its response.
type gateHookKey struct{}

// startChargeGate proxies to the provider at providerURL, holding each
// charge's answer for delay.
func startChargeGate(t *testing.T, providerURL string, delay time.Duration) *chargeGate {
	t.Helper()
	target, err := url.Parse(providerURL)
	if err != nil {
		t.Fatal(err)
	}
	g := &chargeGate{delay: delay}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		// Runs after the provider answered and before payd reads a byte.
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodPost && resp.Request.URL.Path == "/v1/charges" {
				time.Sleep(g.delay)
			}
			if hook, ok := resp.Request.Context().Value(gateHookKey{}).(func()); ok {
				hook()
			}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			if hook := g.take(r); hook != nil {
				r = r.WithContext(context.WithValue(r.Context(), gateHookKey{}, hook))
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// arm makes the next charge of orderID run hook before payd hears the
// provider's answer. The returned channel delivers the hook's result.
func (g *chargeGate) arm(orderID string, hook func() error) <-chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.order, g.hook, g.done = orderID, hook, make(chan error, 1)
	return g.done
}

// take returns the hook for a charge request of the armed order, once,
// leaving the request's body as it found it.
func (g *chargeGate) take(r *http.Request) func() {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		OrderID string `json:"order_id"`
	}
	if err != nil || json.Unmarshal(body, &req) != nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.order == "" || req.OrderID != g.order {
		return nil
	}
	hook, done := g.hook, g.done
	g.order, g.hook = "", nil
	return func() { done <- hook() }
}
