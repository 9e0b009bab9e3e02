package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
)

// BenchmarkWebhook measures applying a provider event in-process: a new
// payment.succeeded that pays an order left processing by pm_async (store
// the event, settle the attempt, mark the order paid, complete the pay
// request's record), and a duplicate delivery of an event already applied.
// It reports the SQL statements each costs.
//
//	go test -run '^$' -bench BenchmarkWebhook -benchtime 2s ./cmd/payd
func BenchmarkWebhook(b *testing.B) {
	for _, d := range dbtest.Dialects() {
		b.Run(fmt.Sprintf("new/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			events := make([][]byte, b.N)
			for i := range events {
				events[i] = a.processingEvent(b)
			}
			a.stmts.Reset()
			b.ResetTimer()
			for i := range b.N {
				a.webhook(b, events[i], "applied")
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
		})
		b.Run(fmt.Sprintf("duplicate/%s", d), func(b *testing.B) {
			a := newBenchApp(b, d)
			ev := a.processingEvent(b)
			a.webhook(b, ev, "applied")
			a.stmts.Reset()
			b.ResetTimer()
			for range b.N {
				a.webhook(b, ev, "duplicate")
			}
			b.ReportMetric(float64(a.stmts.Load())/float64(b.N), "gorm-stmts/op")
		})
	}
}

// processingEvent creates an order, pays it with pm_async (202: the
// sandbox here delivers no webhooks, so it stays processing) and returns
// the signed-to-be body of the payment.succeeded that would settle it.
func (a *benchApp) processingEvent(b testing.TB) []byte {
	b.Helper()
	id := a.newOrder(b)
	a.call(b, "POST", "/v1/orders/"+id+"/pay", a.token, uuid.NewString(), `{"payment_method":"pm_async"}`)
	var o struct {
		Attempts []struct{ ID string } `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(a.call(b, "GET", "/v1/orders/"+id, a.token, "", "")), &o); err != nil || len(o.Attempts) != 1 {
		b.Fatalf("GET order %s: %v, %d attempts", id, err, len(o.Attempts))
	}
	return eventBody(b, "evt_"+uuid.NewString(), "payment.succeeded", payment{
		AttemptID: o.Attempts[0].ID, ChargeID: "ch_bench_" + o.Attempts[0].ID[:8], OrderID: id, Amount: "9.99", Currency: "USD",
	})
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
