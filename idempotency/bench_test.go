package idempotency_test

import (
	"context"
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
	"github.com/payd/payd/repository"
)

// memoryRecords holds one record in memory: the replay benchmark's store,
// so that what it measures is the middleware, not a database.
type memoryRecords struct {
	idempotency.RecordStore // every method but Find is unused
	rec                     domain.Record
}

func (m *memoryRecords) Find(_ context.Context, scope, key string) (domain.Record, error) {
	if scope != m.rec.Scope || key != m.rec.Key {
		return domain.Record{}, domain.ErrRecordNotFound
	}
	return m.rec, nil
}

const (
	benchPath = "/v1/orders/o1/pay"
	benchBody = `{"payment_method":"pm_ok"}`
	benchKey  = "bench-key-1"
)

// replayServer is an Echo server with the middleware on a pay route whose
// key benchKey has a stored answer in records.
func replayServer(b *testing.B, records idempotency.RecordStore) *echo.Echo {
	b.Helper()
	engine := &idempotency.Engine{Records: records, Lease: testLease, InflightWait: 50 * time.Millisecond, TTL: testTTL, Now: time.Now}
	e := echo.New()
	m := &idempotency.Middleware{Engine: engine, Log: slog.New(slog.DiscardHandler), Body: readBody,
		Scope: func(echo.Context) string { return domain.CustomerScope("c1") }}
	e.POST("/v1/orders/:id/pay", func(echo.Context) error {
		b.Fatal("a replay ran the handler")
		return nil
	}, m.Wrap(idempotency.KeyRequired))
	return e
}

// storedPay is the record of a paid pay call under benchKey.
func storedPay() domain.Record {
	call := idempotency.Call{Scope: domain.CustomerScope("c1"), Key: benchKey, Method: "POST", Path: benchPath, Body: []byte(benchBody)}
	now := time.Now()
	return domain.Record{Scope: call.Scope, Key: call.Key, Method: call.Method, Path: call.Path, Fingerprint: call.Fingerprint(),
		Status: domain.RecordSucceeded, OrderID: "o1", ResponseStatus: http.StatusOK,
		ResponseBody: []byte(`{"order":{"id":"o1","status":"paid","total":"9.99","currency":"USD"},"payment":{"status":"succeeded"}}`),
		LockedUntil:  now, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(testTTL)}
}

func replayOnce(b *testing.B, e *echo.Echo) {
	req := httptest.NewRequest(http.MethodPost, benchPath, strings.NewReader(benchBody))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set("Idempotency-Key", benchKey)
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusOK || w.Header().Get("Idempotent-Replayed") != "true" {
		b.Fatalf("replay = %d %s, want 200 replayed", w.Code, w.Body)
	}
}

// BenchmarkReplay is the middleware's replay path: read and canonicalize
// the body, fingerprint it, find the record, check it, send the stored
// bytes. "memory" keeps the record in memory (the middleware's own cost);
// the others read it from a database (one indexed read).
//
//	go test -run '^$' -bench BenchmarkReplay -benchmem ./idempotency
func BenchmarkReplay(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		e := replayServer(b, &memoryRecords{rec: storedPay()})
		b.ReportAllocs()
		for b.Loop() {
			replayOnce(b, e)
		}
	})
	for _, d := range dbtest.Dialects() {
		b.Run(string(d), func(b *testing.B) {
			records := repository.NewRecordStore(dbtest.Open(b, d))
			rec := storedPay()
			if err := records.Insert(context.Background(), rec); err != nil {
				b.Fatal(err)
			}
			if _, err := records.Complete(context.Background(), rec.Scope, rec.Key, domain.RecordSucceeded, rec.ResponseStatus, rec.ResponseBody, false, time.Now()); err != nil {
				b.Fatal(err)
			}
			e := replayServer(b, records)
			b.ReportAllocs()
			for b.Loop() {
				replayOnce(b, e)
			}
		})
	}
}
