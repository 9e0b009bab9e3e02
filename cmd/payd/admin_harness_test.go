package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
)

// withoutWebhooks keeps every webhook in the sandbox's outbox, undelivered:
// payd then learns about charges only from its own calls and from
// reconciliation, which is what a reconciliation test needs to find.
func withoutWebhooks(c *sandbox.Config) { c.WebhookURL = "" }

// withDuplicates makes the sandbox deliver every webhook n times.
func withDuplicates(n int) func(*sandbox.Config) {
	return func(c *sandbox.Config) { c.Duplicates = n }
}

// admin is one call with the admin token.
func (s *stack) admin(method, path, key string, body any) reply {
	s.t.Helper()
	return s.do(request{method: method, path: path, token: testAdminToken, key: key, body: body})
}

// directProvider is a client of the stack's sandbox, for charging behind
// payd's back.
func (s *stack) directProvider() *provider.Client {
	return provider.NewClient("http://" + s.sandboxL.Addr().String())
}

// paidOrder creates an order of amount and pays it with pm_ok.
func (s *stack) paidOrder(token, amount string) string {
	s.t.Helper()
	id := s.order(token, amount)
	if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		s.t.Fatalf("pay(%s) = %d %s, want 200", id, r.Status, r.Body)
	}
	return id
}

// refund asks payd to refund amount ("" = the rest) of an order.
func (s *stack) refund(orderID, key, amount string) reply {
	s.t.Helper()
	body := map[string]string{"reason": "customer asked"}
	if amount != "" {
		body["amount"] = amount
	}
	return s.admin("POST", "/v1/admin/orders/"+orderID+"/refund", key, body)
}

// decode unmarshals a reply into v or fails the test.
func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("reply %d does not decode into %T: %v\n%s", r.Status, v, err, r.Body)
	}
	return v
}

// within polls cond every 20ms until it holds or d passes.
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The JSON shapes of the operator API, as a client reads them.
type (
	orderDoc struct {
		ID             string  `json:"id"`
		CustomerID     string  `json:"customer_id"`
		Status         string  `json:"status"`
		Amount         string  `json:"amount"`
		RefundedAmount string  `json:"refunded_amount"`
		PayRequestID   *string `json:"pay_request_id"`
		CreatedAt      string  `json:"created_at"`
	}
	pageDoc struct {
		Data       []orderDoc `json:"data"`
		NextCursor *string    `json:"next_cursor"`
	}
	attemptDoc struct {
		ID               string  `json:"id"`
		RequestID        string  `json:"request_id"`
		Status           string  `json:"status"`
		ProviderChargeID *string `json:"provider_charge_id"`
		Amount           string  `json:"amount"`
		CreatedAt        string  `json:"created_at"`
	}
	refundDoc struct {
		ID               string  `json:"id"`
		Kind             string  `json:"kind"`
		Status           string  `json:"status"`
		Amount           string  `json:"amount"`
		ChargeID         string  `json:"provider_charge_id"`
		ProviderRefundID *string `json:"provider_refund_id"`
		RequestID        *string `json:"request_id"`
	}
	refundResultDoc struct {
		Refund refundDoc `json:"refund"`
		Order  orderDoc  `json:"order"`
	}
	auditDoc struct {
		ID        string          `json:"id"`
		Actor     string          `json:"actor"`
		Action    string          `json:"action"`
		OrderID   *string         `json:"order_id"`
		Target    *string         `json:"target"`
		RequestID *string         `json:"request_id"`
		Result    int             `json:"result"`
		Detail    json.RawMessage `json:"detail"`
		CreatedAt string          `json:"created_at"`
	}
	eventDoc struct {
		ID         string  `json:"id"`
		Type       string  `json:"type"`
		Outcome    *string `json:"outcome"`
		ReceivedAt string  `json:"received_at"`
	}
	discrepancyDoc struct {
		ID             string  `json:"id"`
		RunID          *string `json:"run_id"`
		Type           string  `json:"type"`
		Reference      string  `json:"reference"`
		OrderID        *string `json:"order_id"`
		AttemptID      *string `json:"attempt_id"`
		ChargeID       *string `json:"provider_charge_id"`
		ProviderAmount *string `json:"provider_amount"`
		LocalAmount    *string `json:"local_amount"`
		Status         string  `json:"status"`
		Resolution     *string `json:"resolution"`
	}
	timelineDoc struct {
		Order         orderDoc         `json:"order"`
		Attempts      []attemptDoc     `json:"attempts"`
		WebhookEvents []eventDoc       `json:"webhook_events"`
		Refunds       []refundDoc      `json:"refunds"`
		Discrepancies []discrepancyDoc `json:"discrepancies"`
		Audit         []auditDoc       `json:"audit"`
		Timeline      []struct {
			At   string `json:"at"`
			Kind string `json:"kind"`
			ID   string `json:"id"`
		} `json:"timeline"`
	}
	runDoc struct {
		ID            string           `json:"id"`
		Source        string           `json:"source"`
		DryRun        bool             `json:"dry_run"`
		Matched       int              `json:"matched"`
		Found         int              `json:"found"`
		New           int              `json:"new"`
		Discrepancies []discrepancyDoc `json:"discrepancies"`
	}
)

// timeline reads GET /v1/admin/orders/{id}.
func (s *stack) timeline(orderID string) timelineDoc {
	s.t.Helper()
	r := s.admin("GET", "/v1/admin/orders/"+orderID, "", nil)
	if r.Status != http.StatusOK {
		s.t.Fatalf("GET /v1/admin/orders/%s = %d %s, want 200", orderID, r.Status, r.Body)
	}
	return decode[timelineDoc](s.t, r)
}

// auditRows counts audit_log rows of an action with a request ID and result.
func (s *stack) auditRows(action, key string, result int) int64 {
	s.t.Helper()
	return s.count("audit_log WHERE actor = 'admin' AND action = ? AND request_id = ? AND result = ?", action, key, result)
}
