package handler

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/payd/payd/domain"
)

// TestToProblem: the error table's rows, and the line between "cannot reach
// the database" (503, retry) and "a fault in payd" (500).
func TestToProblem(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		err    error
		status int
		code   string
		known  bool
	}{
		{domain.ErrOrderNotFound, http.StatusNotFound, "order_not_found", true},
		{fmt.Errorf("claim: %w", domain.ErrOrderAlreadyPaid), http.StatusConflict, "order_already_paid", true},
		{&domain.DeclineError{Code: "insufficient_funds"}, http.StatusPaymentRequired, "card_declined", true},
		{&domain.DeclineError{Code: domain.NotCharged}, http.StatusBadGateway, "payment_not_completed", true},
		{&domain.ValidationError{Field: "amount", Reason: "bad"}, http.StatusBadRequest, "validation_failed", true},
		{fmt.Errorf("find order: %w", refused), http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("find order: %w", driver.ErrBadConn), http.StatusServiceUnavailable, "service_unavailable", false},
		{errors.New("boom"), http.StatusInternalServerError, "internal_error", false},
	}
	for _, tt := range tests {
		p, known := toProblem(tt.err)
		if p.Status != tt.status || p.Code != tt.code || known != tt.known {
			t.Errorf("toProblem(%v) = %d %s (known %v), want %d %s (known %v)", tt.err, p.Status, p.Code, known, tt.status, tt.code, tt.known)
		}
	}
	if p, _ := toProblem(refused); p.retryAfter < 1 {
		t.Errorf("503 Retry-After = %d, want at least 1", p.retryAfter)
	}
}
