package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
)

// TestAdminStatsCountsRealPayments pays through the sandbox — two paid,
// one declined, one paid and then disputed by the bank, one whose reply
// is lost and whose webhook is held, so its outcome stays unknown — and
// refunds part of one; GET /v1/admin/stats, read through the generated
// client, counts each by its outcome in the hour it happened, adds up
// the money, and names the open dispute, its discrepancy and the unknown
// attempt.
func TestAdminStatsCountsRealPayments(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		// A long lease keeps the recoverer off the unknown attempt while
		// the test reads it.
		s := start(t, on(dialect), gatedWebhooks(), withEnv(env{"PAYD_LEASE": "10m", "PAYD_IDEMPOTENCY_TTL": "24h"}))
		c, err := client.NewClientWithResponses(s.base, client.WithHTTPClient(&http.Client{Transport: contractTransport{t}}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		before := time.Now().UTC()
		_, tok := s.register(newEmail())

		s.gate.open.Store(true)
		paid := s.paidOrder(tok, "10.00")
		s.paidOrder(tok, "5.50")
		declined := s.order(tok, "7.00")
		if r := s.pay(tok, declined, uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay pm_declined = %d %s, want 402", r.Status, r.Body)
		}
		disputed := s.order(tok, "3.25")
		if r := s.pay(tok, disputed, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
			t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
		}
		eventually(t, 10*time.Second, "the dispute on the order", func() bool { return len(s.timeline(disputed).Disputes) == 1 })
		if r := s.refund(paid, uuid.NewString(), "2.00"); r.Status != http.StatusOK {
			t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
		}

		s.gate.open.Store(false)
		lost := s.order(tok, "4.00")
		if r := s.pay(tok, lost, uuid.NewString(), "pm_timeout"); r.Status != http.StatusBadGateway && r.Status != http.StatusAccepted {
			t.Fatalf("pay pm_timeout = %d %s, want the outcome unknown", r.Status, r.Body)
		}
		unknown := s.timeline(lost).Attempts
		if len(unknown) != 1 || unknown[0].Status != "unknown" {
			t.Fatalf("attempts of the lost payment = %+v, want one unknown", unknown)
		}
		after := time.Now().UTC()

		r, err := c.AdminStatsWithResponse(ctx, &client.AdminStatsParams{}, bearer(testAdminToken))
		if err != nil || r.JSON200 == nil {
			t.Fatalf("AdminStats = %v, %s; want 200", err, answer(r))
		}
		st := *r.JSON200
		if st.Bucket != "hour" || !st.To.After(after.Add(-time.Second)) || st.To.Sub(st.From) != 24*time.Hour {
			t.Errorf("window %s..%s by %s, want the last 24 hours by hour", st.From, st.To, st.Bucket)
		}
		if n := len(st.Series); n < 24 || n > 25 {
			t.Fatalf("%d buckets, want an hour each over 24 hours", n)
		}
		var sum client.StatsTotals
		for i, p := range st.Series {
			if p.Start.Minute() != 0 || p.Start.Second() != 0 || p.Start.Nanosecond() != 0 ||
				(i > 0 && p.Start.Sub(st.Series[i-1].Start) != time.Hour) {
				t.Fatalf("bucket %d starts at %s: want consecutive whole UTC hours", i, p.Start)
			}
			if p.Paid+p.Declined+p.Unknown+p.Refunds > 0 && (p.Start.Before(before.Truncate(time.Hour)) || p.Start.After(after)) {
				t.Errorf("bucket %s counts something, but nothing happened then", p.Start)
			}
			sum.Paid, sum.Declined, sum.Unknown, sum.Refunds = sum.Paid+p.Paid, sum.Declined+p.Declined, sum.Unknown+p.Unknown, sum.Refunds+p.Refunds
		}
		tot := st.Totals
		if tot.Paid != 3 || tot.Declined != 1 || tot.Unknown != 1 || tot.Refunds != 1 ||
			tot.SuccessRate == nil || *tot.SuccessRate != 0.75 {
			t.Errorf("totals = %+v (success rate %v), want 3 paid, 1 declined, 1 unknown, 1 refund, 0.75", tot, tot.SuccessRate)
		}
		if sum.Paid != tot.Paid || sum.Declined != tot.Declined || sum.Unknown != tot.Unknown || sum.Refunds != tot.Refunds {
			t.Errorf("the series add up to %+v, the totals say %+v", sum, tot)
		}
		if len(st.Money) != 1 || st.Money[0].Currency != "USD" || st.Money[0].Charged != "18.75" || st.Money[0].Refunded != "2.00" {
			t.Errorf("money = %+v, want USD charged 18.75, refunded 2.00", st.Money)
		}
		if st.OpenDisputes != 1 || st.OpenDiscrepancies != 1 {
			t.Errorf("open disputes %d, discrepancies %d; want the dispute and its discrepancy", st.OpenDisputes, st.OpenDiscrepancies)
		}
		o := st.OldestUnknown
		if o == nil || o.OrderId != lost || o.AttemptId != unknown[0].Id || o.AgeSeconds < 0 || o.AgeSeconds > int(time.Since(before).Seconds())+1 {
			t.Errorf("oldest unknown = %+v, want attempt %s of order %s", o, unknown[0].Id, lost)
		}

		// payd admin stats prints the same overview as a table, and
		// payd's answer with -json.
		out := s.mustCLI("stats")
		wantLines(t, "admin stats", out, `^BUCKET\s+PAID\s+DECLINED\s+UNKNOWN\s+REFUNDS$`, `^total\s+3\s+1\s+1\s+1$`,
			`^success rate\s+75.0%`, `^money\s+USD charged 18.75, refunded 2.00$`, `^open discrepancies\s+1$`, `^open disputes\s+1$`,
			`^oldest unknown\s+attempt `+unknown[0].Id+` of order `+lost+`, since `)
		var viaCLI client.Stats
		if err := json.Unmarshal([]byte(s.mustCLI("stats", "-from", "48h", "-bucket", "day", "-json")), &viaCLI); err != nil ||
			viaCLI.Bucket != "day" || viaCLI.Totals.Paid != 3 || len(viaCLI.Series) < 2 || len(viaCLI.Series) > 3 {
			t.Errorf("admin stats -from 48h -bucket day -json = %+v, %v; want 3 paid in 2 or 3 days", viaCLI, err)
		}
		if _, err := s.adminCLI(testAdminToken, "stats", "-bucket", "week"); err == nil || !strings.Contains(err.Error(), `-bucket "week": want hour or day`) {
			t.Errorf("admin stats -bucket week = %v, want it refused before anything is sent", err)
		}
		if _, err := s.adminCLI(testAdminToken, "stats", "-from", "1h", "-to", "2h"); err == nil || !strings.Contains(err.Error(), "payd answered 400 validation_failed") ||
			!strings.Contains(err.Error(), "from: must be before to") {
			t.Errorf("admin stats -from 1h -to 2h = %v, want payd's 400 naming from", err)
		}

		// A window before any of it: every bucket zero, no money, and what
		// is open now all the same.
		from, to := before.Add(-72*time.Hour), before.Add(-48*time.Hour)
		day := client.AdminStatsParamsBucket("day")
		r, err = c.AdminStatsWithResponse(ctx, &client.AdminStatsParams{From: &from, To: &to, Bucket: &day}, bearer(testAdminToken))
		if err != nil || r.JSON200 == nil {
			t.Fatalf("AdminStats(earlier) = %v, %s; want 200", err, answer(r))
		}
		st = *r.JSON200
		if st.Bucket != "day" || len(st.Series) < 1 || len(st.Series) > 2 || st.Totals.SuccessRate != nil || len(st.Money) != 0 ||
			st.OpenDisputes != 1 || st.OldestUnknown == nil || st.OldestUnknown.OrderId != lost {
			t.Errorf("earlier window = %s", r.Body)
		}
		for _, p := range st.Series {
			if p.Paid+p.Declined+p.Unknown+p.Refunds != 0 || p.Start.Hour() != 0 {
				t.Errorf("earlier bucket %+v, want zeros from midnight", p)
			}
		}
	})
}

// TestAdminStatsRefusals: a window that ends before it starts, a bucket
// payd does not know, more than 1000 buckets and a time that is not RFC
// 3339 are 400 validation_failed naming the parameter; without a token
// the overview is 401.
func TestAdminStatsRefusals(t *testing.T) {
	s := start(t, on("sqlite"))
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	s.wantInvalid("/v1/admin/stats", map[string]string{
		q("from", "2026-12-02T10:00:00Z", "to", "2026-12-02T10:00:00Z"): "from",
		q("from", "2026-12-02T11:00:00Z", "to", "2026-12-02T10:00:00Z"): "from",
		q("bucket", "week"): "bucket",
		q("from", "2026-01-01T00:00:00Z", "to", "2026-03-01T00:00:00Z", "bucket", "hour"): "bucket",
		q("from", "2020-01-01T00:00:00Z", "to", "2026-01-01T00:00:00Z"):                   "bucket",
		q("from", "yesterday"):         "from",
		q("to", "2026-12-02 10:00:00"): "to",
	})
	if r := s.admin("GET", "/v1/admin/stats?"+q("from", "2026-01-01T00:00:00Z", "to", "2026-02-11T16:00:00Z", "bucket", "hour"), "", nil); r.Status != http.StatusOK {
		t.Errorf("1000 hour buckets = %d %s, want 200", r.Status, r.Body)
	}
	if r := s.do(request{method: "GET", path: "/v1/admin/stats"}); r.Status != http.StatusUnauthorized || r.code(t) != "unauthorized" {
		t.Errorf("GET /v1/admin/stats without a token = %d %s, want 401 unauthorized", r.Status, r.Body)
	}
}
