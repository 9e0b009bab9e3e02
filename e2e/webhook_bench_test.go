package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
)

// BenchmarkWebhook measures applying a provider event in-process: a new
// payment.succeeded that pays an order left processing by pm_async (store
// the event, settle the attempt, mark the order paid, complete the pay
// request's record), and a duplicate delivery of an event already applied.
// It reports the SQL statements and the provider calls each costs (a new
// success asks the provider to confirm it, ADR 0031).
//
//	go test -run '^$' -bench BenchmarkWebhook -benchtime 2s ./e2e
func BenchmarkWebhook(b *testing.B) {
	for _, d := range dbtest.Dialects() {
		b.Run(fmt.Sprintf("new/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			events := a.processingEvents(b, b.N)
			a.stmts.Reset()
			a.calls.Store(0)
			b.ResetTimer()
			for i := range b.N {
				a.webhook(b, events[i], "applied")
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
			b.ReportMetric(float64(a.calls.Load())/float64(b.N), "provider-calls/op")
		})
		b.Run(fmt.Sprintf("duplicate/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			ev := a.processingEvents(b, 1)[0]
			a.webhook(b, ev, "applied")
			a.stmts.Reset()
			a.calls.Store(0)
			b.ResetTimer()
			for range b.N {
				a.webhook(b, ev, "duplicate")
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
			b.ReportMetric(float64(a.calls.Load())/float64(b.N), "provider-calls/op")
		})
	}
}

// processingEvents creates n orders, pays each with pm_async (202: the
// sandbox here delivers no webhooks, so each stays processing), lets the
// sandbox settle the charges, and returns the signed-to-be bodies of the
// payment.succeeded events that would settle the orders: each names its
// real charge, so the provider confirms it when payd asks (ADR 0031).
func (a *benchApp) processingEvents(b testing.TB, n int) [][]byte {
	b.Helper()
	ids, attempts := make([]string, n), make([]string, n)
	for i := range n {
		ids[i] = a.newOrder(b)
		a.call(b, "POST", "/v1/orders/"+ids[i]+"/pay", a.token, uuid.NewString(), `{"payment_method":"pm_async"}`)
		var o struct {
			Attempts []struct{ ID string } `json:"attempts"`
		}
		if err := json.Unmarshal([]byte(a.call(b, "GET", "/v1/orders/"+ids[i], a.token, "", "")), &o); err != nil || len(o.Attempts) != 1 {
			b.Fatalf("GET order %s: %v, %d attempts", ids[i], err, len(o.Attempts))
		}
		attempts[i] = o.Attempts[0].ID
	}
	for settled := 0; settled < n; {
		got, err := a.sb.ResolvePending(context.Background())
		if err != nil || got == 0 {
			b.Fatalf("sandbox ResolvePending = %d, %v after %d of %d", got, err, settled, n)
		}
		settled += got
	}
	events := make([][]byte, n)
	for i := range n {
		ch, err := a.prov.GetCharge(context.Background(), domain.Attempt{ID: attempts[i]})
		if err != nil {
			b.Fatalf("GetCharge(%s) = %v", attempts[i], err)
		}
		events[i] = eventBody(b, "evt_"+uuid.NewString(), "payment.succeeded", payment{
			AttemptID: attempts[i], ChargeID: ch.ID, OrderID: ids[i], Amount: "9.99", Currency: "USD",
		})
	}
	return events
}

// webhook delivers body, signed now, and fails unless payd answers 200
// with the wanted outcome.
func (a *benchApp) webhook(b testing.TB, body []byte, outcome string) {
	var ev struct{ ID string }
	if err := json.Unmarshal(body, &ev); err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/webhooks/provider", bytes.NewReader(body))
	req.Header = signedWebhook(b, ev.ID, time.Now(), body)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"outcome":"`+outcome+`"`) {
		b.Fatalf("webhook = %d %s, want 200 %s", rec.Code, rec.Body, outcome)
	}
}
