package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// shop is the merchant's server: the page, its API, and payd's events.
type shop struct {
	payd      *payd
	catalogue []product
	orders    *orderBook
	hooks     *webhooks
	log       *slog.Logger
	out       io.Writer
	ready     atomic.Bool // the catalogue is in payd
}

func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /", pageHandler())
	mux.HandleFunc("GET /api/products", s.listProducts)
	mux.HandleFunc("POST /api/orders", s.createOrder)
	mux.HandleFunc("GET /api/orders/{id}", s.getOrder)
	mux.HandleFunc("POST /api/orders/{id}/pay", s.payOrder)
	mux.Handle("POST /webhooks/payd", s.hooks)
	return mux
}

// orderBook is what the shop knows of its orders: each one its page
// created, and what payd's events said of it, each event once.
type orderBook struct {
	mu     sync.Mutex
	orders map[string]*shopOrder
	seen   map[string]bool // webhook-ids acted on
}

// shopOrder is one order as the shop sees it. Status is what payd's
// events said ("pending" until the first arrives); the browser's word
// that it paid is never taken for it.
type shopOrder struct {
	ID       string   `json:"id"`
	Amount   string   `json:"amount"`
	Currency string   `json:"currency"`
	Status   string   `json:"status"`
	Events   []string `json:"events"` // the event types payd told, in arrival order
}

func newOrderBook() *orderBook {
	return &orderBook{orders: map[string]*shopOrder{}, seen: map[string]bool{}}
}

// add records an order the page created (again, after a replay: kept as
// it is).
func (b *orderBook) add(o shopOrder) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.orders[o.ID]; !ok {
		o.Status, o.Events = "pending", []string{}
		b.orders[o.ID] = &o
	}
}

func (b *orderBook) get(id string) (shopOrder, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orders[id]
	if !ok {
		return shopOrder{}, false
	}
	c := *o
	c.Events = append([]string{}, o.Events...)
	return c, true
}

// apply acts on a verified event once per webhook-id: first is false for
// a repeat; known is false for an order the page did not create.
func (b *orderBook) apply(webhookID string, ev orderEvent) (first, known bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[webhookID] {
		return false, true
	}
	b.seen[webhookID] = true
	o, known := b.orders[ev.Order.ID]
	if !known {
		return true, false
	}
	o.Events = append(o.Events, ev.Type)
	if ev.Order.Status != "" {
		o.Status = ev.Order.Status // order.paid: paid; ship it here
	}
	return true, true
}

// listProducts is GET /api/products: what payd shows buyers, with payd's
// prices (the page shows nothing it made up).
func (s *shop) listProducts(w http.ResponseWriter, r *http.Request) {
	list, err := s.payd.products(r.Context())
	if err != nil {
		s.log.Error("list products", "err", err)
		writeError(w, http.StatusBadGateway, "payd could not be asked for the products")
		return
	}
	type item struct {
		SKU       string `json:"sku"`
		Name      string `json:"name"`
		UnitPrice string `json:"unit_price"`
		Currency  string `json:"currency"`
		Stock     *int64 `json:"stock"`
	}
	out := make([]item, 0, len(list))
	for _, p := range list {
		if s.sells(p.Sku) {
			out = append(out, item{SKU: p.Sku, Name: p.Name, UnitPrice: p.UnitPrice, Currency: p.Currency, Stock: p.Stock})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (s *shop) sells(sku string) bool {
	for _, p := range s.catalogue {
		if p.SKU == sku {
			return true
		}
	}
	return false
}

// cartIDPattern is what the page sends as its cart's id (a UUID).
var cartIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{8,64}$`)

// cartRequest is what the page sends: SKUs and quantities, never a price.
type cartRequest struct {
	CartID string `json:"cart_id"`
	Items  []struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	} `json:"items"`
}

// orderCreated is all the browser gets of a new order: its id, its client
// secret (a credential for this one order: read, pay, cancel), and what
// payd priced it at, to show.
type orderCreated struct {
	OrderID      string `json:"order_id"`
	ClientSecret string `json:"client_secret"`
	Amount       string `json:"amount"`
	Currency     string `json:"currency"`
}

func (s *shop) getOrder(w http.ResponseWriter, r *http.Request) {
	o, ok := s.orders.get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "no such order of this shop")
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers a problem of the shop's own (payd's are passed on as
// payd wrote them).
func writeError(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "title": http.StatusText(status), "detail": detail})
}

// passOn answers payd's own answer: its status, its problem, its
// Retry-After.
func passOn(w http.ResponseWriter, resp *http.Response, body []byte) {
	for _, h := range []string{"Content-Type", "Retry-After", "Idempotent-Replayed"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}

// timeout bounds one call to payd on the page's behalf.
func timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}
