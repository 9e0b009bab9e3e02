package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
	"github.com/payd/payd/web"
)

// slow is a refill so slow that no test sees a request come back: only
// the burst counts.
const slow = 0.001

// tokenCustomers is the customers' port with fixed tokens; two tokens may
// name one customer. It counts the tokens it is asked about.
type tokenCustomers struct {
	byToken map[string]string // token → customer ID
	asked   atomic.Int64
}

func (f *tokenCustomers) Authenticate(_ context.Context, tok string) (domain.Customer, error) {
	f.asked.Add(1)
	if id, ok := f.byToken[tok]; ok {
		return domain.Customer{ID: id}, nil
	}
	return domain.Customer{}, domain.ErrUnauthorized
}

func (f *tokenCustomers) Register(context.Context, service.Keyed, string, string) (domain.Customer, string, error) {
	return domain.Customer{}, "", domain.ErrUnauthorized
}

// emptyOrders answers every customer's list with no orders.
type emptyOrders struct {
	OrderService
	OrderWatcher
}

func (emptyOrders) List(context.Context, domain.OrderFilter) (domain.OrderPage, error) {
	return domain.OrderPage{}, nil
}

const adminTok = "adm_ratelimit_test_0123456789abcdef"

// limitedServer is payd's routes with rl's limits, customers a (tokens
// a1, a2) and b, the shared admin token and operator alice.
func limitedServer(t *testing.T, rl RateLimits) (http.Handler, *tokenCustomers) {
	t.Helper()
	custs := &tokenCustomers{byToken: map[string]string{"a1": "cust-a", "a2": "cust-a", "b": "cust-b"}}
	e := New(Deps{Log: slog.New(slog.DiscardHandler), Customers: custs, Orders: emptyOrders{}, Admin: &Admin{},
		AdminToken: adminTok, Operators: []Operator{{Name: "alice", Token: "alice-token-0123456789abcdef"}},
		RateLimits: rl})
	return e, custs
}

// call is one request from ip (host only) with token as the bearer.
func call(h http.Handler, method, path, ip, token string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = net.JoinHostPort(ip, "40000")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// wantLimited checks a 429 rate_limited answer of policy, with its fields.
func wantLimited(t *testing.T, w *httptest.ResponseRecorder, policy string, q, window int) {
	t.Helper()
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status = %d %s, want 429", w.Code, w.Body)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != "rate_limited" || p.Type != "/problems/rate_limited" || p.Status != 429 {
		t.Errorf("body = %s (%v), want a rate_limited problem", w.Body, err)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want whole seconds, at least 1", w.Header().Get("Retry-After"))
	}
	if got, want := w.Header().Get("RateLimit-Policy"), fmt.Sprintf(`"%s";q=%d;w=%d`, policy, q, window); got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), fmt.Sprintf(`"%s";r=0;t=%d`, policy, ra); got != want {
		t.Errorf("RateLimit = %q, want %q (the reset no sooner than Retry-After)", got, want)
	}
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, what string, want int) {
	t.Helper()
	if w.Code != want {
		t.Fatalf("%s = %d %s, want %d", what, w.Code, w.Body, want)
	}
}

// TestRateLimitFields: the RateLimit-Policy and RateLimit fields in the
// structured-field form of draft-ietf-httpapi-ratelimit-headers, on
// allowed answers and on the 429, from a bucket of 20 per second and 40 at
// once on a clock the test moves.
func TestRateLimitFields(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	l := newLimit(telemetry.LimitCustomer, 20, 40, telemetry.NewMetrics())
	l.now = func() time.Time { return clock }
	if l.policy != `"customer";q=40;w=2` {
		t.Errorf("policy = %s, want \"customer\";q=40;w=2", l.policy)
	}
	for i := range 40 {
		q, _, ok := l.take("c1")
		if !ok || q.remaining != 39-i || q.reset != 1 {
			t.Fatalf("take %d = %+v %t, want r=%d t=1 allowed", i+1, q, ok, 39-i)
		}
	}
	_, wait, ok := l.take("c1")
	if ok || wait != 50*time.Millisecond || seconds(wait) != 1 {
		t.Fatalf("take 41 = %v %t, want refused for 50ms (Retry-After 1)", wait, ok)
	}
	clock = clock.Add(time.Second) // 20 back
	if q, _, ok := l.take("c1"); !ok || q.remaining != 19 {
		t.Errorf("after 1s: %+v %t, want r=19", q, ok)
	}

	half := newLimit(telemetry.LimitIP, 0.5, 1, telemetry.NewMetrics())
	half.now = func() time.Time { return clock }
	if half.policy != `"ip";q=1;w=2` {
		t.Errorf("policy = %s, want \"ip\";q=1;w=2", half.policy)
	}
	if q, _, ok := half.take("x"); !ok || q != (quota{remaining: 0, reset: 2}) {
		t.Errorf("take = %+v %t, want r=0 t=2", q, ok)
	}
	clock = clock.Add(500 * time.Millisecond)
	if _, wait, ok := half.take("x"); ok || seconds(wait) != 2 {
		t.Errorf("take over = %v %t, want refused, Retry-After 2 (1.5s rounded up)", wait, ok)
	}
}

// TestRateLimitPerCustomer: customers are limited by customer ID, not by
// token nor by address: one customer's burst leaves another's whole, and
// two tokens of one customer share its quota.
func TestRateLimitPerCustomer(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 3})
	for i, tok := range []string{"a1", "a2", "a1"} {
		w := call(e, "GET", "/v1/orders", "192.0.2.1", tok)
		wantStatus(t, w, fmt.Sprintf("request %d of customer a", i+1), 200)
		if got, want := w.Header().Get("RateLimit"), fmt.Sprintf(`"customer";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
			t.Errorf("RateLimit = %q, want %s...", got, want)
		}
	}
	wantLimited(t, call(e, "GET", "/v1/orders", "192.0.2.1", "a2"), "customer", 3, 3000)
	for i := range 3 { // same address, another customer
		wantStatus(t, call(e, "GET", "/v1/orders", "192.0.2.1", "b"), fmt.Sprintf("request %d of customer b", i+1), 200)
	}
	wantLimited(t, call(e, "GET", "/v1/orders", "192.0.2.1", "b"), "customer", 3, 3000)
	if got := scrape(t, e); !strings.Contains(got, `payd_rate_limited_total{limit="customer"} 2`) {
		t.Errorf("metrics lack payd_rate_limited_total{limit=\"customer\"} 2:\n%s", grepLines(got, "payd_rate_limited"))
	}
}

// TestRateLimitFailedAuthByIP: requests whose token fails are limited by
// client IP, and past the limit refused before the token is looked up;
// requests that authenticate spend nothing of their address's quota.
func TestRateLimitFailedAuthByIP(t *testing.T) {
	e, custs := limitedServer(t, RateLimits{Rate: slow, Burst: 3})
	for range 3 { // a's own quota, from the address that then fails
		wantStatus(t, call(e, "GET", "/v1/orders", "198.51.100.7", "a1"), "customer a", 200)
	}
	for i, tok := range []string{"nope", "", "nope"} {
		wantStatus(t, call(e, "GET", "/v1/orders", "198.51.100.7", tok), fmt.Sprintf("bad token %d", i+1), 401)
	}
	asked := custs.asked.Load()
	for range 5 {
		wantLimited(t, call(e, "GET", "/v1/orders", "198.51.100.7", "made-up"), "ip", 3, 3000)
		wantLimited(t, call(e, "GET", "/v1/admin/whoami", "198.51.100.7", "made-up"), "ip", 3, 3000)
	}
	if n := custs.asked.Load() - asked; n != 0 {
		t.Errorf("tokens looked up past the limit = %d, want 0", n)
	}
	// Even a good token from that address waits: nothing tells it apart
	// before the lookup the limit saves.
	wantLimited(t, call(e, "GET", "/v1/orders", "198.51.100.7", "b"), "ip", 3, 3000)
	wantStatus(t, call(e, "GET", "/v1/orders", "198.51.100.8", "nope"), "bad token from elsewhere", 401)
	wantStatus(t, call(e, "GET", "/v1/orders", "198.51.100.8", "b"), "customer b from elsewhere", 200)
}

// TestRateLimitPublicSparesTokens: requests without a token (pages,
// registration) spend their address's quota, and failed authentications
// spend a quota of their own: behind one proxy address, however many pages
// its users load, a valid token is still served.
func TestRateLimitPublicSparesTokens(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 2})
	for range 2 {
		wantStatus(t, call(e, "GET", "/openapi.yaml", "198.51.100.20", ""), "document", 200)
	}
	wantLimited(t, call(e, "GET", "/openapi.yaml", "198.51.100.20", ""), "ip", 2, 2000)
	wantStatus(t, call(e, "GET", "/v1/orders", "198.51.100.20", "a1"), "customer a after the address's pages", 200)
	wantStatus(t, call(e, "GET", "/v1/admin/whoami", "198.51.100.20", adminTok), "operator after the address's pages", 200)
}

// TestRateLimitOperators: operators are limited by name, apart from the
// customers and from each other.
func TestRateLimitOperators(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 2})
	for _, tok := range []string{adminTok, "alice-token-0123456789abcdef"} {
		for range 2 {
			wantStatus(t, call(e, "GET", "/v1/admin/whoami", "192.0.2.1", tok), "operator", 200)
		}
		wantLimited(t, call(e, "GET", "/v1/admin/whoami", "192.0.2.1", tok), "operator", 2, 2000)
	}
	wantStatus(t, call(e, "GET", "/v1/orders", "192.0.2.1", "a1"), "customer a", 200)
	// A customer token on an operator route fails there: the address pays.
	wantStatus(t, call(e, "GET", "/v1/admin/whoami", "192.0.2.1", "a1"), "customer token on an operator route", 403)
}

// TestRateLimitPublicByIP: routes without a token are limited by client
// IP, IPv6 by its /64; X-Forwarded-For is believed only from a trusted
// proxy.
func TestRateLimitPublicByIP(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 2})
	for _, path := range []string{"/openapi.yaml", "/problems/rate_limited"} {
		wantStatus(t, call(e, "GET", path, "203.0.113.1", ""), path, 200)
	}
	for _, r := range []struct{ method, path string }{{"POST", "/v1/customers"}, {"GET", web.Prefix}, {"GET", web.ConsolePrefix + "/"}} {
		wantLimited(t, call(e, r.method, r.path, "203.0.113.1", ""), "ip", 2, 2000)
	}
	wantStatus(t, call(e, "GET", web.Prefix, "203.0.113.3", ""), "checkout page", 200)
	wantLimited(t, call(e, "GET", "/openapi.yaml", "203.0.113.1", "", "X-Forwarded-For", "198.51.100.99"), "ip", 2, 2000)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "203.0.113.2", ""), "another address", 200)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "::ffff:203.0.113.2", ""), "that address, IPv4-mapped", 200)
	wantLimited(t, call(e, "GET", "/openapi.yaml", "203.0.113.2", ""), "ip", 2, 2000)

	wantStatus(t, call(e, "GET", "/openapi.yaml", "2001:db8::1", ""), "IPv6", 200)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "2001:db8::2", ""), "IPv6, same /64", 200)
	wantLimited(t, call(e, "GET", "/openapi.yaml", "2001:db8::3", ""), "ip", 2, 2000)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "2001:db8:0:1::1", ""), "IPv6, another /64", 200)

	_, proxy, _ := net.ParseCIDR("10.1.0.0/16")
	e, _ = limitedServer(t, RateLimits{Rate: slow, Burst: 1, TrustedProxies: []*net.IPNet{proxy}})
	wantStatus(t, call(e, "GET", "/openapi.yaml", "10.1.2.3", "", "X-Forwarded-For", "198.51.100.1"), "client 1 by the proxy", 200)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "10.1.2.3", "", "X-Forwarded-For", "198.51.100.2"), "client 2 by the proxy", 200)
	wantLimited(t, call(e, "GET", "/openapi.yaml", "10.1.2.4", "", "X-Forwarded-For", "198.51.100.1"), "ip", 1, 1000)
	// A hop the proxy did not add is the client's word: the proxy's view wins.
	wantStatus(t, call(e, "GET", "/openapi.yaml", "10.1.2.3", "", "X-Forwarded-For", "198.51.100.1, 198.51.100.3"), "client 3", 200)
	wantStatus(t, call(e, "GET", "/openapi.yaml", "192.0.2.50", "", "X-Forwarded-For", "198.51.100.4"), "untrusted peer", 200)
	wantLimited(t, call(e, "GET", "/openapi.yaml", "192.0.2.50", "", "X-Forwarded-For", "198.51.100.5"), "ip", 1, 1000)
}

// TestRateLimitNeverProbes: the probes and /metrics answer however many
// requests come, and carry no limit's fields.
func TestRateLimitNeverProbes(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 1, WebhookRate: slow, WebhookBurst: 1})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for i := range 20 {
			w := call(e, "GET", path, "192.0.2.1", "")
			if w.Code != 200 || w.Header().Get("RateLimit") != "" {
				t.Fatalf("GET %s #%d = %d with RateLimit %q, want 200 and no limit", path, i+1, w.Code, w.Header().Get("RateLimit"))
			}
		}
	}
}

// TestRateLimitOff: a zero rate or a zero burst turns a limit off.
func TestRateLimitOff(t *testing.T) {
	for _, rl := range []RateLimits{{}, {Rate: 0, Burst: 40}, {Rate: 20, Burst: 0}} {
		e, _ := limitedServer(t, rl)
		for i := range 100 {
			for _, r := range []struct{ path, token string }{{"/v1/orders", "a1"}, {"/openapi.yaml", ""}, {"/v1/orders", "nope"}, {"/v1/admin/whoami", adminTok}} {
				w := call(e, "GET", r.path, "192.0.2.1", r.token)
				if w.Code == http.StatusTooManyRequests || w.Header().Get("RateLimit-Policy") != "" {
					t.Fatalf("%+v: GET %s #%d = %d with policy %q, want no limit", rl, r.path, i+1, w.Code, w.Header().Get("RateLimit-Policy"))
				}
			}
			wantStatus(t, call(e, "POST", "/v1/webhooks/provider", "192.0.2.1", ""), "webhook", 404)
		}
	}
}

// TestRateLimitWebhooksApart: provider webhooks have their own limit per
// source; spending it leaves the other limits whole, and the reverse.
func TestRateLimitWebhooksApart(t *testing.T) {
	e, _ := limitedServer(t, RateLimits{Rate: slow, Burst: 2, WebhookRate: slow, WebhookBurst: 5})
	for range 2 {
		wantStatus(t, call(e, "GET", "/openapi.yaml", "192.0.2.9", ""), "document", 200)
	}
	wantLimited(t, call(e, "GET", "/openapi.yaml", "192.0.2.9", ""), "ip", 2, 2000)
	for _, path := range []string{"/v1/webhooks/provider", "/v1/webhooks/stripe"} {
		for i := range 5 {
			// No receiver in either mode here: 404 once past the limit.
			wantStatus(t, call(e, "POST", path, "192.0.2.10", ""), fmt.Sprintf("webhook %d", i+1), 404)
		}
		wantLimited(t, call(e, "POST", path, "192.0.2.10", ""), "webhook", 5, 5000)
		e, _ = limitedServer(t, RateLimits{Rate: slow, Burst: 2, WebhookRate: slow, WebhookBurst: 5})
	}
	wantStatus(t, call(e, "GET", "/openapi.yaml", "192.0.2.10", ""), "document from the webhook source", 200)
}

// TestRateLimitSeriesStartAtZero: every limit's refusals are a series from
// the start.
func TestRateLimitSeriesStartAtZero(t *testing.T) {
	e := New(Deps{Log: slog.New(slog.DiscardHandler)})
	got := scrape(t, e)
	for _, l := range telemetry.RateLimits {
		if !strings.Contains(got, `payd_rate_limited_total{limit="`+string(l)+`"} 0`) {
			t.Errorf("no payd_rate_limited_total{limit=%q} 0 before any request:\n%s", l, grepLines(got, "payd_rate_limited"))
		}
	}
	ls := newLimiters(RateLimits{Rate: 1, Burst: 1, WebhookRate: 1, WebhookBurst: 1}, telemetry.NewMetrics())
	for _, l := range []*limit{ls.customer, ls.operator, ls.merchant, ls.ip, ls.webhook} {
		found := false
		for _, name := range telemetry.RateLimits {
			found = found || name == l.name
		}
		if !found {
			t.Errorf("limit %q is not among telemetry.RateLimits", l.name)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
