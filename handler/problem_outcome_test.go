package handler

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
)

// TestOutcomeUnknownAsksToRetry: an unknown outcome (the provider's reply
// to a refund, or to the question about a charge, was lost) answers 503
// with a Retry-After and the code clients match on, never another 5xx
// (ADR 0047); its body is the one openapi.yaml shows.
func TestOutcomeUnknownAsksToRetry(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(slog.New(slog.DiscardHandler))
	e.POST("/v1/admin/orders/:id/refund", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderXRequestID, "req-1")
		return fmt.Errorf("refund: %w: the provider could not be asked about charge ch_1: %w",
			domain.ErrOutcomeUnknown, domain.ErrProviderUnreachable)
	})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/admin/orders/o1/refund", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("refund, outcome unknown = %d (Retry-After %q), want 503 with Retry-After 2", rec.Code, rec.Header().Get("Retry-After"))
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	want := documentedExample(t, "problem_payment_outcome_unknown")
	want["instance"], want["request_id"] = "/v1/admin/orders/o1/refund", "req-1"
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("body = %v\nwant the documented %v", got, want)
	}
	if pt := problemTypes["payment_outcome_unknown"]; pt.Status != http.StatusServiceUnavailable {
		t.Errorf("problemTypes[payment_outcome_unknown].Status = %d, want 503", pt.Status)
	}
}

// TestReplayedUnavailableSaysWhenToRetry: a record keeps no headers, so a
// stored 503 replayed to a concurrent duplicate gets its Retry-After back
// from its code; any other stored answer carries none.
func TestReplayedUnavailableSaysWhenToRetry(t *testing.T) {
	body := func(p *Problem) []byte {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	outcome, _ := toProblem(domain.ErrOutcomeUnknown)
	unavailable, _ := toProblem(domain.ErrUnavailable)
	refused, _ := toProblem(domain.ErrRefundRefused)
	for _, tt := range []struct {
		r    idempotency.Response
		want int
	}{
		{idempotency.Response{Status: outcome.Status, Body: body(outcome)}, outcome.retryAfter},
		{idempotency.Response{Status: unavailable.Status, Body: body(unavailable)}, unavailable.retryAfter},
		{idempotency.Response{Status: refused.Status, Body: body(refused)}, 0},
		{idempotency.Response{Status: http.StatusOK, Body: []byte(`{"id":"r1"}`)}, 0},
	} {
		if got := storedRetryAfter(tt.r); got != tt.want {
			t.Errorf("storedRetryAfter(%d %s) = %d, want %d", tt.r.Status, tt.r.Body, got, tt.want)
		}
	}
	if outcome.retryAfter < 1 || unavailable.retryAfter < 1 {
		t.Errorf("Retry-After of payment_outcome_unknown, service_unavailable = %d, %d; want both at least 1", outcome.retryAfter, unavailable.retryAfter)
	}
}

// documentedExample is the value of components/examples/name in openapi.yaml.
func documentedExample(t *testing.T, name string) map[string]any {
	t.Helper()
	ex := loadKin(t).Components.Examples[name]
	if ex == nil || ex.Value == nil {
		t.Fatalf("openapi.yaml has no example %s", name)
	}
	b, err := json.Marshal(ex.Value.Value)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
