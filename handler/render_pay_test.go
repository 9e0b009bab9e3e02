package handler

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// TestRenderPayOnlyPaidIs200: a pay reply is 200 only for a paid order;
// processing is 202, and an order left pending or a closed order is a
// problem, never a 200 that a client would take for success. (That the
// paid order is the caller's own payment is Checkout.Pay's to decide:
// TestPayAnswersItsOwnPayment.)
func TestRenderPayOnlyPaidIs200(t *testing.T) {
	now := time.Now().UTC()
	order := func(s domain.OrderStatus) domain.Order {
		return domain.Order{ID: "o1", CustomerID: "c1", Status: s, Amount: decimal.RequireFromString("5.00"), Currency: "USD",
			PayRequestID: "k1", CreatedAt: now, UpdatedAt: now, PaidAt: &now}
	}
	tests := []struct {
		status   domain.OrderStatus
		want     int
		wantCode string
	}{
		{domain.StatusPaid, http.StatusOK, ""},
		{domain.StatusRefunded, http.StatusOK, ""},
		{domain.StatusProcessing, http.StatusAccepted, ""},
		{domain.StatusPending, http.StatusBadGateway, "payment_not_completed"},
		{domain.StatusCancelled, http.StatusConflict, "order_not_payable"},
		{domain.StatusExpired, http.StatusConflict, "order_expired"},
	}
	for _, tt := range tests {
		r := RenderPay(order(tt.status), nil)
		if r.Status != tt.want {
			t.Errorf("RenderPay(%s, nil) status = %d, want %d (%s)", tt.status, r.Status, tt.want, r.Body)
			continue
		}
		var body struct{ Code string }
		_ = json.Unmarshal(r.Body, &body)
		if body.Code != tt.wantCode {
			t.Errorf("RenderPay(%s, nil) code = %q, want %q", tt.status, body.Code, tt.wantCode)
		}
	}
}
