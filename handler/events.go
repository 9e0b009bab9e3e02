package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// OrderWatcher lets the event stream read an order and hear of its changes.
type OrderWatcher interface {
	Get(ctx context.Context, customerID, id string) (domain.Order, error)
	Subscribe(orderID string) (<-chan struct{}, func())
}

// Events streams an order's status changes as server-sent events.
type Events struct {
	Orders OrderWatcher
	Poll   time.Duration // how often to look for changes made by other payd processes
	// Live, optional, reports whether changes made by other payd processes
	// arrive as notifications now (Redis pub/sub, ADR 0018); while it does,
	// the poll only rests, and resumes the moment it does not.
	Live func() bool
	// MaxPerCustomer caps the streams one customer holds open on this
	// process at once (0: no cap). Each stream polls the database, so
	// without it one customer could load the database at will.
	MaxPerCustomer int

	mu       sync.Mutex
	shutdown map[*http.Server]chan struct{} // closed when that server begins to shut down
	open     map[string]int                 // open streams per customer ID
}

// stream answers GET /v1/orders/{id}/events. The first event is the order
// as it stands, so a late subscriber misses nothing; then one event per
// change, whether this process made it (heard at once) or another did
// (seen by polling the version).
func (h *Events) stream(c echo.Context) error {
	ctx := c.Request().Context()
	release, ok := h.admit(buyerKey(c))
	if !ok {
		return errTooManyStreams
	}
	defer release()
	// Subscribing before the first read: a change made between the read
	// and the subscription would otherwise wait for the next poll.
	changed, stop := h.Orders.Subscribe(c.Param("id"))
	defer stop()
	o, err := h.Orders.Get(ctx, actingFor(c), c.Param("id"))
	if err != nil {
		return err
	}
	// Before the first byte: a client that has seen the stream open may
	// shut the server down at once, and must find the stream covered.
	closing := h.closing(ctx)

	w := c.Response()
	// A stream is meant to outlive the server's timeouts. Its read deadline
	// is lifted (a stream has no body, and net/http ends a request whose
	// connection read fails); its write deadline is renewed before each
	// write instead, so a client that stopped reading is still dropped.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // not supported outside an http.Server (tests' ServeHTTP): nothing to lift
	write := func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	write()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := writeEvent(w, o); err != nil {
		return nil
	}
	poll := time.NewTicker(h.Poll)
	defer poll.Stop()
	rested := 0 // poll ticks skipped in a row while Live
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closing:
			return nil // the client reconnects, to this process's successor or a replica
		case <-heartbeat.C:
			write()
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			w.Flush()
			continue
		case <-changed:
		case <-poll.C:
			// While notifications flow, every other tick looks: a safety
			// net should one replica's announcement be lost (Live tells
			// that this process hears, not that every publish landed), so
			// a lost one delays an event by at most two ticks.
			if rested++; h.Live != nil && h.Live() && rested < restTicks {
				continue
			}
			rested = 0
		}
		next, err := h.Orders.Get(ctx, actingFor(c), o.ID)
		if err != nil {
			return nil // the stream is already open: end it; the client reconnects
		}
		if next.Version == o.Version {
			continue
		}
		o = next
		write()
		if err := writeEvent(w, o); err != nil {
			return nil
		}
	}
}

// restTicks: while notifications flow, a stream looks at the database on
// one poll tick in restTicks.
const restTicks = 2

// streamWriteTimeout bounds one write to an event stream: a client that
// has not taken an event or heartbeat in this long is gone.
const streamWriteTimeout = 30 * time.Second

// admit counts one more open stream of a customer, or refuses it when the
// customer already holds MaxPerCustomer. release frees the slot; a stream
// calls it when it ends, however it ends.
func (h *Events) admit(customerID string) (release func(), ok bool) {
	if h.MaxPerCustomer <= 0 {
		return func() {}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[customerID] >= h.MaxPerCustomer {
		return nil, false
	}
	if h.open == nil {
		h.open = make(map[string]int)
	}
	h.open[customerID]++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.open[customerID]--; h.open[customerID] <= 0 {
			delete(h.open, customerID)
		}
	}, true
}

// closing returns a channel closed when the server serving ctx starts a
// graceful shutdown. http.Server.Shutdown waits for every request to end
// but never cancels one, and a stream never ends by itself: without this,
// an open stream would hold shutdown until its deadline. One hook per
// server, shared by all its streams, so streams do not pile up hooks.
func (h *Events) closing(ctx context.Context) <-chan struct{} {
	srv, ok := ctx.Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return nil // not served by an http.Server (a test's ServeHTTP): never closes
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.shutdown[srv]; ok {
		return ch
	}
	if h.shutdown == nil {
		h.shutdown = make(map[*http.Server]chan struct{})
	}
	ch := make(chan struct{})
	h.shutdown[srv] = ch
	srv.RegisterOnShutdown(func() { close(ch) })
	return ch
}

// writeEvent sends one "order" event carrying the order as JSON; its id is
// the order's version, so a client can tell events apart.
func writeEvent(w *echo.Response, o domain.Order) error {
	b, err := json.Marshal(toOrderJSON(o))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "id: %d\nevent: order\ndata: %s\n\n", o.Version, b); err != nil {
		return err
	}
	w.Flush()
	return nil
}
