package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// hostile is a payment provider that misbehaves on command: a proxy in
// front of the test's sandbox whose rules the test sets per order. The
// sandbox stays the book of record (what was really charged); the proxy
// only changes what payd hears, and when.
type hostile struct {
	t      *testing.T
	url    string
	target *url.URL

	mu    sync.Mutex
	rules map[string]*hostileRule // by order ID; "*" for every order
	keys  map[string]string       // provider idempotency key → order ID, learnt from charge requests
	seen  map[string]int          // charge requests per order that reached the proxy

	refundAmount string                   // when set, replaces the amount of every refund reply (refund_reply_test.go)
	dropRefunds  bool                     // cut every refund reply after the provider acted (resolve_refund_key_test.go)
	refuseRefund bool                     // refuse every refund request without forwarding it (resolve_refund_key_test.go)
	getHolds     map[string]time.Duration // by order ID: hold the next GET /v1/charges/{key} reply this long, once (stuck_lease_test.go)
	cutGets      bool                     // cut every GET /v1/charges/{key} reply halfway through its body (webhook_hint_test.go)
	onRefund     func()                   // runs once while the next refund request is held on its way (refund_in_flight_test.go)
}

// hostileRule is how the provider misbehaves for one order. Zero fields
// behave well.
type hostileRule struct {
	// HoldRequest holds a charge request this long before the provider
	// sees it: the charge is "in flight" and GET finds nothing meanwhile.
	HoldRequest time.Duration
	// HoldReply holds the provider's answer to a charge this long after
	// the provider charged.
	HoldReply time.Duration
	// RefuseStatus answers charge requests with this status and
	// RefuseCode as the provider's error code, without charging.
	RefuseStatus int
	RefuseCode   string
	// Amount and Currency, when set, replace the charge's amount and
	// currency in every charge the provider describes for this order
	// (the charge reply and GET /v1/charges/{key}).
	Amount, Currency string
	// Status, when set, replaces the charge's status in those replies.
	Status string
	// Drop lets the provider charge, then cuts the connection before
	// payd reads the answer.
	Drop bool
	// Times limits the rule to this many charge requests (0: all).
	Times int
}

// errDrop asks the proxy to cut the connection instead of answering.
var errDrop = errors.New("hostile: drop the reply")

// newHostile starts the proxy; setTarget points it at the provider.
func newHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{t: t, rules: map[string]*hostileRule{}, keys: map[string]string{}, seen: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(h.providerURL()) },
		ModifyResponse: h.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errDrop) {
				panic(http.ErrAbortHandler) // the client sees a cut connection
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
			h.mu.Lock()
			hold := h.onRefund
			h.onRefund = nil
			h.mu.Unlock()
			if hold != nil {
				hold()
			}
		}
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" && h.refusingRefunds() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "charge_not_refundable", "message": "refused by the hostile provider"}})
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			rule := h.onCharge(r)
			if rule != nil && rule.RefuseStatus != 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(rule.RefuseStatus)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": rule.RefuseCode, "message": "refused by the hostile provider"}})
				return
			}
			if rule != nil && rule.HoldRequest > 0 {
				time.Sleep(rule.HoldRequest)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *hostile) setTarget(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.target = u
	h.mu.Unlock()
}

func (h *hostile) providerURL() *url.URL {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.target
}

// set makes the provider misbehave for orderID ("*": every order) as rule
// says, replacing any earlier rule; clear(orderID) makes it behave again.
func (h *hostile) set(orderID string, rule hostileRule) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rules[orderID] = &rule
}

func (h *hostile) clear(orderID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.rules, orderID)
}

// chargeRequests is how many charge requests for orderID reached the proxy.
func (h *hostile) chargeRequests(orderID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[orderID]
}

// ruleFor returns the rule in force for orderID, or nil.
func (h *hostile) ruleFor(orderID string) *hostileRule {
	if r, ok := h.rules[orderID]; ok {
		return r
	}
	return h.rules["*"]
}

// onCharge notes a charge request and returns the rule it falls under,
// using up one of the rule's Times.
func (h *hostile) onCharge(r *http.Request) *hostileRule {
	orderID, ok := chargeOrderID(r)
	if !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[orderID]++
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		h.keys[key] = orderID
	}
	rule := h.ruleFor(orderID)
	if rule == nil {
		return nil
	}
	if rule.Times > 0 {
		rule.Times--
		if rule.Times == 0 {
			cp := *rule
			for id, r := range h.rules {
				if r == rule {
					delete(h.rules, id)
				}
			}
			return &cp
		}
	}
	cp := *rule
	return &cp
}

// chargeOrderID reads the order a charge request is for, leaving the
// request's body as it found it.
func chargeOrderID(r *http.Request) (string, bool) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		OrderID string `json:"order_id"`
	}
	if err != nil || json.Unmarshal(body, &req) != nil {
		return "", false
	}
	return req.OrderID, true
}

// modifyResponse rewrites what the provider says about a charge of a
// misbehaving order, holds it, or drops it.
func (h *hostile) modifyResponse(resp *http.Response) error {
	req := resp.Request
	if req.Method == http.MethodPost && req.URL.Path == "/v1/refunds" {
		return h.rewriteRefund(resp)
	}
	isCharge := req.Method == http.MethodPost && req.URL.Path == "/v1/charges"
	isGet := req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v1/charges/")
	if !isCharge && !isGet {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var ch map[string]any
	orderID := ""
	if json.Unmarshal(body, &ch) == nil {
		orderID, _ = ch["order_id"].(string)
	}
	h.mu.Lock()
	if orderID == "" && isGet {
		orderID = h.keys[strings.TrimPrefix(req.URL.Path, "/v1/charges/")]
	}
	var rule *hostileRule
	if r := h.ruleFor(orderID); r != nil && orderID != "" {
		cp := *r
		rule = &cp
	}
	h.mu.Unlock()
	if rule != nil && ch != nil && resp.StatusCode < 300 {
		if rule.Amount != "" {
			ch["amount"] = rule.Amount
		}
		if rule.Currency != "" {
			ch["currency"] = rule.Currency
		}
		if rule.Status != "" {
			ch["status"] = rule.Status
		}
		if body, err = json.Marshal(ch); err != nil {
			return err
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	if isGet {
		h.holdGet(orderID)
		if h.cuttingGets() {
			resp.Body = &cutReader{rest: body[:len(body)/2]}
		}
	}
	if rule != nil && isCharge {
		if rule.HoldReply > 0 {
			time.Sleep(rule.HoldReply)
		}
		if rule.Drop {
			return errDrop
		}
	}
	return nil
}

// holdGetOnce holds the reply to the next GET of a charge of orderID for d
// (the provider has answered; payd hears it d later).
func (h *hostile) holdGetOnce(orderID string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.getHolds == nil {
		h.getHolds = map[string]time.Duration{}
	}
	h.getHolds[orderID] = d
}

// holdGet sleeps for a pending holdGetOnce of orderID, using it up.
func (h *hostile) holdGet(orderID string) {
	h.mu.Lock()
	d := h.getHolds[orderID]
	delete(h.getHolds, orderID)
	h.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

// cutGetReplies makes the provider cut every reply to a GET of a charge
// halfway through its body, after a 200 and its Content-Length (on), or
// answer whole again (off): payd's question finds the reply broken.
func (h *hostile) cutGetReplies(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutGets = on
}

func (h *hostile) cuttingGets() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cutGets
}

// cutReader yields rest, then fails: the proxy then aborts the reply
// it has begun, and the client reads an unexpected EOF.
type cutReader struct{ rest []byte }

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, errDrop
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (r *cutReader) Close() error { return nil }

// setRefundAmount makes the provider's refund replies report amount.
func (h *hostile) setRefundAmount(amount string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refundAmount = amount
}

// loseRefundReplies makes the provider refund as asked but cut every
// reply before payd reads it (on), or answer again (off).
func (h *hostile) loseRefundReplies(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropRefunds = on
}

// holdNextRefund runs fn while the next refund request is held on its way
// to the provider, then lets it through.
func (h *hostile) holdNextRefund(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onRefund = fn
}

// refuseRefunds makes the provider refuse every refund request, giving
// nothing back (on), or refund again (off).
func (h *hostile) refuseRefunds(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuseRefund = on
}

func (h *hostile) refusingRefunds() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refuseRefund
}

// rewriteRefund applies setRefundAmount and loseRefundReplies to a refund reply.
func (h *hostile) rewriteRefund(resp *http.Response) error {
	h.mu.Lock()
	amount, drop := h.refundAmount, h.dropRefunds
	h.mu.Unlock()
	if drop {
		return errDrop
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var re map[string]any
	if amount != "" && resp.StatusCode < 300 && json.Unmarshal(body, &re) == nil {
		re["amount"] = amount
		if body, err = json.Marshal(re); err != nil {
			return err
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// TestHostileProviderObeys checks the proxy itself: each rule changes what
// payd's provider client hears, and the sandbox's books stay the truth.
func TestHostileProviderObeys(t *testing.T) {
	s := start(t, on("sqlite"), throughHostile())
	h := s.hostile
	_, token := s.register("hostile@example.com")

	refused := s.order(token, "10.00")
	h.set(refused, hostileRule{RefuseStatus: http.StatusBadRequest, RefuseCode: "unknown_payment_method"})
	s.pay(token, refused, "k-refused", "pm_ok")
	if got := s.charges(refused); got != 0 {
		t.Errorf("refused order: sandbox charges = %d, want 0", got)
	}
	if got := h.chargeRequests(refused); got != 1 {
		t.Errorf("refused order: charge requests = %d, want 1", got)
	}

	dropped := s.order(token, "10.00")
	h.set(dropped, hostileRule{Drop: true}) // every reply: net/http may resend a keyed POST once
	r := s.pay(token, dropped, "k-dropped", "pm_ok")
	if r.Status != http.StatusAccepted {
		t.Errorf("dropped reply: pay status = %d, want 202; body %s", r.Status, r.Body)
	}
	if got := s.charges(dropped); got != 1 {
		t.Errorf("dropped reply: sandbox charges = %d, want 1", got)
	}

	rewritten := s.order(token, "10.00")
	h.set(rewritten, hostileRule{Amount: "0.01"})
	ch, err := provider.NewClient(h.url).Charge(t.Context(), domain.ChargeRequest{
		IdempotencyKey: "k-rewrite", OrderID: rewritten, Amount: decimal.RequireFromString("10.00"), Currency: "USD", PaymentMethod: "pm_ok",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.Amount.String(); got != "0.01" {
		t.Errorf("rewritten reply: amount = %s, want 0.01", got)
	}
}

// TestPayAnswersItsOwnPayment: a pay request whose charge succeeds after
// the order was paid by another request's charge gets 409
// order_already_paid — its own charge goes back as a duplicate — never a
// 200 that reports someone else's payment as its own.
func TestPayAnswersItsOwnPayment(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("own@example.com")
		id := s.order(token, "7.00")
		h.set(id, hostileRule{HoldReply: 700 * time.Millisecond})
		got := make(chan reply, 1)
		go func() { got <- s.pay(token, id, "k-own", "pm_ok") }()
		eventually(t, 5*time.Second, "the charge reaches the provider", func() bool { return s.charges(id) == 1 })
		// Another payment of the order won meanwhile (as payd's books say).
		if err := s.db.Gorm().Exec("UPDATE orders SET status = 'paid', pay_request_id = 'k-other' WHERE id = ?", id).Error; err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.Status != http.StatusConflict || r.code(t) != "order_already_paid" {
			t.Errorf("pay whose charge lost to another payment = %d %s, want 409 order_already_paid", r.Status, r.Body)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 1 {
			t.Errorf("refunds of the losing charge = %d, want 1", n)
		}
	})
}
