package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/notify"
	"github.com/payd/payd/repository"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newID() string { return uuid.Must(uuid.NewV7()).String() }

var seq atomic.Int64

// paidOrder stores a paid order and its order.paid outbox row, as the
// pay path's transaction writes it.
func paidOrder(t *testing.T, db *repository.DB) (domain.Order, string) {
	t.Helper()
	n := seq.Add(1)
	c := domain.Customer{ID: newID(), Email: fmt.Sprintf("n%d-%s@example.com", n, newID()[:8]), Name: "Ada", TokenHash: fmt.Sprintf("%064x", n+time.Now().UnixNano()), CreatedAt: t0}
	if err := repository.NewCustomerStore(db).Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	items := []domain.Item{{SKU: "tea", Name: "Green tea", Quantity: 2, UnitPrice: decimal.RequireFromString("4.50")}}
	o := domain.Order{ID: newID(), CustomerID: c.ID, Status: domain.StatusPending, Amount: domain.Total(items), Currency: "USD",
		Items: items, Version: 1, ExpiresAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
	if err := repository.NewOrderStore(db).Create(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	ev := newID()
	at := t0.Format("2006-01-02 15:04:05.000000")
	if err := db.Gorm().Exec(`INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at,
		refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
		VALUES (?, ?, 3, 'order.paid', 'pay_request', 'key-1', 'paid', 'key-1', ?, 0, ?, 900, 0, 0, 0, ?)`, ev, o.ID, at, at, at).Error; err != nil {
		t.Fatal(err)
	}
	return o, ev
}

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type counter struct {
	mu sync.Mutex
	n  map[notify.Outcome]int
}

func (c *counter) Delivered(o notify.Outcome) { c.mu.Lock(); c.n[o]++; c.mu.Unlock() }

// hit is one request a test receiver got.
type hit struct {
	id   string
	body []byte
	err  error // verification
}

// receiver answers each request with the next of answers (the last one
// once they run out), recording each.
func receiver(t *testing.T, secret string, answers ...int) (*httptest.Server, func() []hit) {
	var (
		mu   sync.Mutex
		hits []hit
	)
	wh, _ := standardwebhooks.NewWebhook(secret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, hit{id: r.Header.Get("webhook-id"), body: body, err: wh.VerifyIgnoringTimestamp(body, r.Header)}) // the test clock is not the wall clock
		code := answers[min(len(hits), len(answers))-1]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []hit { mu.Lock(); defer mu.Unlock(); return append([]hit(nil), hits...) }
}

func newWorker(t *testing.T, db *repository.DB, clk *clock, obs notify.Observer) (*notify.Worker, *repository.EndpointStore) {
	sealer, err := idempotency.NewSealer("a test secret key of enough length")
	if err != nil {
		t.Fatal(err)
	}
	es := repository.NewEndpointStore(db, sealer)
	return &notify.Worker{Store: repository.NewNotifyStore(db), Endpoints: es,
		Sender: notify.Sender{Client: notify.NewClient(2*time.Second, notify.Policy{})},
		Lease:  notify.LeaseFor(2 * time.Second), Now: clk.now, Observer: obs, PerEndpoint: 4}, es
}

// TestWorkerRetriesSameWebhookID: an endpoint answering 500 twice, then
// 200, gets the event three times under one webhook-id, each verified,
// after the backoff; the delivery log has the three attempts; no other
// pass sends it again.
func TestWorkerRetriesSameWebhookID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		clk := &clock{t: t0}
		obs := &counter{n: map[notify.Outcome]int{}}
		w, es := newWorker(t, db, clk, obs)
		srv, hits := receiver(t, secretA, 500, 500, 200)
		ep, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: srv.URL, Events: domain.NotifyTypes, Secret: secretA, CreatedAt: t0, UpdatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		o, ev := paidOrder(t, db)
		for range 3 {
			if err := pass(w); err != nil {
				t.Fatal(err)
			}
			if err := pass(w); err != nil { // within the backoff: nothing
				t.Fatal(err)
			}
			clk.add(time.Minute)
		}
		for range 2 {
			if err := pass(w); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Hour)
		}
		got := hits()
		if len(got) != 3 {
			t.Fatalf("%d requests, want 3", len(got))
		}
		for i, h := range got {
			if h.id != ev || h.err != nil {
				t.Errorf("request %d: webhook-id %q, verify %v; want %q, verified", i+1, h.id, h.err, ev)
			}
		}
		var body struct {
			ID, Type string
			Cause    struct{ Kind, Ref string }
			Order    struct {
				ID, Status string
				Money      struct{ Charged string }
				Items      []struct{ SKU string }
			}
		}
		if err := json.Unmarshal(got[2].body, &body); err != nil || body.ID != ev || body.Type != "order.paid" || body.Order.ID != o.ID ||
			body.Order.Status != "paid" || body.Order.Money.Charged != "9.00" || len(body.Order.Items) != 1 || body.Cause.Kind != "pay_request" {
			t.Errorf("body = %s (%v)", got[2].body, err)
		}
		if string(got[0].body) != string(got[2].body) {
			t.Errorf("the retry sent other bytes:\n%s\n%s", got[0].body, got[2].body)
		}
		logs, err := repository.NewNotifyStore(db).ListDeliveries(t.Context(), ep.ID, "", 10)
		if err != nil || len(logs) != 1 || logs[0].Status != domain.DeliveryDelivered || len(logs[0].Attempts) != 3 {
			t.Fatalf("deliveries = %+v, %v; want one delivered, three attempts", logs, err)
		}
		if obs.n[notify.OutcomeRetry] != 2 || obs.n[notify.OutcomeDelivered] != 1 {
			t.Errorf("outcomes = %v", obs.n)
		}
	})
}

// TestWorkerGoneDisables: a 410 disables the endpoint and fails its
// pending deliveries; another endpoint is delivered to meanwhile.
func TestWorkerGoneDisables(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		clk := &clock{t: t0}
		w, es := newWorker(t, db, clk, nil)
		gone, goneHits := receiver(t, secretA, http.StatusGone)
		ok, okHits := receiver(t, secretB, 204)
		g, _ := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: gone.URL, Events: domain.NotifyTypes, Secret: secretA, CreatedAt: t0, UpdatedAt: t0})
		if _, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: ok.URL, Events: domain.NotifyTypes, Secret: secretB, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		paidOrder(t, db)
		paidOrder(t, db)
		for range 3 {
			if err := pass(w); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Hour)
		}
		if n := len(goneHits()); n != 1 {
			t.Errorf("the gone endpoint got %d requests, want 1", n)
		}
		if n := len(okHits()); n != 2 {
			t.Errorf("the other endpoint got %d requests, want 2", n)
		}
		got, _ := es.FindByID(t.Context(), g.ID)
		if got.Status != domain.EndpointDisabled {
			t.Errorf("the gone endpoint is %s", got.Status)
		}
		failed, _ := repository.NewNotifyStore(db).ListDeliveries(t.Context(), g.ID, domain.DeliveryFailed, 10)
		if len(failed) != 2 {
			t.Errorf("%d failed deliveries to the gone endpoint, want 2", len(failed))
		}
	})
}

// TestWorkerGivesUp: after DeliveryGiveUpAfter of failures the delivery
// is failed.
func TestWorkerGivesUp(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	clk := &clock{t: t0}
	w, es := newWorker(t, db, clk, nil)
	srv, hits := receiver(t, secretA, 503)
	ep, _ := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: srv.URL, Events: domain.NotifyTypes, Secret: secretA, CreatedAt: t0, UpdatedAt: t0})
	paidOrder(t, db)
	for clk.now().Before(t0.Add(domain.DeliveryGiveUpAfter + 7*time.Hour)) {
		if err := pass(w); err != nil {
			t.Fatal(err)
		}
		clk.add(30 * time.Minute)
	}
	logs, _ := repository.NewNotifyStore(db).ListDeliveries(t.Context(), ep.ID, "", 10)
	if len(logs) != 1 || logs[0].Status != domain.DeliveryFailed {
		t.Fatalf("deliveries = %+v, want one failed", logs)
	}
	if n := len(hits()); n < 10 || n > 40 {
		t.Errorf("%d requests over 3 days, want the backoff's dozen or so", n)
	}
}

// TestWorkerDrainsABacklogInOnePass: an endpoint that answers 2xx is sent
// its whole backlog in one pass, a batch after another, not one batch a
// pass (a pass a second would cap a shop at PerEndpoint events a second);
// an endpoint that fails stops at its first batch.
func TestWorkerDrainsABacklogInOnePass(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		clk := &clock{t: t0}
		w, es := newWorker(t, db, clk, nil)
		ok, okHits := receiver(t, secretA, 204)
		bad, badHits := receiver(t, secretA, 500)
		for _, srv := range []*httptest.Server{ok, bad} {
			if _, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: srv.URL, Events: domain.NotifyTypes, Secret: secretA, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		const n = 11 // PerEndpoint is 4: three batches
		for range n {
			paidOrder(t, db)
		}
		if _, err := w.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.Wait() // the pass's deliveries run beside it
		if got := len(okHits()); got != n {
			t.Errorf("the healthy endpoint got %d of its %d events in one pass", got, n)
		}
		if got := len(badHits()); got != 4 {
			t.Errorf("the failing endpoint was tried %d times in one pass, want one batch of 4", got)
		}
	})
}

// TestWorkerSlowEndpointDelaysNoOther: an endpoint that hangs holds only
// itself: passes go on, and a healthy endpoint gets every event (more
// than one pass's worth) while the hanging one has taken one request.
func TestWorkerSlowEndpointDelaysNoOther(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	clk := &clock{t: t0}
	w, es := newWorker(t, db, clk, nil)
	w.Sender = notify.Sender{Client: notify.NewClient(time.Minute, notify.Policy{})}
	w.Lease = notify.LeaseFor(time.Minute)
	release := make(chan struct{})
	var slowHits atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowHits.Add(1)
		<-release
	}))
	t.Cleanup(slow.Close)
	ok, okHits := receiver(t, secretB, 204)
	for _, u := range []string{slow.URL, ok.URL} {
		if _, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: u, Events: domain.NotifyTypes, Secret: secretB, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 10 // more than PerEndpoint: it takes several passes
	for range n {
		paidOrder(t, db)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Run(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}()
	t.Cleanup(func() { close(release); close(stop); <-stopped; w.Wait() })
	deadline := time.Now().Add(30 * time.Second) // a bound on failure, not a measure
	for len(okHits()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(okHits()); got != n || slowHits.Load() > 1 {
		t.Fatalf("the healthy endpoint got %d of %d events while the hanging one took %d requests; want all, and one", got, n, slowHits.Load())
	}
}

// pass is one pass with its deliveries finished.
func pass(w *notify.Worker) error {
	_, err := w.Run(context.Background())
	w.Wait()
	return err
}

// TestWorkerRefusedDialFails: a delivery whose address the dialer's guard
// refuses fails at once, saying why, rather than retrying for 3 days.
func TestWorkerRefusedDialFails(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	clk := &clock{t: t0}
	w, es := newWorker(t, db, clk, nil)
	w.Sender = notify.Sender{Client: notify.NewClient(time.Second, notify.Policy{Guard: true})}
	srv, hits := receiver(t, secretA, 200)
	ep, _ := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), Events: domain.NotifyTypes, Secret: secretA, CreatedAt: t0, UpdatedAt: t0})
	paidOrder(t, db)
	if err := pass(w); err != nil {
		t.Fatal(err)
	}
	logs, _ := repository.NewNotifyStore(db).ListDeliveries(t.Context(), ep.ID, "", 10)
	if len(logs) != 1 || logs[0].Status != domain.DeliveryFailed || !strings.Contains(logs[0].LastError, "address refused") || len(hits()) != 0 {
		t.Fatalf("deliveries = %+v, want one failed at once for the refused address", logs)
	}
}

// TestWorkerPassesOverUnwantedEvents: events no endpoint wants are marked
// fanned out together, with no body and no delivery, and counted as the
// pass's work (so a full batch makes the job run again at once); an event
// an endpoint wants is fanned out to it as before.
func TestWorkerPassesOverUnwantedEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		clk := &clock{t: t0}
		w, es := newWorker(t, db, clk, &counter{n: map[notify.Outcome]int{}})
		srv, hits := receiver(t, secretA, 200)
		if _, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: srv.URL, Events: []domain.NotifyType{domain.NotifyOrderRefunded},
			Secret: secretA, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		var events []string
		for range 5 {
			_, ev := paidOrder(t, db)
			events = append(events, ev)
		}
		n, err := w.Run(t.Context())
		w.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if n != 5 {
			t.Errorf("the pass reported %d, want the 5 events it handled", n)
		}
		store := repository.NewNotifyStore(db)
		for _, id := range events {
			ev, err := store.FindEvent(t.Context(), id)
			if err != nil || !ev.FannedOut || ev.Body != nil {
				t.Errorf("event %s: fanned out %v, body %q, %v; want passed over: fanned out, no body", id, ev.FannedOut, ev.Body, err)
			}
		}
		var deliveries int64
		if err := db.Gorm().Raw(`SELECT COUNT(*) FROM notify_deliveries`).Scan(&deliveries).Error; err != nil || deliveries != 0 {
			t.Errorf("deliveries = %d, %v; want none for events nobody wants", deliveries, err)
		}
		if got := hits(); len(got) != 0 {
			t.Errorf("the endpoint got %d requests, want none", len(got))
		}
	})
}
