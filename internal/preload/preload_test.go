package preload

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// preloadWant counts, order by order in Go, the rows the preload's
// statements must write for n orders: the same mix and windows as
// preload.go's comment, worked out independently of its SQL.
func preloadWant(n int) map[string]int64 {
	span := int64(Span / time.Second)
	w := map[string]int64{"customers": int64(max(1, n/10)), "orders": int64(n), "order_items": int64(n), "notify_endpoints": 1}
	for i := range int64(n) {
		m := i % 100
		age := (int64(n) - i) * span / int64(n)
		charged, refunded := m < 88, m >= 80 && m < 88
		month, twoDays := age < 30*24*3600, age < 2*24*3600
		if charged {
			w["payment_attempts"]++
			w["ledger_entries"]++
		}
		if i%10 == 3 {
			w["payment_attempts"]++
		}
		if refunded {
			w["ledger_entries"]++
			w["refunds"]++
			w["audit_log"]++
		}
		if charged && month {
			w["webhook_events"]++
			w["notify_events"]++
			w["notify_deliveries"]++
			w["notify_attempts"]++
		}
		if refunded && month {
			w["notify_events"]++
		}
		if twoDays {
			w["idempotency_records"]++
			if charged {
				w["idempotency_records"]++
			}
		}
	}
	return w
}

// TestPreload: a preload of 2,000 orders writes, on SQLite and on
// MariaDB, exactly the rows its mix says, table by table; payd's own
// store reads them back (a paid order with its line and charge, a
// refunded one with its two entries, the overview's counts over the 90
// days); and a second preload of the same database finds its marker and
// writes nothing, while one of another size is refused.
func TestPreload(t *testing.T) {
	const n = 2000
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		ctx := context.Background()
		pool := db.Pools()["payd"]
		if pool == nil {
			pool = db.Pools()["write"]
		}
		now := time.Now().UTC().Truncate(time.Second)
		st, err := Load(ctx, pool, d == migrations.MySQL, n, now, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for table, want := range preloadWant(n) {
			var got int64
			if err := pool.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: %d rows, want %d", table, got, want)
			}
			if table != "notify_endpoints" {
				rows += got
			}
		}
		if st.Rows != rows || st.Reused {
			t.Errorf("preload reported %d rows (reused %v), want the %d it wrote", st.Rows, st.Reused, rows)
		}

		orders := repository.NewOrderStore(db)
		ledger := repository.NewLedgerStore(db)
		id := func(i int) string { return "00000000-0000-7000-8000-" + hex12(i) }
		paid, err := orders.FindByID(ctx, id(1))
		if err != nil {
			t.Fatal(err)
		}
		wantAmount := decimal.New(int64(500+(1*7919)%20000), -2)
		if paid.Status != domain.StatusPaid || !paid.Amount.Equal(wantAmount) || len(paid.Items) != 1 || paid.PaidAt == nil ||
			!paid.CreatedAt.Before(now.Add(-89*24*time.Hour)) || paid.CustomerID != "00000000-0000-7000-8001-"+hex12(1) {
			t.Errorf("order 1 = %+v, want paid %s with one line, created about 90 days ago, by customer 1", paid, wantAmount)
		}
		entries, err := ledger.ListByOrder(ctx, id(1))
		if err != nil || len(entries) != 1 || entries[0].Kind != domain.LedgerCharge {
			t.Errorf("order 1's ledger = %+v, %v, want its charge", entries, err)
		}
		refunded, err := orders.FindByID(ctx, id(1985))
		if err != nil {
			t.Fatal(err)
		}
		if refunded.Status != domain.StatusRefunded || !refunded.RefundedAmount.Equal(refunded.Amount) {
			t.Errorf("order 1985 = %+v, want refunded whole", refunded)
		}
		if entries, err := ledger.ListByOrder(ctx, id(1985)); err != nil || len(entries) != 2 {
			t.Errorf("order 1985's ledger = %+v, %v, want its charge and its refund", entries, err)
		}
		stats, err := repository.NewStatsStore(db).Stats(ctx, domain.StatsWindow{From: now.Add(-Span - 2*time.Hour), To: now.Add(time.Hour), Bucket: domain.BucketDay})
		if err != nil {
			t.Fatal(err)
		}
		want := preloadWant(n)
		if stats.Totals.Paid != int64(n*88/100) || stats.Totals.Declined != int64(n/10) || stats.Totals.Refunds != want["refunds"] {
			t.Errorf("the overview's totals = %+v, want %d paid, %d declined, %d refunds", stats.Totals, n*88/100, n/10, want["refunds"])
		}

		again, err := Load(ctx, pool, d == migrations.MySQL, n, now, io.Discard)
		if err != nil || !again.Reused || again.Rows != 0 {
			t.Errorf("a second preload of %d = %+v, %v, want it reused, nothing written", n, again, err)
		}
		if _, err := Load(ctx, pool, d == migrations.MySQL, n+1, now, io.Discard); err == nil {
			t.Errorf("a preload of %d on a database holding %d was not refused", n+1, n)
		}
		if _, err := pool.ExecContext(ctx, "DELETE FROM "+Marker); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(ctx, pool, d == migrations.MySQL, n, now, io.Discard); err == nil || !strings.Contains(err.Error(), "no finished preload") {
			t.Errorf("a preload over one stopped halfway = %v, want it refused", err)
		}
		if size, err := Bytes(ctx, pool, d == migrations.MySQL); err != nil || size <= 0 {
			t.Errorf("Bytes = %d, %v, want the database's size", size, err)
		}
	})
}

// hex12 is i as the preload writes it into its IDs.
func hex12(i int) string {
	const digits = "0123456789abcdef"
	b := []byte("000000000000")
	for p := len(b) - 1; i > 0; p-- {
		b[p] = digits[i%16]
		i /= 16
	}
	return string(b)
}
