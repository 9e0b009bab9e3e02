package sandbox_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// fastConfig keeps every delay in milliseconds so the tests stay quick.
func fastConfig(dbURL string) sandbox.Config {
	return sandbox.Config{
		DatabaseURL:     dbURL,
		AsyncDelay:      20 * time.Millisecond,
		PollInterval:    5 * time.Millisecond,
		RetryBase:       5 * time.Millisecond,
		RetryMax:        40 * time.Millisecond,
		DeliveryTimeout: 2 * time.Second,
	}
}

func chargeReq(key, method string) domain.ChargeRequest {
	return domain.ChargeRequest{
		IdempotencyKey: key, OrderID: "ord-" + key, Amount: decimal.RequireFromString("12.30"),
		Currency: "USD", PaymentMethod: method,
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// eventually polls cond for up to 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// received is one webhook request as the receiver saw it.
type received struct {
	header http.Header
	body   []byte
	event  domain.ProviderEvent
	at     time.Time
}

// receiver is a webhook endpoint that verifies every signature with the
// Standard Webhooks library, as payd does, and answers 500 to its first
// failFirst requests.
type receiver struct {
	*httptest.Server
	hook      *standardwebhooks.Webhook
	failFirst int

	mu       sync.Mutex
	calls    []received // every request, accepted or not
	accepted []received
	bad      int // requests whose signature did not verify
}

func newReceiver(t *testing.T, secret string, failFirst int) *receiver {
	t.Helper()
	hook, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{hook: hook, failFirst: failFirst}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	rec := received{header: req.Header.Clone(), body: body, at: time.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rec)
	if err := r.hook.Verify(body, req.Header); err != nil {
		r.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if len(r.calls) <= r.failFirst {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	ev, err := provider.ParseEvent(body)
	if err != nil {
		r.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rec.event = ev
	r.accepted = append(r.accepted, rec)
	w.WriteHeader(http.StatusNoContent)
}

// waitAccepted waits until at least n requests were accepted and returns them.
func (r *receiver) waitAccepted(t *testing.T, n int) []received {
	t.Helper()
	eventually(t, "webhooks", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.accepted) >= n
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad != 0 {
		t.Errorf("receiver rejected %d requests with a bad signature or body", r.bad)
	}
	return append([]received(nil), r.accepted...)
}

func (r *receiver) allCalls() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.calls...)
}

// byKey returns the accepted events about the charge or refund with key.
func byKey(rs []received, key string) []domain.ProviderEvent {
	var out []domain.ProviderEvent
	for _, r := range rs {
		if r.event.IdempotencyKey == key {
			out = append(out, r.event)
		}
	}
	return out
}

// post sends a raw request to the sandbox API and returns status and body.
func post(t *testing.T, url, key, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(t, req)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// clock is a settable time source for Config.Clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// clockedSandbox starts a sandbox on dbURL whose time is the returned
// clock's, zero until Set.
func clockedSandbox(t *testing.T, dbURL string) (*sandboxtest.Sandbox, *clock) {
	t.Helper()
	clk := &clock{}
	cfg := fastConfig(dbURL)
	cfg.Clock = clk.Now
	return sandboxtest.New(t, cfg), clk
}
