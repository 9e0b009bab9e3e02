package cli

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/payd/payd/client"
)

// TestPrintTimelineBooks: `payd admin orders show` prints the order's money
// summary, its ledger entries (who booked them, the operator by name) and
// its disputes with their status; an order with no books says so.
func TestPrintTimelineBooks(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	closed := at.Add(time.Hour)
	due := at.Add(7 * 24 * time.Hour)
	alice := "alice"
	link := "https://dashboard.stripe.com/test/disputes/dp_1"
	tl := client.Timeline{
		Order: client.AdminOrder{Id: "ord-1", Status: "paid", Amount: "10.00", Currency: "USD", RefundedAmount: "3.00", CreatedAt: at,
			Money: client.Books{Charged: "10.00", Refunded: "3.00", Disputed: "0.00", Lost: "7.00", Net: "0.00"}},
		Ledger: []client.LedgerEntry{
			{Id: "l1", Kind: "charge", Amount: "10.00", Currency: "USD", Source: "pay_reply", ChargeId: "ch_1", CreatedAt: at},
			{Id: "l2", Kind: "refund", Amount: "3.00", Currency: "USD", Source: "operator", Actor: &alice, ChargeId: "ch_1", Note: "damaged", CreatedAt: at},
			{Id: "l3", Kind: "dispute_lost", Amount: "7.00", Currency: "USD", Source: "webhook", ChargeId: "ch_1", CreatedAt: closed},
		},
		Disputes: []client.Dispute{{Id: "dp_1", ChargeId: "ch_1", Status: "lost", Amount: "7.00", Currency: "USD", Reason: "fraudulent", OpenedAt: at, ClosedAt: &closed,
			EvidenceDueBy: &due, ProviderUrl: &link}},
		Timeline: []client.TimelineEntry{
			{At: at, Kind: "ledger", Id: "l1", Summary: "charge 10.00 USD (pay_reply)"},
			{At: at, Kind: "dispute", Id: "dp_1", Summary: "dispute of 7.00 USD: fraudulent"},
		},
	}
	var out bytes.Buffer
	printTimeline(&out, tl)
	wantLines(t, "orders show", out.String(),
		`^money\s+charged 10.00  refunded 3.00  disputed 0.00  lost 7.00  net 0.00 USD$`,
		`ledger\s+booked\s+charge 10.00 USD \(pay_reply\)\s+l1$`,
		`dispute\s+lost\s+dispute of 7.00 USD: fraudulent\s+dp_1$`,
		`^LEDGER\s+KIND\s+AMOUNT\s+SOURCE\s+AT\s+CHARGE\s+NOTE`,
		`^l1\s+charge\s+10.00 USD\s+pay_reply\s+2026-11-30 12:00:00\s+ch_1\s*$`,
		`^l2\s+refund\s+3.00 USD\s+operator \(alice\)\s+2026-11-30 12:00:00\s+ch_1\s+damaged$`,
		`^l3\s+dispute_lost\s+7.00 USD\s+webhook\s+2026-11-30 13:00:00\s+ch_1`,
		`^DISPUTE\s+STATUS\s+AMOUNT\s+REASON\s+CHARGE\s+OPENED\s+EVIDENCE DUE\s+CLOSED`,
		`^dp_1\s+lost\s+7.00 USD\s+fraudulent\s+ch_1\s+2026-11-30 12:00:00\s+2026-12-07 12:00:00\s+2026-11-30 13:00:00$`,
		`^answer dp_1 at https://dashboard.stripe.com/test/disputes/dp_1$`,
	)

	out.Reset()
	printTimeline(&out, client.Timeline{Order: client.AdminOrder{Id: "ord-2", Currency: "USD",
		Money: client.Books{Charged: "0.00", Refunded: "0.00", Disputed: "0.00", Lost: "0.00", Net: "0.00"}}})
	wantLines(t, "orders show, no books", out.String(), `^money\s+charged 0.00 .* net 0.00 USD$`, `^no ledger entry$`)
	if bytes.Contains(out.Bytes(), []byte("DISPUTE")) {
		t.Errorf("an order without disputes printed a dispute table:\n%s", out.String())
	}
}

// TestPrintDisputes: `payd admin disputes list` prints each dispute with
// its order, when its evidence is due (- when the provider named no date)
// and where to answer it; an empty page says so.
func TestPrintDisputes(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	due := at.Add(7 * 24 * time.Hour)
	link := "http://127.0.0.1:8081/v1/disputes/dp_2"
	var out bytes.Buffer
	printDisputes(&out, []client.ListedDispute{
		{Id: "dp_2", OrderId: "ord-2", ChargeId: "ch_2", Status: "open", Amount: "12.50", Currency: "USD", Reason: "fraudulent",
			OpenedAt: at, EvidenceDueBy: &due, ProviderUrl: &link},
		{Id: "dp_1", OrderId: "ord-1", ChargeId: "ch_1", Status: "open", Amount: "1500", Currency: "JPY", Reason: "general", OpenedAt: at},
	})
	wantLines(t, "disputes list", out.String(),
		`^DISPUTE\s+STATUS\s+AMOUNT\s+REASON\s+ORDER\s+OPENED\s+EVIDENCE DUE\s+CLOSED\s+AT THE PROVIDER$`,
		`^dp_2\s+open\s+12.50 USD\s+fraudulent\s+ord-2\s+2026-11-30 12:00:00\s+2026-12-07 12:00:00\s+-\s+http://127.0.0.1:8081/v1/disputes/dp_2$`,
		`^dp_1\s+open\s+1500 JPY\s+general\s+ord-1\s+2026-11-30 12:00:00\s+-\s+-\s+-$`,
	)
	out.Reset()
	printDisputes(&out, nil)
	wantLines(t, "disputes list, none", out.String(), `^no dispute$`)
}

// wantLines fails unless out has a line matching each of wants.
func wantLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("%s printed:\n%s\nwant a line matching %q", what, out, w)
		}
	}
}

// TestPrintStats: `payd admin stats` prints a row per bucket with a total
// row, the success rate, the money per currency, what is open and the
// oldest unknown attempt with its age; an overview without any of it
// says so.
func TestPrintStats(t *testing.T) {
	from := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rate := 0.75
	st := client.Stats{From: from, To: from.Add(2 * time.Hour), Bucket: "hour",
		Series: []client.StatsPoint{
			{Start: from, Paid: 3, Declined: 1, Refunds: 1},
			{Start: from.Add(time.Hour), Unknown: 2},
		},
		Totals:            client.StatsTotals{Paid: 3, Declined: 1, Unknown: 2, Refunds: 1, SuccessRate: &rate},
		Money:             []client.StatsMoney{{Currency: "EUR", Charged: "5.00", Refunded: "0.00"}, {Currency: "USD", Charged: "29.70", Refunded: "9.90"}},
		OpenDiscrepancies: 2, OpenDisputes: 1,
		OldestUnknown: &client.OldestUnknown{OrderId: "ord-1", AttemptId: "att-1", Since: from.Add(90 * time.Minute), AgeSeconds: 1830},
	}
	var out bytes.Buffer
	printStats(&out, st)
	wantLines(t, "stats", out.String(),
		`^window\s+2026-12-01 10:00:00 to 2026-12-01 12:00:00, by hour$`,
		`^BUCKET\s+PAID\s+DECLINED\s+UNKNOWN\s+REFUNDS$`,
		`^2026-12-01 10:00:00\s+3\s+1\s+0\s+1$`,
		`^2026-12-01 11:00:00\s+0\s+0\s+2\s+0$`,
		`^total\s+3\s+1\s+2\s+1$`,
		`^success rate\s+75.0% \(paid of paid and declined\)$`,
		`^money\s+EUR charged 5.00, refunded 0.00$`,
		`^money\s+USD charged 29.70, refunded 9.90$`,
		`^open discrepancies\s+2$`,
		`^open disputes\s+1$`,
		`^oldest unknown\s+attempt att-1 of order ord-1, since 2026-12-01 11:30:00 \(30m30s\)$`,
	)

	out.Reset()
	printStats(&out, client.Stats{From: from, To: from.Add(time.Hour), Bucket: "hour",
		Series: []client.StatsPoint{{Start: from}}, Money: []client.StatsMoney{}})
	wantLines(t, "stats, nothing", out.String(), `^2026-12-01 10:00:00\s+0\s+0\s+0\s+0$`, `^success rate\s+- \(nothing paid or declined\)$`,
		`^money\s+none booked$`, `^oldest unknown\s+none$`)
}
