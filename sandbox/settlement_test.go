package sandbox_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

func TestSettlementCSV(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb, clk := clockedSandbox(t, dbURL)
		ctx := context.Background()
		day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

		clk.Set(day.Add(-time.Microsecond)) // the day before, by a hair
		if _, err := sb.Client.Charge(ctx, chargeReq("before", "pm_ok")); err != nil {
			t.Fatal(err)
		}
		clk.Set(day)
		a, err := sb.Client.Charge(ctx, chargeReq("a", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(day.Add(time.Hour))
		for _, k := range []string{"declined", "pending"} {
			m := map[string]string{"declined": "pm_declined", "pending": "pm_async"}[k]
			if _, err := sb.Client.Charge(ctx, chargeReq(k, m)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Set(day.Add(2 * time.Hour))
		b, _ := sb.Client.Charge(ctx, chargeReq("b", "pm_timeout")) // recorded despite the lost reply
		_ = b
		clk.Set(day.Add(3 * time.Hour))
		ra, err := sb.Client.Refund(ctx, refundReq("ra", a.ID, "2.50"))
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(day.Add(24 * time.Hour)) // the next day
		if _, err := sb.Client.Charge(ctx, chargeReq("next", "pm_ok")); err != nil {
			t.Fatal(err)
		}
		bc, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "b"})
		if err != nil {
			t.Fatal(err)
		}

		status, body := get(t, sb.URL+"/v1/settlements/2024-05-01.csv")
		if status != http.StatusOK {
			t.Fatalf("GET settlement = %d %s", status, body)
		}
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{
			{"charge_id", "idempotency_key", "order_id", "type", "status", "amount", "currency", "created_at", "refund_id"},
			{a.ID, "a", "ord-a", "charge", "succeeded", "12.30", "USD", "2024-05-01T00:00:00Z", ""},
			{bc.ID, "b", "ord-b", "charge", "succeeded", "12.30", "USD", "2024-05-01T02:00:00Z", ""},
			{a.ID, "ra", "ord-a", "refund", "succeeded", "2.50", "USD", "2024-05-01T03:00:00Z", ra.ID},
		}
		if len(rows) != len(want) {
			t.Fatalf("settlement has %d lines, want %d:\n%s", len(rows), len(want), body)
		}
		for i := range want {
			if strings.Join(rows[i], ",") != strings.Join(want[i], ",") {
				t.Errorf("settlement line %d = %v, want %v", i, rows[i], want[i])
			}
		}

		if status, body := get(t, sb.URL+"/v1/settlements/2024-05-02.csv"); status != 200 || strings.Count(body, "\n") != 2 || !strings.Contains(body, ",next,") {
			t.Errorf("next day = %d %q, want header + the one charge", status, body)
		}
		for _, bad := range []string{"2024-13-01.csv", "2024-05-01", "yesterday.csv"} {
			if status, _ := get(t, sb.URL+"/v1/settlements/"+bad); status != http.StatusNotFound {
				t.Errorf("GET /v1/settlements/%s = %d, want 404", bad, status)
			}
		}
	})
}
