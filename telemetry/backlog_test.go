package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestBacklogCached: the backlog is read once per TTL however often payd is
// scraped, read again after it, and a failed read exports only
// payd_backlog_scrape_success 0, no stale numbers.
func TestBacklogCached(t *testing.T) {
	var reads atomic.Int32
	fail := false
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := NewMetrics()
	c := &backlogCollector{ttl: 15 * time.Second, timeout: time.Second, now: func() time.Time { return clock },
		read: func(ctx context.Context) (Backlog, error) {
			reads.Add(1)
			if _, ok := ctx.Deadline(); !ok {
				t.Error("backlog read without a deadline")
			}
			if fail {
				return Backlog{}, errors.New("database gone")
			}
			return Backlog{OrdersProcessing: 3, DiscrepanciesOpen: 2, WebhookEventsPending: 1, DisputesOpen: 4,
				OldestUnknownAttempt: clock.Add(-90 * time.Second), NotifyPending: 5, NotifyHeld: 6,
				HoldsOpen: 2, OldestHold: clock.Add(-7190 * time.Second), NextHoldLapse: clock.Add(3610 * time.Second),
				OldestRetained: map[string]time.Time{"webhook_events": clock.Add(-time.Hour)}}, nil
		}}
	m.Register(c)
	e := m.Handler()

	for range 5 {
		scrape(t, e)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("5 scrapes within the TTL read the database %d times, want 1", n)
	}
	clock = clock.Add(10 * time.Second)
	out := scrape(t, e)
	for _, want := range []string{"payd_orders_processing 3", "payd_discrepancies_open 2", "payd_webhook_events_pending 1", "payd_disputes_open 4",
		"payd_oldest_unknown_attempt_age_seconds 100", "payd_notify_backlog 5", "payd_notify_held 6", "payd_backlog_scrape_success 1",
		"payd_holds_open 2", "payd_oldest_hold_age_seconds 7200", "payd_hold_next_lapse_seconds 3600",
		`payd_retention_oldest_age_seconds{table="webhook_events"} 3610`, `payd_retention_oldest_age_seconds{table="notify_events"} 0`,
		`payd_retention_oldest_age_seconds{table="notify_deliveries"} 0`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, grep(out, "payd_"))
		}
	}
	clock = clock.Add(5 * time.Second)
	fail = true
	out = scrape(t, e)
	if n := reads.Load(); n != 2 {
		t.Errorf("a scrape past the TTL: %d reads, want 2", n)
	}
	if !strings.Contains(out, "payd_backlog_scrape_success 0\n") || strings.Contains(out, "payd_orders_processing") {
		t.Errorf("after a failed read, scrape = %s, want payd_backlog_scrape_success 0 and no gauges", grep(out, "payd_"))
	}
}

// TestProviderCalledLabels: the provider histogram's labels stay in their
// fixed sets, and payd_build_info names the Go version.
func TestProviderCalledLabels(t *testing.T) {
	m := NewMetrics()
	e := m.Handler()
	m.ProviderCalled("charge", "ok", 30*time.Millisecond)
	m.ProviderCalled("charge; drop table", "<script>", time.Second)
	m.WebhookRejected("invalid_signature")
	m.WebhookRejected("anything else")
	out := scrape(t, e)
	for _, want := range []string{
		`payd_provider_request_duration_seconds_count{operation="charge",outcome="ok"} 1`,
		`payd_provider_request_duration_seconds_count{operation="other",outcome="error"} 1`,
		`payd_webhook_rejected_total{reason="invalid_signature"} 1`,
		`payd_webhook_rejected_total{reason="malformed"} 1`,
		`payd_build_info{goversion="go`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s\n%s", want, grep(out, "payd_"))
		}
	}
}

// TestOutcomeLog: an automatic refund, a discrepancy and a payment outcome
// each make one line with their identifiers; the level says whether
// someone must act.
func TestOutcomeLog(t *testing.T) {
	var buf bytes.Buffer
	l := OutcomeLog{Log: slog.New(slog.NewTextHandler(&buf, nil))}
	ctx := context.Background()
	l.PaymentResult(ctx, domain.Attempt{ID: "att-1", OrderID: "ord-1", Amount: decimal.RequireFromString("9.50"), Currency: "EUR"}, service.PaymentPaid)
	l.PaymentResult(ctx, domain.Attempt{ID: "att-2", OrderID: "ord-2"}, service.PaymentUnknown)
	l.DiscrepancyRecorded(ctx, domain.Discrepancy{ID: "dis-1", Type: domain.DuplicateCharge, OrderID: "ord-1", ChargeID: "ch_9", Status: domain.DiscrepancyResolved})
	l.DiscrepancyRecorded(ctx, domain.Discrepancy{ID: "dis-2", RunID: "run-1", Type: domain.MissingProviderCharge, OrderID: "ord-2", Status: domain.DiscrepancyOpen})
	l.RefundedAutomatically(ctx, domain.Refund{ID: "ref-1", OrderID: "ord-1", ChargeID: "ch_9", Amount: decimal.RequireFromString("9.50"),
		Currency: "EUR", Status: domain.RefundSucceeded, Reason: string(domain.DuplicateCharge)})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, want := range []string{
		`level=INFO msg="payment outcome" result=paid order_id=ord-1 attempt_id=att-1 amount=9.50 currency=EUR`,
		`level=WARN msg="payment outcome" result=unknown order_id=ord-2 attempt_id=att-2`,
		`level=WARN msg="discrepancy recorded" discrepancy_id=dis-1 type=duplicate_charge status=resolved order_id=ord-1 attempt_id="" charge_id=ch_9`,
		`level=WARN msg="discrepancy recorded" discrepancy_id=dis-2 type=missing_provider_charge status=open order_id=ord-2 attempt_id="" charge_id="" run_id=run-1`,
		`level=WARN msg="automatic refund" refund_id=ref-1 order_id=ord-1 charge_id=ch_9 amount=9.50 currency=EUR status=succeeded reason=duplicate_charge`,
	} {
		if i >= len(lines) || !strings.Contains(lines[i], want) {
			t.Errorf("log line %d = %q, want it to contain %q", i, lines, want)
		}
	}
}

// scrape returns GET /metrics of h.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", rec.Code)
	}
	return rec.Body.String()
}

// grep returns the lines of s that contain substr, comments left out.
func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDiscrepanciesCountFromZero: each discrepancy type is exported at 0
// from the start, so the first dispute after a start is an increase of
// payd_discrepancies_total{type="disputed"} (PaydDisputeOpened), not a new
// series increase() cannot see.
func TestDiscrepanciesCountFromZero(t *testing.T) {
	m := NewMetrics()
	e := m.Handler()
	out := scrape(t, e)
	for _, typ := range domain.DiscrepancyTypes {
		if want := `payd_discrepancies_total{type="` + string(typ) + `"} 0`; !strings.Contains(out, want+"\n") {
			t.Errorf("a fresh scrape lacks %q:\n%s", want, grep(out, "payd_discrepancies_total"))
		}
	}
	m.DiscrepancyRecorded(t.Context(), domain.Discrepancy{Type: domain.Disputed})
	if out := scrape(t, e); !strings.Contains(out, `payd_discrepancies_total{type="disputed"} 1`+"\n") {
		t.Errorf("after a dispute:\n%s", grep(out, "payd_discrepancies_total"))
	}
}
