package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// charge is a charge as the provider API writes it (see provider/wire.go).
type charge struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	PaymentMethod  string `json:"payment_method"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	RefundedAmount string `json:"refunded_amount"`
	CreatedAt      string `json:"created_at"`

	created time.Time
}

// chargeRequest is the body of POST /v1/charges.
type chargeRequest struct {
	OrderID       string `json:"order_id"`
	Amount        string `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
}

// stub is a provider that answers every charge at once from memory, so
// what a benchmark measures is payd's own cost. It honours idempotency
// keys as the real provider does: the same key with the same parameters is
// the same charge, with others a 422.
type stub struct {
	mu      sync.Mutex
	charges map[string]*charge // by idempotency key
	// listed holds the charges oldest first (by created, then ID), and
	// pos where each ID stands in it: the pages of the list.
	listed  []*charge
	pos     map[string]int
	refunds []refund // oldest first
	tag     string   // in its charges' IDs: a kept preload holds an earlier stub's
	srv     *http.Server
	URL     string

	connMu  sync.Mutex
	waiting map[net.Conn]bool // open connections waiting for a request (new or idle)
}

// startStub serves a stub provider on a free loopback port.
func startStub() (*stub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stub provider: %w", err)
	}
	s := &stub{charges: map[string]*charge{}, pos: map[string]int{}, tag: randomHex()[:8], URL: "http://" + ln.Addr().String(), waiting: map[net.Conn]bool{}}
	s.srv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, ConnState: s.track}
	go func() { _ = s.srv.Serve(ln) }() // ends with ErrServerClosed on Close
	return s, nil
}

// Close stops the server.
func (s *stub) Close() error { return s.srv.Close() }

// closeIdle closes the connections payd keeps open to the stub between
// charges, so payd's HTTP client lets their goroutines go: the idle ones
// and the new ones that never carried a request. payd's transport keeps
// those too: when a charge that was dialling a connection got an idle
// one first, the dialled connection joins the idle pool unused.
// http.Server's own idle closing (SetKeepAlivesEnabled(false)) leaves a
// new connection open until it is 5 seconds old, and the stub's
// ReadHeaderTimeout closes it only 10 seconds after it was accepted: as
// long as payd is given to drain.
func (s *stub) closeIdle() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.waiting {
		_ = c.Close()
		delete(s.waiting, c)
	}
}

// waitingConns is how many connections closeIdle would close now.
func (s *stub) waitingConns() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.waiting)
}

// track keeps the set of connections closeIdle may close: those waiting
// for a request, not those serving one.
func (s *stub) track(c net.Conn, state http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle:
		s.waiting[c] = true
	default: // active, hijacked, closed
		delete(s.waiting, c)
	}
}

func (s *stub) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.create)
	mux.HandleFunc("GET /v1/charges/{key}", s.get)
	mux.HandleFunc("GET /v1/charges", s.list)
	mux.HandleFunc("GET /v1/refunds", s.listRefunds)
	mux.HandleFunc("GET /v1/disputes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string][]struct{}{"data": {}}) // the benchmark's shop has none
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_supported", "the benchmark's provider only charges and lists")
	})
	return mux
}

func (s *stub) create(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var req chargeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || key == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "want a JSON charge and an Idempotency-Key")
		return
	}
	ch, ok := s.charge(key, req)
	if !ok {
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "the key was used with other parameters")
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

// charge returns the charge under key, creating it (succeeded) if there is
// none; false when the key holds a charge with other parameters.
func (s *stub) charge(key string, req chargeRequest) (*charge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.charges[key]; ok {
		same := ch.OrderID == req.OrderID && ch.Amount == req.Amount && ch.Currency == req.Currency && ch.PaymentMethod == req.PaymentMethod
		return ch, same
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	ch := &charge{
		ID: fmt.Sprintf("ch_%s_%08d", s.tag, len(s.charges)+1), IdempotencyKey: key, OrderID: req.OrderID,
		Amount: req.Amount, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Status: "succeeded",
		RefundedAmount: "0", CreatedAt: now.Format(time.RFC3339Nano), created: now,
	}
	s.charges[key] = ch
	s.pos[ch.ID] = len(s.listed)
	s.listed = append(s.listed, ch) // now: after every charge listed before
	return ch, true
}

// adopt takes charges and refunds made before payd started (a preload's
// books) as the stub's own, for its lists.
func (s *stub) adopt(charges []*charge, refunds []refund) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range charges {
		s.charges[ch.IdempotencyKey] = ch
	}
	s.listed = s.listed[:0]
	for _, ch := range s.charges {
		s.listed = append(s.listed, ch)
	}
	slices.SortFunc(s.listed, func(a, b *charge) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.ID, b.ID))
	})
	for i, ch := range s.listed {
		s.pos[ch.ID] = i
	}
	s.refunds = append(s.refunds, refunds...)
	slices.SortFunc(s.refunds, func(a, b refund) int { return a.created.Compare(b.created) })
}

func (s *stub) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ch, ok := s.charges[r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "charge_not_found", "no charge under this idempotency key")
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

// list answers the reconciliation's listing: a page of limit charges
// created in [from, to), oldest first, after the charge starting_after
// names, as payd's provider API pages it; without a limit, all of them in
// one reply (as payd before ADR 0066 asked for them).
func (s *stub) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, to, ok := window(w, r)
	if !ok {
		return
	}
	limit := -1 // none: the whole window in one reply, as a provider without pages
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit is 1 to 1000")
			return
		}
		limit = n
	}
	out := struct {
		Data    []*charge `json:"data"`
		HasMore bool      `json:"has_more"`
	}{Data: []*charge{}}
	s.mu.Lock()
	i, _ := slices.BinarySearchFunc(s.listed, from, func(c *charge, t time.Time) int { return c.created.Compare(t) })
	if after := q.Get("starting_after"); after != "" {
		p, known := s.pos[after]
		if !known {
			i = len(s.listed)
		}
		i = max(i, p+1)
	}
	for ; i < len(s.listed) && s.listed[i].created.Before(to); i++ {
		if limit >= 0 && len(out.Data) == limit {
			out.HasMore = true
			break
		}
		out.Data = append(out.Data, s.listed[i])
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// refund is a refund as the provider API writes it (see provider/wire.go).
type refund struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	ChargeID       string `json:"charge_id"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`

	created time.Time
}

// listRefunds answers the reconciliation's refund listing: every refund
// created in [from, to), oldest first, in one reply.
func (s *stub) listRefunds(w http.ResponseWriter, r *http.Request) {
	from, to, ok := window(w, r)
	if !ok {
		return
	}
	out := struct {
		Data []refund `json:"data"`
	}{Data: []refund{}}
	s.mu.Lock()
	for _, rf := range s.refunds {
		if !rf.created.Before(from) && rf.created.Before(to) {
			out.Data = append(out.Data, rf)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// window reads a list's from and to, or answers 400.
func window(w http.ResponseWriter, r *http.Request) (from, to time.Time, ok bool) {
	from, err1 := time.Parse(time.RFC3339Nano, r.URL.Query().Get("from"))
	to, err2 := time.Parse(time.RFC3339Nano, r.URL.Query().Get("to"))
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "from and to are RFC 3339 times")
		return time.Time{}, time.Time{}, false
	}
	return from, to, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}
