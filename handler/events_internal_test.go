package handler

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// quietOrders is an order whose changes come from another replica whose
// announcement was lost: Subscribe never signals. It records the order of
// the stream's calls.
type quietOrders struct {
	version atomic.Int64
	mu      sync.Mutex
	calls   []string
}

func (q *quietOrders) Get(_ context.Context, _, id string) (domain.Order, error) {
	q.mu.Lock()
	q.calls = append(q.calls, "get")
	q.mu.Unlock()
	return domain.Order{ID: id, Version: q.version.Load(), Status: domain.StatusPending}, nil
}

func (q *quietOrders) Subscribe(string) (<-chan struct{}, func()) {
	q.mu.Lock()
	q.calls = append(q.calls, "subscribe")
	q.mu.Unlock()
	return make(chan struct{}), func() {}
}

// streamOf serves h's stream of order o1 and returns its event ids as they come.
func streamOf(t *testing.T, h *Events) <-chan string {
	t.Helper()
	e := echo.New()
	e.GET("/orders/:id/events", func(c echo.Context) error {
		c.Set(ctxCustomer, domain.Customer{ID: "c1"})
		return h.stream(c)
	})
	srv := httptest.NewServer(e)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); srv.Close() })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/orders/o1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				ids <- id
			}
		}
	}()
	return ids
}

// TestStreamSafetyNetWhileLive: while notifications flow, a change whose
// announcement was lost still reaches the stream within two poll ticks
// (not ten), and the stream subscribes before its first read, so no change
// falls between the two.
func TestStreamSafetyNetWhileLive(t *testing.T) {
	orders := &quietOrders{}
	orders.version.Store(1)
	const poll = 300 * time.Millisecond
	h := &Events{Orders: orders, Poll: poll, Live: func() bool { return true }}
	ids := streamOf(t, h)
	select {
	case id := <-ids:
		if id != "1" {
			t.Fatalf("first event id %s, want 1", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first event")
	}
	orders.mu.Lock()
	if len(orders.calls) < 2 || orders.calls[0] != "subscribe" {
		t.Errorf("stream calls %v: want subscribe before the first get", orders.calls)
	}
	orders.mu.Unlock()
	orders.version.Store(2) // made on another replica; its publish lost
	start := time.Now()
	select {
	case id := <-ids:
		took := time.Since(start)
		t.Logf("change seen by the safety net after %v (poll %v)", took, poll)
		if id != "2" {
			t.Fatalf("event id %s, want 2", id)
		}
		// At most two ticks (600 ms) plus scheduling; ten ticks would be 3 s.
		if took > 2*time.Second {
			t.Errorf("change seen after %v; want within about two poll ticks", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("change never seen")
	}
}
