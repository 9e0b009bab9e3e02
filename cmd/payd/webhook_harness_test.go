package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

// This file extends the end-to-end harness for the webhook path: signed
// provider events, charges made behind payd's back, a second payd on the
// same database, and readers of payd's own tables.

// signedWebhook returns the Standard Webhooks headers for body under id,
// signed at ts with the secret payd is started with.
func signedWebhook(t testing.TB, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(testWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return h
}

// payment is what a payment event says about a charge.
type payment struct {
	AttemptID, ChargeID, OrderID, Amount, Currency string
}

// eventBody renders a provider event as the sandbox does.
func eventBody(t testing.TB, id, typ string, p payment) []byte {
	t.Helper()
	status := "succeeded"
	if typ == "payment.failed" {
		status = "failed"
	}
	b, err := json.Marshal(map[string]any{
		"id": id, "type": typ, "created_at": time.Now().UTC().Format(time.RFC3339Nano),
		"data": map[string]string{
			"charge_id": p.ChargeID, "idempotency_key": p.AttemptID, "order_id": p.OrderID,
			"amount": p.Amount, "currency": p.Currency, "status": status,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postWebhook sends body to payd's webhook endpoint with the given headers.
func (s *stack) postWebhook(body []byte, h http.Header) reply {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/webhooks/provider", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST webhook: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	checkContract(s.t, req, resp.StatusCode, resp.Header, b)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// sendEvent signs a payment event now and delivers it once.
func (s *stack) sendEvent(id, typ string, p payment) reply {
	s.t.Helper()
	body := eventBody(s.t, id, typ, p)
	return s.postWebhook(body, signedWebhook(s.t, id, time.Now(), body))
}

// startPeer starts a second payd, through run, on the stack's database and
// provider: another process as far as payd can tell (its own change
// notifications, its own jobs), sharing only what replicas share.
func (s *stack) startPeer() *stack {
	s.t.Helper()
	p := &stack{t: s.t, sandbox: s.sandbox, db: s.db, logs: &syncBuffer{}, dialect: s.dialect, dbURL: s.dbURL, sandboxL: s.sandboxL}
	p.start(env{
		"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": s.dbURL,
		"PAYD_ADMIN_TOKEN": testAdminToken, "PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": testSecretKey,
		"PAYD_PROVIDER_URL": "http://" + s.sandboxL.Addr().String(), "PAYD_LOG_LEVEL": "info",
	})
	return p
}

// providerClient talks to the stack's sandbox as payd does, so a test can
// make charges payd never asked for.
func (s *stack) providerClient() *provider.Client {
	return provider.NewClient("http://" + s.sandboxL.Addr().String())
}

// fabricateCharge makes a real, succeeded charge at the sandbox for order
// under a key payd never used: money the provider took that payd did not ask for.
func (s *stack) fabricateCharge(key, orderID, amount string) domain.Charge {
	s.t.Helper()
	ch, err := s.providerClient().Charge(context.Background(), domain.ChargeRequest{
		IdempotencyKey: key, OrderID: orderID, Amount: decimal.RequireFromString(amount), Currency: "USD", PaymentMethod: "pm_ok",
	})
	if err != nil || ch.Status != domain.ChargeSucceeded {
		s.t.Fatalf("sandbox Charge(%q) = %+v, %v, want succeeded", key, ch, err)
	}
	return ch
}

// providerCharge is the sandbox's record of the charge with this ID.
func (s *stack) providerCharge(id string) domain.Charge {
	s.t.Helper()
	all, err := s.sandbox.Charges(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, c := range all {
		if c.ID == id {
			return c
		}
	}
	s.t.Fatalf("sandbox has no charge %s", id)
	return domain.Charge{}
}

// orderRow reads an order straight from payd's database.
func (s *stack) orderRow(id string) domain.Order {
	s.t.Helper()
	o, err := repository.NewOrderStore(s.db).FindByID(context.Background(), id)
	if err != nil {
		s.t.Fatalf("FindByID(%s): %v", id, err)
	}
	return o
}

// attempts reads an order's payment attempts, oldest first.
func (s *stack) attempts(orderID string) []domain.Attempt {
	s.t.Helper()
	as, err := repository.NewAttemptStore(s.db).ListByOrder(context.Background(), orderID)
	if err != nil {
		s.t.Fatalf("ListByOrder(%s): %v", orderID, err)
	}
	return as
}

// onlyAttempt is the single attempt of an order, or a failure.
func (s *stack) onlyAttempt(orderID string) domain.Attempt {
	s.t.Helper()
	as := s.attempts(orderID)
	if len(as) != 1 {
		s.t.Fatalf("attempts of %s = %d, want 1", orderID, len(as))
	}
	return as[0]
}

// record is GET /v1/requests/{key} as the customer sees it.
func (s *stack) record(token, key string) (status string, respStatus int, body map[string]any) {
	s.t.Helper()
	r := s.do(request{method: "GET", path: "/v1/requests/" + key, token: token})
	if r.Status != http.StatusOK {
		s.t.Fatalf("GET /v1/requests/%s = %d %s, want 200", key, r.Status, r.Body)
	}
	var rec struct {
		Status   string `json:"status"`
		Response *struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal(r.Body, &rec); err != nil {
		s.t.Fatalf("GET /v1/requests/%s: %v in %s", key, err, r.Body)
	}
	if rec.Response == nil {
		return rec.Status, 0, nil
	}
	return rec.Status, rec.Response.Status, rec.Response.Body
}

// eventually polls cond until it holds or timeout passes; the wait is
// generous because the machine is shared, the poll keeps it quick.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := 10 * time.Millisecond; !cond(); pause = min(pause*2, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(pause)
	}
}

// silentSandbox keeps the sandbox's own webhooks in its outbox, so the
// only events payd hears are the ones a test sends.
func silentSandbox(c *sandbox.Config) { c.WebhookURL = "" }

// asyncOrder creates an order of amount and pays it with pm_async, on a
// stack whose sandbox delivers nothing: the order stays processing until
// the test speaks for the provider. It returns the order, the pay key and
// what the provider's event about the charge says.
func (s *stack) asyncOrder(token, amount string) (orderID, key string, p payment) {
	s.t.Helper()
	orderID, key = s.order(token, amount), uuid.NewString()
	if r := s.pay(token, orderID, key, "pm_async"); r.Status != http.StatusAccepted {
		s.t.Fatalf("pay(pm_async) = %d %s, want 202", r.Status, r.Body)
	}
	a := s.onlyAttempt(orderID)
	// The provider announces a success only once the charge succeeded, and
	// only then could a refund of it go through.
	var ch domain.Charge
	eventually(s.t, settleWait, "sandbox charge never succeeded", func() bool {
		var err error
		ch, err = s.providerClient().GetCharge(context.Background(), a.ID)
		return err == nil && ch.Status == domain.ChargeSucceeded
	})
	return orderID, key, payment{AttemptID: a.ID, ChargeID: ch.ID, OrderID: orderID, Amount: amount, Currency: "USD"}
}

// noOrphans fails unless payd recorded no discrepancy and made no refund,
// and the provider's charge chargeID was not refunded.
func (s *stack) noOrphans(chargeID string) {
	s.t.Helper()
	var types []string
	if err := s.db.Gorm().Raw("SELECT type FROM discrepancies").Scan(&types).Error; err != nil {
		s.t.Fatal(err)
	}
	if n := s.count("refunds"); len(types) != 0 || n != 0 {
		s.t.Errorf("discrepancies %v and %d refunds, want none", types, n)
	}
	if got := s.providerCharge(chargeID).RefundedAmount; !got.IsZero() {
		s.t.Errorf("charge %s refunded %s at the provider, want 0", chargeID, got)
	}
}

// forEach runs fn(0..n-1) on at most workers goroutines.
func forEach(workers, n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
