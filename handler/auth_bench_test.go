package handler

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// oneCustomer is a service.CustomerStore that knows one customer by token
// hash, in memory: the benchmark measures payd's work, not a database's.
type oneCustomer struct {
	service.CustomerStore // only FindByTokenHash is used
	c                     domain.Customer
}

func (s oneCustomer) FindByTokenHash(_ context.Context, hash string) (domain.Customer, error) {
	if hash != s.c.TokenHash {
		return domain.Customer{}, domain.ErrCustomerNotFound
	}
	return s.c, nil
}

// BenchmarkAuthenticatedRequest is one customer request through payd's
// outer middleware (request ID, metrics, access log at info, panic
// recovery) and RequireCustomer, its token answered from the token cache
// or looked up each time, to a handler that answers 204.
//
//	go test -run '^$' -bench BenchmarkAuthenticatedRequest -benchmem ./handler
func BenchmarkAuthenticatedRequest(b *testing.B) {
	tokens, err := service.NewTokens("a secret key for benchmarks only")
	if err != nil {
		b.Fatal(err)
	}
	token := tokens.CustomerToken("c1")
	store := oneCustomer{c: domain.Customer{ID: "c1", Email: "c1@example.com", TokenHash: service.HashToken(token)}}
	for _, tt := range []struct {
		name  string
		cache *service.TokenCache
	}{
		{"cached", service.NewTokenCache(service.TokenCacheTTL, service.TokenCacheSize, nil)},
		{"uncached", nil},
	} {
		b.Run(tt.name, func(b *testing.B) {
			customers := &service.Customers{Store: store, Tokens: tokens, Now: time.Now, Cache: tt.cache}
			e := echo.New()
			log := slog.New(telemetry.TraceLogs(slog.NewJSONHandler(discard{}, nil)))
			e.Use(requestID(), telemetry.NewMetrics().Middleware(e), accessLog(log), recoverPanic)
			e.GET("/v1/orders", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) },
				RequireCustomer(customers, "adm_"+token))
			req := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			req.Header.Set(echo.HeaderAuthorization, "Bearer "+token)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				e.ServeHTTP(w, req)
				if w.Code != http.StatusNoContent {
					b.Fatalf("GET /v1/orders = %d, want 204", w.Code)
				}
			}
		})
	}
}

// discard is an io.Writer that drops what the access log writes.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
