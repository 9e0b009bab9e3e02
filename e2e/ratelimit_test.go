package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/sandbox"
)

// TestRateLimitBurst: 50 concurrent requests of one customer against a
// limit of 5 per second and 10 at once get 429 rate_limited problems with
// Retry-After and the RateLimit fields, never a 5xx; after Retry-After the
// customer is served again, and another customer never waited.
func TestRateLimitBurst(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_RATE_LIMIT": "5", "PAYD_RATE_LIMIT_BURST": "10"}))
		_, tok := s.register(newEmail())
		_, other := s.register(newEmail())
		id := s.order(tok, "12.30")

		var mu sync.Mutex
		statuses := map[int]int{}
		var limited []reply
		began := time.Now()
		forEach(50, 50, func(int) {
			r, err := s.send(request{method: "GET", path: "/v1/orders/" + id, token: tok})
			if err != nil {
				t.Errorf("GET order: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == http.StatusTooManyRequests {
				limited = append(limited, r)
			}
		})
		took := time.Since(began)
		t.Logf("statuses in %v: %v", took, statuses)
		// The burst, less the order's create, and what refilled meanwhile.
		most := 9 + int(math.Ceil(5*took.Seconds()))
		if statuses[200]+statuses[429] != 50 || statuses[200] < 9 || statuses[200] > most || statuses[429] == 0 {
			t.Errorf("statuses = %v, want only 200 and 429, 9 to %d of 200 (the burst after the order's create, and 5/s since)", statuses, most)
		}
		retry := 0
		for _, r := range limited {
			if c := r.code(t); c != "rate_limited" {
				t.Errorf("429 code = %q, want rate_limited", c)
			}
			ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || ra < 1 {
				t.Errorf("Retry-After = %q, want whole seconds ≥ 1", r.Header.Get("Retry-After"))
			}
			retry = max(retry, ra)
			if got := r.Header.Get("RateLimit-Policy"); got != `"customer";q=10;w=2` {
				t.Errorf("RateLimit-Policy = %q, want \"customer\";q=10;w=2", got)
			}
			if got, want := r.Header.Get("RateLimit"), fmt.Sprintf(`"customer";r=0;t=%d`, ra); got != want {
				t.Errorf("RateLimit = %q, want %q", got, want)
			}
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: other}); r.Status != http.StatusNotFound {
			t.Errorf("another customer's GET = %d %s, want 404 (its own quota, another's order)", r.Status, r.Body)
		}
		time.Sleep(time.Duration(retry) * time.Second)
		r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: tok})
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("RateLimit"), `"customer";r=`) {
			t.Errorf("after Retry-After: %d RateLimit %q, want 200 with the customer's quota", r.Status, r.Header.Get("RateLimit"))
		}
		text := string(s.do(request{method: "GET", path: "/metrics"}).Body)
		if got := metricValue(t, text, `payd_rate_limited_total{limit="customer"}`); got != float64(statuses[429]) {
			t.Errorf("payd_rate_limited_total{limit=customer} = %v, want %d", got, statuses[429])
		}
	})
}

// TestRateLimitCountsReplays: an idempotent replay spends the caller's
// quota like any request, though it runs nothing again.
func TestRateLimitCountsReplays(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_RATE_LIMIT": "0.01", "PAYD_RATE_LIMIT_BURST": "3"}))
		_, tok := s.register(newEmail())
		create := request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(), body: client.CreateOrderRequest{
			Items: []client.ItemRequest{item(s.priced("4.00"))}}}
		for i := range 3 {
			r := s.do(create)
			if r.Status != http.StatusCreated || (i > 0) != (r.Header.Get("Idempotent-Replayed") == "true") {
				t.Fatalf("create #%d = %d replayed %q, want 201 (a replay after the first)", i+1, r.Status, r.Header.Get("Idempotent-Replayed"))
			}
			if got, want := r.Header.Get("RateLimit"), fmt.Sprintf(`"customer";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
				t.Errorf("create #%d: RateLimit = %q, want %s...", i+1, got, want)
			}
		}
		if r := s.do(create); r.Status != http.StatusTooManyRequests || r.code(t) != "rate_limited" {
			t.Errorf("fourth create (a replay) = %d %s, want 429 rate_limited", r.Status, r.Body)
		}
		if n := s.count("orders"); n != 1 {
			t.Errorf("orders = %d, want 1", n)
		}
	})
}

// TestRateLimitWebhookStorm: 200 orders paid asynchronously, each event
// delivered three times by the sandbox, with customers under the default
// limit (20 per second, 40 at once; the checkout retries after
// Retry-After, with the same key): webhooks have their own limit, no
// delivery is refused, and none is lost. Under a webhook limit the
// deliveries do exceed, each refused delivery comes again and none is
// lost either: every order ends paid, every event is recorded once.
func TestRateLimitWebhookStorm(t *testing.T) {
	testdeps.RequireFull(t, "a storm of 200 orders' webhooks, twice")
	for _, tt := range []struct {
		name        string
		env         env
		wantRefused bool
	}{
		{"default webhook limit", env{"PAYD_WEBHOOK_RATE_LIMIT": "500", "PAYD_WEBHOOK_RATE_LIMIT_BURST": "1000"}, false},
		{"webhook limit exceeded", env{"PAYD_WEBHOOK_RATE_LIMIT": "50", "PAYD_WEBHOOK_RATE_LIMIT_BURST": "10"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, dialect string) {
				e := env{"PAYD_RATE_LIMIT": "20", "PAYD_RATE_LIMIT_BURST": "40"}
				for k, v := range tt.env {
					e[k] = v
				}
				s := start(t, on(dialect), withEnv(e), tuned(func(c *sandbox.Config) {
					c.Duplicates, c.Reorder, c.ReorderWindow, c.BatchSize, c.RetryMax = 3, true, 100*time.Millisecond, 64, 400*time.Millisecond
				}))
				s.rateLimitedStorm(200, tt.wantRefused)
			})
		})
	}
}

// rateLimitedStorm pays n orders with pm_async among a few customers, as a
// client that honours Retry-After, and checks that every event arrived.
func (s *stack) rateLimitedStorm(n int, wantRefused bool) {
	t := s.t
	tokens := make([]string, 4)
	for i := range tokens {
		_, tokens[i] = s.register(newEmail())
	}
	ids := make([]string, n)
	skus := make([]string, 5) // made before the storm: the merchant's quota is not the test's subject
	for i := range skus {
		skus[i] = s.priced(fmt.Sprintf("%d.00", 1+i))
	}
	var waited sync.Map
	forEach(16, n, func(i int) {
		tok := tokens[i%len(tokens)]
		r := s.politely(&waited, request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(), body: client.CreateOrderRequest{
			Items: []client.ItemRequest{item(skus[i%len(skus)])}}})
		if r.Status != http.StatusCreated {
			t.Errorf("create order = %d %s, want 201", r.Status, r.Body)
			return
		}
		ids[i] = decode[client.Order](t, r).Id
		if r := s.politely(&waited, payRequest(tok, ids[i], uuid.NewString(), "pm_async")); r.Status != http.StatusAccepted {
			t.Errorf("pay = %d %s, want 202", r.Status, r.Body)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	eventually(t, 90*time.Second, "orders not all paid", func() bool { return s.count("orders WHERE status = 'paid'") == int64(n) })
	eventually(t, 30*time.Second, "sandbox outbox not drained", func() bool { return s.outboxDrained() })

	ds, err := s.sandbox.Deliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	events, refused := map[string]bool{}, 0
	for _, d := range ds {
		events[d.EventID] = true
		refused += d.Attempts - 1
	}
	if len(ds) != 3*len(events) || len(events) < n {
		t.Errorf("deliveries = %d of %d events, want 3 copies of at least one event per order (%d)", len(ds), len(events), n)
	}
	if got := s.count("webhook_events"); got != int64(len(events)) {
		t.Errorf("inbox rows = %d, want one per event the sandbox sent (%d)", got, len(events))
	}
	if got := s.count("webhook_events WHERE processed_at IS NULL"); got != 0 {
		t.Errorf("unprocessed inbox rows = %d, want 0", got)
	}
	if got := s.count("payment_attempts WHERE status = 'succeeded'"); got != int64(n) {
		t.Errorf("succeeded attempts = %d, want %d (one charge per order)", got, n)
	}
	text := string(s.do(request{method: "GET", path: "/metrics"}).Body)
	hooks := metricValue(t, text, `payd_rate_limited_total{limit="webhook"}`)
	custs := metricValue(t, text, `payd_rate_limited_total{limit="customer"}`)
	t.Logf("%d events, %d deliveries, %d sent again; refused: %v webhooks, %v customer requests (%d waits)",
		len(events), len(ds), refused, hooks, custs, waits(&waited))
	if wantRefused && (hooks == 0 || refused == 0) {
		t.Errorf("webhooks refused = %v, deliveries sent again = %d: the storm never met the webhook limit", hooks, refused)
	}
	if !wantRefused && hooks != 0 {
		t.Errorf("webhooks refused = %v under the default webhook limit, want 0", hooks)
	}
}

// politely sends r as a client that honours 429: it waits Retry-After and
// sends the same request again (same key), as often as it is told to.
// Any 5xx fails the test.
func (s *stack) politely(waited *sync.Map, r request) reply {
	s.t.Helper()
	for tries := 1; ; tries++ {
		rep := s.do(r)
		if rep.Status >= 500 {
			s.t.Errorf("%s %s = %d %s, want no 5xx", r.method, r.path, rep.Status, rep.Body)
		}
		if rep.Status != http.StatusTooManyRequests || tries == 30 {
			return rep
		}
		secs, err := strconv.Atoi(rep.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			s.t.Fatalf("429 with Retry-After %q, want whole seconds ≥ 1", rep.Header.Get("Retry-After"))
		}
		waited.Store(uuid.NewString(), true)
		time.Sleep(time.Duration(secs) * time.Second)
	}
}

func waits(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}
