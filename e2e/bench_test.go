package e2e

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/app"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

// benchApp is payd wired as run wires it, served in-process, with a
// statement counter on its database and a sandbox provider over loopback.
// The counter counts the statements GORM sends, which PayBatch's packets
// pass below; newBudgetApp's counts round trips on the wire instead.
type benchApp struct {
	h     http.Handler
	stmts *dbtest.Counter
	token string
	sb    *sandbox.Server  // the provider, to settle pm_async charges when a benchmark says so
	prov  *provider.Client // the provider's API, as payd asks it
	calls atomic.Int64     // requests the provider served
}

func newBenchApp(b testing.TB, d migrations.Dialect) *benchApp {
	b.Helper()
	db := dbtest.Open(b, d)
	return newAppOn(b, db, dbtest.CountStatements(db))
}

// newBudgetApp is a benchApp whose counter, on MySQL, counts round trips
// on the wire (dbtest.CountRoundTrips: BEGIN and COMMIT included, a
// multi-statement packet once), through a proxy that would distort timings;
// on SQLite, which has no wire, the statements GORM sends.
func newBudgetApp(b testing.TB, d migrations.Dialect) *benchApp {
	b.Helper()
	if d != migrations.MySQL {
		return newBenchApp(b, d)
	}
	url, trips := dbtest.CountRoundTrips(b, dbtest.NewURL(b, d))
	return newAppOn(b, dbtest.OpenURL(b, url), trips)
}

func newAppOn(b testing.TB, db *repository.DB, counter *dbtest.Counter) *benchApp {
	b.Helper()
	// pm_async charges are due at once, and settle only when a benchmark
	// calls settlePending: nothing runs the sandbox's worker here.
	sb, err := sandbox.New(sandbox.Config{DatabaseURL: "sqlite://" + filepath.Join(b.TempDir(), "sb.db"), Logger: slog.New(slog.DiscardHandler),
		AsyncDelay: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	ba := &benchApp{stmts: counter, sb: sb}
	sbh := sb.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ba.calls.Add(1)
		sbh.ServeHTTP(w, r)
	}))
	b.Cleanup(func() { srv.Close(); sb.Close() })
	cfg := app.Config{
		AdminToken: testAdminToken, WebhookSecret: testWebhookSecret, SecretKey: testSecretKey, MaxAmount: "1000000",
		IdempotencyTTL: 24 * time.Hour, InflightWait: 2 * time.Second, Lease: 30 * time.Second, OrderTTL: 30 * time.Minute,
	}
	cfg.MerchantKey = testMerchantKey
	ba.prov = provider.NewClient(srv.URL)
	a, err := app.Wire(cfg, db, ba.prov, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ba.h = a.Echo
	rec := ba.call(b, "POST", "/v1/customers", "", uuid.NewString(), `{"email":"bench@example.com","name":"Bench"}`)
	ba.token = strings.Split(strings.Split(rec, `"token":"`)[1], `"`)[0]
	ba.call(b, "POST", "/v1/products", testMerchantKey, uuid.NewString(), `{"sku":"s","name":"n","unit_price":"9.99","currency":"USD"}`)
	return ba
}

func (a *benchApp) call(b testing.TB, method, path, token, key, body string) string {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code >= 300 {
		b.Fatalf("%s %s = %d %s", method, path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func (a *benchApp) newOrder(b testing.TB) string {
	body := a.call(b, "POST", "/v1/orders", a.token, "", `{"items":[{"sku":"s","quantity":1}]}`)
	return strings.Split(strings.Split(body, `"id":"`)[1], `"`)[0]
}

// BenchmarkPay measures a new pay (claim, charge over loopback, settle) and a
// replay of it, with the SQL statements each sends through GORM
// (authentication included; the token cache answers it after the first
// request). On MySQL a new pay's claim and settlement go below GORM
// (PayBatch): TestStatementBudget counts those on the wire.
//
//	go test -run '^$' -bench BenchmarkPay -benchtime 2s ./e2e
func BenchmarkPay(b *testing.B) {
	for _, d := range dbtest.Dialects() {
		b.Run(fmt.Sprintf("new/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			orders := make([]string, b.N)
			for i := range orders {
				orders[i] = a.newOrder(b)
			}
			a.stmts.Reset()
			b.ResetTimer()
			for i := range b.N {
				a.call(b, "POST", "/v1/orders/"+orders[i]+"/pay", a.token, uuid.NewString(), `{"payment_method":"pm_ok"}`)
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
		})
		b.Run(fmt.Sprintf("replay/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			id, key := a.newOrder(b), uuid.NewString()
			a.call(b, "POST", "/v1/orders/"+id+"/pay", a.token, key, `{"payment_method":"pm_ok"}`)
			a.stmts.Reset()
			b.ResetTimer()
			for range b.N {
				a.call(b, "POST", "/v1/orders/"+id+"/pay", a.token, key, `{"payment_method":"pm_ok"}`)
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
		})
	}
}

// TestStatementBudget pins the SQL cost of the hot paths so a change that
// adds a query is noticed. On MySQL, in round trips on the wire: a new pay
// in at most 4 (the idempotency record's insert, the claim transaction,
// the settlement transaction with the charge's ledger entry and the
// order's outbox event, the record's completion; each transaction is one
// packet, ADR 0034), a replay in 1. On SQLite, in statements: at most 8
// (the ledger entry's INSERT is the seventh, the outbox event's, ADR 0053,
// the eighth) and 1. The key is new to this process, so its record is inserted
// without being read first, and the replay's key is known, so its record
// is read without an insert first (ADR 0034; a key's first sight on a
// replica that did not take it costs one more statement). The order was
// created by this process just before, so the pay claims it as created,
// without reading it (ADR 0034; an order created elsewhere costs the read,
// one more). The token was verified by that creation, so authentication is
// answered from the token cache (service.TokenCache) and costs none.
func TestStatementBudget(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		a := newBudgetApp(t, d)
		id := a.newOrder(t)
		key := uuid.NewString()
		a.stmts.Reset()
		a.call(t, "POST", "/v1/orders/"+id+"/pay", a.token, key, `{"payment_method":"pm_ok"}`)
		budget := int64(8)
		if d == migrations.MySQL {
			budget = 4
		}
		if n := a.stmts.Load(); n > budget {
			t.Errorf("new pay = %d round trips (MySQL) or statements (SQLite), want at most %d", n, budget)
		}
		a.stmts.Reset()
		a.call(t, "POST", "/v1/orders/"+id+"/pay", a.token, key, `{"payment_method":"pm_ok"}`)
		if n := a.stmts.Load(); n != 1 {
			t.Errorf("replay = %d round trips (MySQL) or statements (SQLite), want 1", n)
		}
	})
}
