package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// eventWait bounds how long a stream may take to show a change: streams
// poll for other processes' changes every second, so this is generous.
const eventWait = 20 * time.Second

// orderEvent is one server-sent event of an order stream.
type orderEvent struct {
	Version int64 // the SSE id
	Status  string
}

// orderStream is an open GET /v1/orders/{id}/events.
type orderStream struct {
	t      *testing.T
	events chan orderEvent
}

// stream opens the order's event stream as the customer; it is closed when
// the test ends, before payd stops.
func (s *driver) stream(token, orderID string) *orderStream {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/orders/"+orderID+"/events", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		s.t.Fatalf("GET events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		cancel()
		s.t.Fatalf("GET events = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := &orderStream{t: s.t, events: make(chan orderEvent, 64)}
	done := make(chan struct{})
	go func() { defer close(done); st.read(resp) }()
	s.t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return st
}

// read parses the stream into events until it ends.
func (st *orderStream) read(resp *http.Response) {
	defer close(st.events)
	var ev orderEvent
	var typ, data string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch k, v, _ := strings.Cut(line, ": "); {
		case line == "":
			if typ == "order" {
				var o struct{ Status string }
				if json.Unmarshal([]byte(data), &o) == nil {
					ev.Status = o.Status
					st.events <- ev
				}
			}
			ev, typ, data = orderEvent{}, "", ""
		case k == "id":
			ev.Version, _ = strconv.ParseInt(v, 10, 64)
		case k == "event":
			typ = v
		case k == "data":
			data += v
		}
	}
}

// next is the stream's next event, or a failure after eventWait.
func (st *orderStream) next() orderEvent {
	st.t.Helper()
	select {
	case ev, ok := <-st.events:
		if !ok {
			st.t.Fatal("event stream ended")
		}
		return ev
	case <-time.After(eventWait):
		st.t.Fatalf("no event within %v", eventWait)
		return orderEvent{}
	}
}

// until reads events up to and including the first with status want,
// checking that versions only grow, and returns them.
func (st *orderStream) until(want string, after orderEvent) []orderEvent {
	st.t.Helper()
	var seen []orderEvent
	for last := after; ; {
		ev := st.next()
		if ev.Version <= last.Version {
			st.t.Errorf("event v%d (%s) after v%d: versions must grow", ev.Version, ev.Status, last.Version)
		}
		seen, last = append(seen, ev), ev
		if ev.Status == want {
			return seen
		}
	}
}

// TestOrderEvents: the stream starts with the order as it stands, then
// shows a pm_async payment becoming paid by webhook; a late subscriber
// starts with the paid order; and a stream hears of changes made by another
// payd process on the same database, whichever process holds the stream.
func TestOrderEvents(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("sse@example.com")
		id := s.order(token, "3.50")

		early := s.stream(token, id)
		first := early.next()
		if first.Status != "pending" || first.Version != 1 {
			t.Fatalf("first event = %+v, want pending v1", first)
		}
		if r := s.pay(token, id, uuid.NewString(), "pm_async"); r.Status != http.StatusAccepted {
			t.Fatalf("pay(pm_async) = %d %s, want 202", r.Status, r.Body)
		}
		seen := early.until("paid", first)
		for _, ev := range seen[:len(seen)-1] {
			if ev.Status != "processing" {
				t.Errorf("event before paid = %+v, want processing", ev)
			}
		}
		paid := seen[len(seen)-1]

		late := s.stream(token, id).next()
		if late != paid {
			t.Errorf("late subscriber's first event = %+v, want %+v", late, paid)
		}

		_, other := s.register("sse-other@example.com")
		if r := s.do(request{method: "GET", path: "/v1/orders/" + id + "/events", token: other}); r.Status != http.StatusNotFound {
			t.Errorf("another customer's stream = %d, want 404", r.Status)
		}

		// Another process pays; this one never hears of it but by polling.
		peer := start(t, peerOf(s))
		id2 := s.order(token, "4.50")
		here := s.stream(token, id2)
		start := here.next()
		if r := peer.pay(token, id2, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay(pm_ok) on the peer = %d %s, want 200", r.Status, r.Body)
		}
		here.until("paid", start)

		// And the other way: a stream on the peer, the webhook applied here.
		id3 := s.order(token, "5.50")
		there := peer.stream(token, id3)
		start = there.next()
		if r := s.pay(token, id3, uuid.NewString(), "pm_async"); r.Status != http.StatusAccepted {
			t.Fatalf("pay(pm_async) = %d %s, want 202", r.Status, r.Body)
		}
		there.until("paid", start)
	})
}

// ended waits for the server to end the stream, skipping any last events.
func (st *orderStream) ended() bool {
	deadline := time.After(eventWait)
	for {
		select {
		case _, ok := <-st.events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestOrderEventsEndOnShutdown: payd shutting down ends its open streams
// (their clients reconnect elsewhere), so a graceful shutdown completes
// instead of waiting for a stream that never ends by itself.
func TestOrderEventsEndOnShutdown(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("sse-stop@example.com")
		st := s.stream(token, s.order(token, "1.00"))
		st.next()
		s.stop() // reports run's error: a shutdown that timed out is one
		if !st.ended() {
			t.Error("stream still open after payd stopped")
		}
	})
}
