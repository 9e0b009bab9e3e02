package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox"
)

// procProvider is the sandbox provider run inside the test process, so it
// outlives every payd process the test kills, with a log of the calls payd
// made to it: which idempotency keys it charged (POST) and asked about
// (GET), in the order they arrived.
type procProvider struct {
	t   *testing.T
	sb  *sandbox.Server
	url string

	mu      sync.Mutex
	calls   map[string][]string // idempotency key (the attempt ID) → "POST", "GET", ...
	refunds int

	hold atomic.Int64 // holdCharges: how long each charge request waits before the sandbox sees it
}

// holdCharges makes every charge request wait d before the sandbox handles
// it, and then be handled even if payd has gone meanwhile: a slow provider
// that already has the request on the wire.
func (p *procProvider) holdCharges(d time.Duration) { p.hold.Store(int64(d)) }

// startProcProvider runs a sandbox on loopback. webhookURL empty: it
// records its webhooks but delivers none, so whatever payd resolves it
// resolves by asking.
func startProcProvider(t *testing.T, webhookURL string) *procProvider {
	t.Helper()
	sb, err := sandbox.New(sandbox.Config{
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db"), WebhookURL: webhookURL,
		WebhookSecret: testWebhookSecret, RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &procProvider{t: t, sb: sb, calls: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: p.count(sb.Handler()), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		cancel()
		_ = hs.Close()
		<-served
		_ = sb.Close()
	})
	return p
}

// count notes each charge call before the sandbox handles it.
func (p *procProvider) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/charges":
			key := r.Header.Get("Idempotency-Key")
			p.calls[key] = append(p.calls[key], "POST")
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/charges/"):
			key := strings.TrimPrefix(r.URL.Path, "/v1/charges/")
			p.calls[key] = append(p.calls[key], "GET")
		case r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
			p.refunds++
		}
		p.mu.Unlock()
		if d := time.Duration(p.hold.Load()); d > 0 && r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			time.Sleep(d)
			r = r.WithContext(context.WithoutCancel(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

// callsFor is the calls made under one idempotency key, in order.
func (p *procProvider) callsFor(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls[key]...)
}

// refundCalls is how many refunds payd asked for.
func (p *procProvider) refundCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunds
}

// chargesOf is every charge the sandbox holds for an order.
func (p *procProvider) chargesOf(orderID string) []domain.Charge {
	p.t.Helper()
	all, err := p.sb.Charges(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	var out []domain.Charge
	for _, c := range all {
		if c.OrderID == orderID {
			out = append(out, c)
		}
	}
	return out
}

// hookRelay is a stable webhook URL for a payd that changes address with
// every restart: it forwards to the payd of the moment, and answers 502
// while there is none (503 is what payd itself says when its database is
// down), so the sandbox keeps retrying.
type hookRelay struct {
	url    string
	target atomic.Pointer[url.URL]
}

func startHookRelay(t *testing.T) *hookRelay {
	t.Helper()
	h := &hookRelay{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(h.target.Load()) },
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway) // payd is down: the sandbox retries
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String() + "/v1/webhooks/provider"
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.target.Load() == nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("webhook relay: %v", err)
		}
	}()
	t.Cleanup(func() { _ = hs.Close(); <-served })
	return h
}

// point sends webhooks to the payd at base from now on.
func (h *hookRelay) point(base string) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	h.target.Store(u)
}
