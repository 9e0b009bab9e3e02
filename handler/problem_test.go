package handler

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
)

// TestToProblem: the error table's rows, and the line between "cannot reach
// the database" (503, retry) and "a fault in payd" (500).
func TestToProblem(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	// What the adapters make of a refused connection: the repository's
	// domain.ErrUnavailable, the provider's domain.ErrProviderUnreachable.
	dbRefused := fmt.Errorf("%w: %w", domain.ErrUnavailable, refused)
	providerRefused := fmt.Errorf("%w: %w: %w", domain.ErrProviderUnreachable, domain.ErrProviderUnavailable, refused)
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
		{fmt.Errorf("find order: %w", dbRefused), http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("find order: %w", fmt.Errorf("%w: %w", domain.ErrUnavailable, driver.ErrBadConn)), http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("refund: %w", providerRefused), http.StatusServiceUnavailable, "service_unavailable", false},
		// A provider that answered, but not in time or with a 5xx, is no
		// unreachable dependency.
		{fmt.Errorf("refund: %w: status 503", domain.ErrProviderUnavailable), http.StatusInternalServerError, "internal_error", false},
		// Sockets and drivers are the adapters' to classify: an error
		// none of them marked is a fault in payd.
		{fmt.Errorf("find order: %w", refused), http.StatusInternalServerError, "internal_error", false},
		// The repository's word: a write still conflicting after every retry,
		// a Galera node out of its cluster.
		{fmt.Errorf("claim order o1: %w", fmt.Errorf("%w: gave up after 5 attempts: %w", domain.ErrUnavailable, errors.New("Error 1213"))),
			http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("find order: %w", fmt.Errorf("%w: %w", domain.ErrUnavailable, errors.New("Error 1047: WSREP has not yet prepared node for application use"))),
			http.StatusServiceUnavailable, "service_unavailable", false},
		{errors.New("boom"), http.StatusInternalServerError, "internal_error", false},
		// An answer the idempotency record could not store is not sent,
		// whatever the cause and whatever the answer (ADR 0051).
		{fmt.Errorf("%w: k1: complete idempotency record: %w", idempotency.ErrAnswerNotStored, dbRefused), http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("%w: k1: %w", idempotency.ErrAnswerNotStored, idempotency.ErrStoredResponseUnreadable), http.StatusServiceUnavailable, "service_unavailable", false},
		{fmt.Errorf("%w: k1: %w", idempotency.ErrAnswerNotStored, errors.New("boom")), http.StatusServiceUnavailable, "service_unavailable", false},
	}
	for _, tt := range tests {
		p, known := toProblem(tt.err)
		if p.Status != tt.status || p.Code != tt.code || known != tt.known {
			t.Errorf("toProblem(%v) = %d %s (known %v), want %d %s (known %v)", tt.err, p.Status, p.Code, known, tt.status, tt.code, tt.known)
		}
	}
	for _, err := range []error{dbRefused, providerRefused, domain.ErrUnavailable, domain.ErrProviderUnreachable, idempotency.ErrAnswerNotStored} {
		if p, _ := toProblem(err); p.retryAfter < 1 {
			t.Errorf("toProblem(%v) Retry-After = %d, want at least 1", err, p.retryAfter)
		}
	}
}

// TestIdempotencyErrorsThroughTheTable: what the idempotency middleware
// and engine return reaches the caller through this table with the code,
// status and Retry-After docs/guarantees.md#idempotency-rules names (the middleware's own tests use a
// stand-in error handler).
func TestIdempotencyErrorsThroughTheTable(t *testing.T) {
	tests := []struct {
		err        error
		status     int
		code       string
		retryAfter int
	}{
		{idempotency.ErrMalformedBody, http.StatusBadRequest, "validation_failed", 0},
		{idempotency.ErrKeyConflict, http.StatusBadRequest, "idempotency_key_invalid", 0},
		{domain.ErrKeyMissing, http.StatusBadRequest, "idempotency_key_missing", 0},
		{domain.ErrKeyInvalid, http.StatusBadRequest, "idempotency_key_invalid", 0},
		{fmt.Errorf("begin: %w", domain.ErrKeyReused), http.StatusUnprocessableEntity, "idempotency_key_reused", 0},
		{&idempotency.InUseError{RetryAfter: 2500 * time.Millisecond}, http.StatusConflict, "idempotency_key_in_use", 3},
		{fmt.Errorf("begin: %w", idempotency.ErrStoredResponseUnreadable), http.StatusGone, "stored_response_unreadable", 0},
	}
	for _, tt := range tests {
		p, known := toProblem(tt.err)
		if p.Status != tt.status || p.Code != tt.code || !known {
			t.Errorf("toProblem(%v) = %d %s (known %v), want %d %s (known)", tt.err, p.Status, p.Code, known, tt.status, tt.code)
		}
		if tt.retryAfter != 0 && p.retryAfter != tt.retryAfter {
			t.Errorf("toProblem(%v) Retry-After = %d, want %d", tt.err, p.retryAfter, tt.retryAfter)
		}
	}
}

// TestRefusedResolutionNamesActions: a refused resolution's problem names
// the actions that may still resolve the discrepancy, in the detail and
// as the `actions` member; an empty list is sent as [] ("none"), and a
// problem about anything else has no such member.
func TestRefusedResolutionNamesActions(t *testing.T) {
	dup := domain.Discrepancy{Type: domain.DuplicateCharge, Status: domain.DiscrepancyOpen, ChargeID: "ch_1"}
	resolved := dup
	resolved.Status = domain.DiscrepancyResolved
	tests := []struct {
		name   string
		err    error
		code   string
		detail string
		json   string // the actions member as sent
	}{
		{"apply on a duplicate charge", fmt.Errorf("resolve: %w", domain.Unfit(dup, domain.ActionApply, domain.ErrResolutionNotApplicable)),
			"resolution_not_applicable", "This action does not fit this discrepancy. The actions that fit it: refund, ignore.", `"actions":["refund","ignore"]`},
		{"refund refused once asked", domain.Unfit(dup, domain.ActionRefund, fmt.Errorf("%w: nothing left", domain.ErrResolutionNotApplicable)),
			"resolution_not_applicable", "This action does not fit this discrepancy. The actions that fit it: ignore.", `"actions":["ignore"]`},
		{"nothing else fits", domain.Unfit(domain.Discrepancy{Type: domain.Disputed, Status: domain.DiscrepancyOpen}, domain.ActionIgnore, domain.ErrResolutionNotApplicable),
			"resolution_not_applicable", "This action does not fit this discrepancy, and no other action fits it now.", `"actions":[]`},
		{"already resolved", domain.Unfit(resolved, domain.ActionIgnore, domain.ErrAlreadyResolved),
			"discrepancy_already_resolved", "This discrepancy was already resolved with another action.", `"actions":[]`},
	}
	for _, tt := range tests {
		p, known := toProblem(tt.err)
		if !known || p.Code != tt.code || p.Status != http.StatusConflict || p.Detail != tt.detail {
			t.Errorf("%s: toProblem = %d %s %q (known %v), want 409 %s %q", tt.name, p.Status, p.Code, p.Detail, known, tt.code, tt.detail)
		}
		b, err := json.Marshal(p)
		if err != nil || !strings.Contains(string(b), tt.json) {
			t.Errorf("%s: problem JSON %s, want it to carry %s", tt.name, b, tt.json)
		}
	}
	b, _ := json.Marshal(problem("order_not_found", "There is no such order."))
	if strings.Contains(string(b), "actions") {
		t.Errorf("problem of another code = %s, want no actions member", b)
	}
}
