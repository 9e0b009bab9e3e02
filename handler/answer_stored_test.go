package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// lostStore is a real record store that loses the database as it stores
// an answer: Complete fails, nothing stored.
type lostStore struct{ idempotency.RecordStore }

func (lostStore) Complete(context.Context, string, string, domain.RecordStatus, int, []byte, bool, time.Time) (bool, error) {
	return false, fmt.Errorf("complete idempotency record k1: %w: connection reset by peer", domain.ErrUnavailable)
}

// TestAnswerNotStoredIsNotSent: a handler's answer that the idempotency
// record could not store is not sent (ADR 0051). The caller gets 503
// service_unavailable with Retry-After, as problem JSON, none of the
// handler's headers, and the operator a WARN that names the request but
// carries nothing of the answer (it may hold a token).
func TestAnswerNotStoredIsNotSent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		sealer, err := idempotency.NewSealer("a server secret of enough length")
		if err != nil {
			t.Fatal(err)
		}
		engine := &idempotency.Engine{Records: lostStore{repository.NewRecordStore(dbtest.Open(t, d))}, Sealer: sealer,
			Lease: 30 * time.Second, InflightWait: 50 * time.Millisecond, TTL: time.Hour, Now: time.Now}
		var logs bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, nil))
		e := echo.New()
		e.HTTPErrorHandler = ErrorHandler(log)
		e.Use(requestID())
		m := &idempotency.Middleware{Engine: engine, Log: log, Scope: scopeOf, Body: body, RetryAfter: storedRetryAfter}
		e.POST("/v1/customers", func(c echo.Context) error {
			c.Response().Header().Set("Location", "/v1/customers/c1")
			return writeJSON(c, http.StatusCreated, map[string]string{"token": "ptk_the_secret"})
		}, m.Wrap(idempotency.KeySealed))

		r := httptest.NewRequest(http.MethodPost, "/v1/customers", strings.NewReader(`{"email":"ada@example.com"}`))
		r.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)

		var p Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusServiceUnavailable || p.Code != "service_unavailable" {
			t.Fatalf("answer = %d %s, want 503 service_unavailable", w.Code, w.Body)
		}
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After = %q, want 1 (service_unavailable's)", got)
		}
		if ct := w.Header().Get(echo.HeaderContentType); ct != "application/problem+json" {
			t.Errorf("Content-Type = %q, want application/problem+json", ct)
		}
		if loc := w.Header().Get("Location"); loc != "" {
			t.Errorf("Location = %q: the unsent answer's header went out", loc)
		}
		if p.RequestID == "" || w.Header().Get(echo.HeaderXRequestID) != p.RequestID {
			t.Errorf("request_id %q, X-Request-ID %q: want the same, set", p.RequestID, w.Header().Get(echo.HeaderXRequestID))
		}
		line := logs.String()
		if !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, p.RequestID) {
			t.Errorf("log = %s, want a WARN naming request %s", line, p.RequestID)
		}
		if strings.Contains(line, "ptk_the_secret") || strings.Contains(w.Body.String(), "ptk_the_secret") {
			t.Errorf("the unsent answer's token leaked: log %s, body %s", line, w.Body)
		}
	})
}
