package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// The end-to-end harness for the webhook path: signed provider events,
// payments left for the test to settle, and readers of payd's own tables.

// signedWebhook returns the Standard Webhooks headers for body under id,
// signed at ts with the secret payd is started with.
func signedWebhook(t testing.TB, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	sig := signWith(t, testWebhookSecret, id, ts, body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return h
}

// signWith signs body under id at ts with secret, as a "v1,..." value.
func signWith(t testing.TB, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
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
		ch, err = s.directProvider().GetCharge(context.Background(), domain.Attempt{ID: a.ID})
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
