package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/sandbox"
)

// stormOrder is one order of the storm and what it must end as.
type stormOrder struct {
	id, token, key, method string
	want                   domain.OrderStatus
}

// stormMethods are the payment methods of the storm and where each ends.
var stormMethods = []struct {
	method string
	status int
	want   domain.OrderStatus
}{
	{"pm_ok", http.StatusOK, domain.StatusPaid},
	{"pm_async", http.StatusAccepted, domain.StatusPaid},
	{"pm_async_fail", http.StatusAccepted, domain.StatusPending},
	{"pm_declined", http.StatusPaymentRequired, domain.StatusPending},
}

// TestWebhookStorm pays 200 orders with a mix of methods while the sandbox
// delivers every event, shuffled and delayed, the test re-sends each
// delivered event up to four more times (1 to 5 deliveries), and after the successes a
// signed payment.failed (itself sent once or twice) contradicts each of
// them. Every order must end where its method says, each charge be counted
// once, and no event be applied twice.
func TestWebhookStorm(t *testing.T) {
	testdeps.RequireFull(t, "a storm of 200 orders' webhooks")
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(func(c *sandbox.Config) {
			c.Duplicates, c.Reorder, c.ReorderWindow, c.BatchSize = 1, true, 300*time.Millisecond, 64
		}))
		start := time.Now()
		orders := s.stormOrders(200)
		resend := s.startResender()
		t.Logf("orders created after %v", time.Since(start))

		forEach(8, len(orders), func(i int) {
			o := orders[i]
			if r := s.pay(o.token, o.id, o.key, o.method); r.Status != stormStatus(o.method) {
				t.Errorf("pay(%s) = %d %s, want %d", o.method, r.Status, r.Body, stormStatus(o.method))
			}
		})
		t.Logf("paid after %v", time.Since(start))
		eventually(t, 45*time.Second, "orders still processing", func() bool { return s.count("orders WHERE status = 'processing'") == 0 })
		t.Logf("settled after %v", time.Since(start))

		injected := s.contradict(orders)
		eventually(t, 30*time.Second, "sandbox outbox not drained", func() bool { return s.outboxDrained() })
		events := resend.stop()
		for id := range injected {
			events[id] = true
		}
		t.Logf("drained after %v: %d events", time.Since(start), len(events))
		s.checkStorm(orders, events)
	})
}

func stormStatus(method string) int {
	for _, m := range stormMethods {
		if m.method == method {
			return m.status
		}
	}
	return 0
}

// stormOrders registers a few customers and creates n orders among them,
// the methods taking turns.
func (s *stack) stormOrders(n int) []stormOrder {
	s.t.Helper()
	tokens := make([]string, 4)
	for i := range tokens {
		_, tokens[i] = s.register(fmt.Sprintf("storm%d@example.com", i))
	}
	orders := make([]stormOrder, n)
	forEach(8, n, func(i int) {
		m := stormMethods[i%len(stormMethods)]
		tok := tokens[i%len(tokens)]
		orders[i] = stormOrder{id: s.order(tok, fmt.Sprintf("%d.%02d", 1+i%50, i%100)), token: tok,
			key: uuid.NewString(), method: m.method, want: m.want}
	})
	return orders
}

// contradict sends, for every paid order, a signed payment.failed for its
// attempt, once or twice, and returns the event IDs it made up.
func (s *stack) contradict(orders []stormOrder) map[string]bool {
	s.t.Helper()
	var mu sync.Mutex
	ids := map[string]bool{}
	forEach(8, len(orders), func(i int) {
		o := orders[i]
		if o.want != domain.StatusPaid {
			return
		}
		a := s.onlyAttempt(o.id)
		id := "evt_" + uuid.NewString()
		mu.Lock()
		ids[id] = true
		mu.Unlock()
		p := payment{AttemptID: a.ID, ChargeID: a.ProviderChargeID, OrderID: o.id, Amount: domain.FormatAmount(a.Amount, a.Currency), Currency: "USD"}
		for range 1 + rand.IntN(2) {
			if r := s.sendEvent(id, "payment.failed", p); r.Status != http.StatusOK {
				s.t.Errorf("payment.failed after success = %d %s, want 200", r.Status, r.Body)
			}
		}
	})
	return ids
}

// outboxDrained reports whether the sandbox delivered every copy of every event.
func (s *stack) outboxDrained() bool {
	ds, err := s.sandbox.Deliveries(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, d := range ds {
		if !d.Delivered() {
			return false
		}
	}
	return true
}

// checkStorm asserts the end state: every order where its method says,
// settled once; charges = paid orders + automatic refunds; one inbox row
// per event ID.
func (s *stack) checkStorm(orders []stormOrder, events map[string]bool) {
	t := s.t
	t.Helper()
	all, err := s.sandbox.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	succeeded, charged := 0, map[string]int{}
	for _, c := range all {
		if c.Status == "succeeded" {
			succeeded++
			charged[c.OrderID]++
		}
	}
	s.checkStormEnd(orders, events, succeeded, charged)
}

// checkStormEnd is checkStorm once the provider's successes are counted
// (succeeded in all, charged per order), whichever provider it is.
func (s *stack) checkStormEnd(orders []stormOrder, events map[string]bool, succeeded int, charged map[string]int) {
	t := s.t
	t.Helper()
	paid := 0
	for _, o := range orders {
		row := s.orderRow(o.id)
		as := s.attempts(o.id)
		wantAttempt := domain.AttemptFailed
		if o.want == domain.StatusPaid {
			paid++
			wantAttempt = domain.AttemptSucceeded
		}
		// created v1, claimed v2, settled v3: a higher version is a second settlement.
		if row.Status != o.want || row.Version != 3 || len(as) != 1 || as[0].Status != wantAttempt {
			t.Errorf("%s order %s = %s v%d with %d attempts, want %s v3 with one %s attempt",
				o.method, o.id, row.Status, row.Version, len(as), o.want, wantAttempt)
		}
		if want := map[bool]int{true: 1, false: 0}[o.want == domain.StatusPaid]; charged[o.id] != want {
			t.Errorf("%s order %s: provider charges = %d, want %d", o.method, o.id, charged[o.id], want)
		}
		// Whichever path settled it, the pay request's record tells the truth.
		var rec struct {
			Status         string
			ResponseStatus int
		}
		if err := s.db.Gorm().Raw("SELECT status, response_status FROM idempotency_records WHERE idem_key = ?", o.key).Scan(&rec).Error; err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "succeeded 200", false: "failed 402"}[o.want == domain.StatusPaid]; fmt.Sprintf("%s %d", rec.Status, rec.ResponseStatus) != want {
			t.Errorf("%s order %s: pay record = %s %d, want %s", o.method, o.id, rec.Status, rec.ResponseStatus, want)
		}
	}
	refunds := int(s.count("refunds WHERE kind = 'auto'"))
	if succeeded != paid+refunds {
		t.Errorf("provider successes = %d, want paid orders %d + automatic refunds %d", succeeded, paid, refunds)
	}
	if n := s.count("discrepancies"); n != 0 || refunds != 0 {
		t.Errorf("discrepancies = %d, automatic refunds = %d; want none in a storm of honest events", n, refunds)
	}
	if n := s.count("webhook_events"); n != int64(len(events)) {
		t.Errorf("inbox rows = %d, want one per distinct event ID (%d)", n, len(events))
	}
	if n := s.count("webhook_events WHERE processed_at IS NULL"); n != 0 {
		t.Errorf("unprocessed inbox rows = %d, want 0", n)
	}
}

// resender re-sends every event the sandbox delivered 0 to 4 more times, at
// random moments, each copy freshly signed, as a provider retrying
// eagerly would.
type resender struct {
	s      *stack
	cancel context.CancelFunc
	done   chan struct{}
	seen   map[string]bool
	sends  sync.WaitGroup
	slots  chan struct{}
}

func (s *stack) startResender() *resender {
	ctx, cancel := context.WithCancel(context.Background())
	e := &resender{s: s, cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}, slots: make(chan struct{}, 4)}
	go e.loop(ctx)
	s.t.Cleanup(func() { e.cancel(); <-e.done })
	return e
}

func (e *resender) loop(ctx context.Context) {
	defer close(e.done)
	for {
		e.pass()
		select {
		case <-ctx.Done():
			e.pass() // the last deliveries since the previous pass
			e.sends.Wait()
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (e *resender) pass() {
	ds, err := e.s.sandbox.Deliveries(context.Background())
	if err != nil {
		e.s.t.Errorf("sandbox deliveries: %v", err)
		return
	}
	for _, d := range ds {
		if !d.Delivered() || e.seen[d.EventID] {
			continue
		}
		e.seen[d.EventID] = true
		for range rand.IntN(5) {
			e.sends.Add(1)
			go e.send(d.EventID, d.Payload)
		}
	}
}

func (e *resender) send(id string, body []byte) {
	defer e.sends.Done()
	e.slots <- struct{}{}
	defer func() { <-e.slots }()
	time.Sleep(rand.N(200 * time.Millisecond))
	r, err := e.s.send(request{method: http.MethodPost, path: "/v1/webhooks/provider", header: signedWebhook(e.s.t, id, time.Now(), body), body: body})
	if err != nil {
		e.s.t.Errorf("re-send %s: %v", id, err)
		return
	}
	if r.Status != http.StatusOK {
		e.s.t.Errorf("re-send %s = %d %s, want 200", id, r.Status, r.Body)
	}
}

// stop ends the resender after a last pass and returns every event ID it saw
// delivered.
func (e *resender) stop() map[string]bool {
	e.cancel()
	<-e.done
	out := make(map[string]bool, len(e.seen))
	for id := range e.seen {
		out[id] = true
	}
	return out
}
