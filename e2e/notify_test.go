package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// Telling the shop (docs/adr/0053-telling-the-shop.md), end to end: payd
// on each database, examples/receiver as the merchant.

// eventsOf are the notify_events rows of order id, by seq.
func eventsOf(t *testing.T, db *repository.DB, orderID string) []eventRow {
	t.Helper()
	var rows []eventRow
	scanRows(t, db, &rows, `SELECT id, order_id, seq, type FROM notify_events WHERE order_id = ? ORDER BY seq`, orderID)
	return rows
}

// deliveryState is a delivery as payd's database holds it.
type deliveryState struct {
	ID       string
	EventID  string
	Status   string
	Attempts int
}

func deliveryOf(t *testing.T, db *repository.DB, eventID string) deliveryState {
	t.Helper()
	var rows []deliveryState
	scanRows(t, db, &rows, `SELECT id, event_id, status, attempts FROM notify_deliveries WHERE event_id = ?`, eventID)
	if len(rows) != 1 {
		t.Fatalf("event %s has %d deliveries, want 1", eventID, len(rows))
	}
	return rows[0]
}

// arrivalsOf are the receiver's arrivals of webhook-id id.
func arrivalsOf(all []arrival, id string) []arrival {
	var out []arrival
	for _, a := range all {
		if a.WebhookID == id {
			out = append(out, a)
		}
	}
	return out
}

// TestNotifyPaidOnce: a paid order's order.paid reaches the receiver
// once, its signature verified, under the event's id; its delivery is
// delivered after one attempt.
func TestNotifyPaidOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		s := start(t, on(dialect), withEnv(notifyEnv(rcv)))
		_, token := s.register(newEmail())
		order := s.paidOrder(token, "12.50")
		var ev []eventRow
		eventually(t, 30*time.Second, "order.paid did not reach the receiver", func() bool {
			ev = eventsOf(t, s.db, order)
			return len(ev) == 1 && rcv.events()[ev[0].ID].Type == "order.paid"
		})
		if ev[0].Type != "order.paid" {
			t.Fatalf("events of the order = %+v, want order.paid alone", ev)
		}
		eventually(t, 10*time.Second, "the delivery is not recorded delivered", func() bool {
			return deliveryOf(t, s.db, ev[0].ID).Status == "delivered"
		})
		got := arrivalsOf(rcv.arrivals(), ev[0].ID)
		if len(got) != 1 || !got[0].Verified || got[0].Answered != http.StatusNoContent {
			t.Errorf("arrivals of %s = %+v, want one, verified, answered 204", ev[0].ID, got)
		}
		if n := rcv.printed(ev[0].ID); n != 1 {
			t.Errorf("the receiver printed the event %d times, want once", n)
		}
		if e := rcv.events()[ev[0].ID]; e.OrderID != order {
			t.Errorf("recorded %+v, want order %s", e, order)
		}
		if d := deliveryOf(t, s.db, ev[0].ID); d.Attempts != 1 {
			t.Errorf("delivery = %+v, want delivered in one attempt", d)
		}
	})
}

// TestNotifyRetriesSameWebhookID: a receiver answering 500 twice, then
// 2xx, gets the event three times under one webhook-id and records it
// once; payd's log of the delivery has the three attempts.
func TestNotifyRetriesSameWebhookID(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 2)
		s := start(t, on(dialect), withEnv(notifyEnv(rcv)))
		_, token := s.register(newEmail())
		order := s.paidOrder(token, "3.00")
		var ev []eventRow
		eventually(t, 45*time.Second, "order.paid was not recorded after the retries", func() bool {
			ev = eventsOf(t, s.db, order)
			return len(ev) == 1 && rcv.events()[ev[0].ID].Type == "order.paid"
		})
		eventually(t, 10*time.Second, "the delivery is not recorded delivered", func() bool {
			return deliveryOf(t, s.db, ev[0].ID).Status == "delivered"
		})
		got := arrivalsOf(rcv.arrivals(), ev[0].ID)
		var answers []int
		for _, a := range got {
			answers = append(answers, a.Answered)
			if !a.Verified {
				t.Errorf("arrival %d not verified", a.N)
			}
		}
		if want := []int{500, 500, 204}; !slices.Equal(answers, want) {
			t.Errorf("answers to webhook-id %s = %v, want %v", ev[0].ID, answers, want)
		}
		if len(rcv.events()) != 1 || rcv.printed(ev[0].ID) != 1 {
			t.Errorf("the receiver recorded %d events, printed this one %d times; want one, once", len(rcv.events()), rcv.printed(ev[0].ID))
		}
		d := deliveryOf(t, s.db, ev[0].ID)
		var statuses []int
		scanRows(t, s.db, &statuses, `SELECT status FROM notify_attempts WHERE delivery_id = ? ORDER BY n`, d.ID)
		if d.Attempts != 3 || !slices.Equal(statuses, []int{500, 500, 204}) {
			t.Errorf("delivery %+v with attempts answered %v, want 3 attempts: 500, 500, 204", d, statuses)
		}
	})
}

// TestNotifyCrashBeforeSend: payd is killed (kill -9) after the payment
// committed and the delivery was claimed, before the request went out.
// Nothing reached the receiver; after the restart the lease runs out and
// the event arrives, once.
func TestNotifyCrashBeforeSend(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		prov := startProcProvider(t, "")
		dbURL := dbtest.NewURL(t, migrations.Dialect(dialect))
		settings := notifyEnv(rcv)
		settings["PAYD_NOTIFY_TIMEOUT"] = "1s" // a lease of 7s
		crashing := env{"PAYD_TEST_FAULT": "notify_before_send"}
		for k, v := range settings {
			crashing[k] = v
		}
		p := startPaydProc(t, "payd", paydEnv(dbURL, prov.url, crashing))
		_, token := p.register(newEmail())
		order := p.order(token, "7.00")
		if r, err := p.tryPay(token, order, uuid.NewString(), "pm_ok"); err != nil || r.Status != http.StatusOK {
			t.Fatalf("pay = %v %v, want 200 before the crash", r.Status, err)
		}
		p.waitKilled()
		db := openDB(t, dbURL)
		ev := eventsOf(t, db, order)
		if len(ev) != 1 || ev[0].Type != "order.paid" {
			t.Fatalf("events = %+v, want the committed order.paid", ev)
		}
		if d := deliveryOf(t, db, ev[0].ID); d.Status != "pending" || d.Attempts != 1 {
			t.Fatalf("delivery after the crash = %+v, want pending with its one claimed attempt", d)
		}
		if a := rcv.arrivals(); len(a) != 0 {
			t.Fatalf("the receiver got %+v before the restart, want nothing", a)
		}
		restarted := startPaydProc(t, "payd-restarted", paydEnv(dbURL, prov.url, settings))
		_ = restarted
		eventually(t, time.Minute, "the event did not arrive after the restart", func() bool {
			return rcv.events()[ev[0].ID].Type == "order.paid"
		})
		eventually(t, 10*time.Second, "the delivery is not recorded delivered", func() bool {
			return deliveryOf(t, db, ev[0].ID).Status == "delivered"
		})
		if got := arrivalsOf(rcv.arrivals(), ev[0].ID); len(got) != 1 || !got[0].Verified {
			t.Errorf("arrivals = %+v, want one, verified", got)
		}
		if d := deliveryOf(t, db, ev[0].ID); d.Attempts != 2 {
			t.Errorf("delivery = %+v, want 2 attempts: the crashed one, and the one sent", d)
		}
	})
}

// TestNotifyReplicasInOrder: three replicas, 200 orders, some refunded
// twice: every event arrives, each order's in the order of its changes
// (seq), and each exactly as often as a replica claimed it — one request
// per claim, never two replicas sending one attempt. The attempts of
// one delivery never overlap in time.
func TestNotifyReplicasInOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		rs := startReplicas(t, 3, on(dialect), premigrated(), withEnv(notifyEnv(rcv)))
		_, token := rs.procs[0].register(newEmail())
		const n = 200
		orders := make([]string, n)
		parallelDo(n, 8, func(i int) {
			p := rs.at(i)
			orders[i] = p.order(token, "10.00")
			if r := p.pay(token, orders[i], uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
				t.Errorf("pay %s = %d %s", orders[i], r.Status, r.Body)
			}
			if i%4 == 0 {
				for k := range 2 {
					if r := rs.at(i+k+1).refund(orders[i], uuid.NewString(), "2.00"); r.Status != http.StatusOK && r.Status != http.StatusCreated {
						t.Errorf("refund %s = %d %s", orders[i], r.Status, r.Body)
					}
				}
			}
		})
		if t.Failed() {
			t.FailNow()
		}
		want := n + 2*(n/4)
		eventually(t, 3*time.Minute, fmt.Sprintf("not all %d events reached the receiver", want), func() bool {
			return len(rcv.events()) >= want && rs.count(`notify_deliveries WHERE status = 'delivered'`) == int64(want)
		})
		var all []eventRow
		scanRows(t, rs.db, &all, `SELECT id, order_id, seq, type FROM notify_events ORDER BY order_id, seq`)
		if len(all) != want {
			t.Fatalf("%d events in payd, want %d", len(all), want)
		}
		got := rcv.events()
		arrivals := rcv.arrivals()
		first := map[string]int64{} // webhook-id → arrival of its one recorded request
		for _, a := range arrivals {
			if _, ok := first[a.WebhookID]; !ok {
				first[a.WebhookID] = a.N
			}
		}
		var claims []struct {
			EventID  string
			Attempts int
		}
		scanRows(t, rs.db, &claims, `SELECT event_id, attempts FROM notify_deliveries`)
		claimed := map[string]int{}
		for _, c := range claims {
			claimed[c.EventID] = c.Attempts
		}
		byOrder := map[string][]eventRow{}
		for _, e := range all {
			byOrder[e.OrderID] = append(byOrder[e.OrderID], e)
			if got[e.ID].OrderID != e.OrderID {
				t.Errorf("event %s (%s of %s) not recorded by the receiver", e.ID, e.Type, e.OrderID)
			}
			if a := arrivalsOf(arrivals, e.ID); len(a) != claimed[e.ID] || len(a) == 0 {
				t.Errorf("event %s arrived %d times, claimed %d times: want one request per claim", e.ID, len(a), claimed[e.ID])
			}
		}
		for order, evs := range byOrder {
			for i := 1; i < len(evs); i++ {
				if first[evs[i].ID] < first[evs[i-1].ID] {
					t.Errorf("order %s: %s (seq %d) arrived before %s (seq %d)", order, evs[i].Type, evs[i].Seq, evs[i-1].Type, evs[i-1].Seq)
				}
			}
		}
		var extra int
		for _, c := range claimed {
			extra += c - 1
		}
		t.Logf("%d events, %d arrivals, %d claims beyond the first", len(all), len(arrivals), extra)
		var overlaps int64
		scanRows(t, rs.db, &overlaps, overlappingAttempts(dialect))
		if overlaps != 0 {
			t.Errorf("%d pairs of attempts of one delivery overlap in time: two replicas sent at once", overlaps)
		}
	})
}

// overlappingAttempts counts pairs of attempts of one delivery whose
// times overlap.
func overlappingAttempts(dialect string) string {
	end := "DATE_ADD(a.started_at, INTERVAL a.duration_us MICROSECOND)"
	if dialect == "sqlite" {
		end = "strftime('%Y-%m-%d %H:%M:%f', a.started_at, '+' || (a.duration_us / 1000000.0) || ' seconds')"
	}
	return `SELECT COUNT(*) FROM notify_attempts a JOIN notify_attempts b ON a.delivery_id = b.delivery_id AND a.n < b.n
		WHERE b.started_at < ` + end
}

// parallelDo runs fn(0..n-1) on at most width goroutines.
func parallelDo(n, width int, fn func(i int)) {
	sem := make(chan struct{}, width)
	done := make(chan struct{}, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			fn(i)
		}()
	}
	for range n {
		<-done
	}
}

// TestNotifySpanPerDelivery: each attempt is one client span, naming the
// event, its type, the endpoint, the attempt and the endpoint's answer.
func TestNotifySpanPerDelivery(t *testing.T) {
	otelEnv(t, nil)
	rec := tracetest.NewSpanRecorder()
	rcv := startReceiver(t, notifySecret, 1)
	s := start(t, tracedBy(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))), withEnv(notifyEnv(rcv)))
	_, tok := s.register(newEmail())
	order := s.paidOrder(tok, "4.00")
	var ev []eventRow
	eventually(t, 45*time.Second, "the event did not reach the receiver", func() bool {
		ev = eventsOf(t, s.db, order)
		return len(ev) == 1 && rcv.events()[ev[0].ID].OrderID == order
	})
	var answers []int64
	eventually(t, 10*time.Second, "no two delivery spans", func() bool {
		answers = nil
		for _, sp := range rec.Ended() {
			if sp.Name() != "notify deliver" || sp.SpanKind() != trace.SpanKindClient {
				continue
			}
			attrs := map[string]attribute.Value{}
			for _, a := range sp.Attributes() {
				attrs[string(a.Key)] = a.Value
			}
			if attrs["payd.notify.event_id"].AsString() != ev[0].ID || attrs["payd.notify.event_type"].AsString() != "order.paid" {
				continue
			}
			answers = append(answers, attrs["http.response.status_code"].AsInt64())
		}
		return len(answers) == 2
	})
	slices.Sort(answers)
	if !slices.Equal(answers, []int64{204, 500}) {
		t.Errorf("delivery spans answered %v, want one 500 and one 204", answers)
	}
}
