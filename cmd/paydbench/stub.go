package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
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
	s := &stub{charges: map[string]*charge{}, URL: "http://" + ln.Addr().String(), waiting: map[net.Conn]bool{}}
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
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_supported", "the benchmark's provider only charges")
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
		ID: fmt.Sprintf("ch_%08d", len(s.charges)+1), IdempotencyKey: key, OrderID: req.OrderID,
		Amount: req.Amount, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Status: "succeeded",
		RefundedAmount: "0", CreatedAt: now.Format(time.RFC3339Nano), created: now,
	}
	s.charges[key] = ch
	return ch, true
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

// list answers the reconciliation's listing: charges created in [from, to).
func (s *stub) list(w http.ResponseWriter, r *http.Request) {
	from, err1 := time.Parse(time.RFC3339Nano, r.URL.Query().Get("from"))
	to, err2 := time.Parse(time.RFC3339Nano, r.URL.Query().Get("to"))
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "from and to are RFC 3339 times")
		return
	}
	out := struct {
		Data []*charge `json:"data"`
	}{Data: []*charge{}}
	s.mu.Lock()
	for _, ch := range s.charges {
		if !ch.created.Before(from) && ch.created.Before(to) {
			out.Data = append(out.Data, ch)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out.Data, func(a, b *charge) int { return a.created.Compare(b.created) })
	writeJSON(w, http.StatusOK, out)
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
