package repository_test

import (
	"slices"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestRefundReservationsMigration: migration 00020 moves what refunds in
// flight reserved out of refunded_minor, which until then counted it, and
// makes an order that read refunded only by a reservation paid again; an
// order with no refund in flight is left as it was. The three tables it
// builds again on SQLite keep their rows and indexes, and take the values
// it adds.
func TestRefundReservationsMigration(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, err := repository.Open(t.Context(), dbtest.NewURL(t, d))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := repository.MigrateTo(t.Context(), db, 19); err != nil {
			t.Fatal(err)
		}
		cust := newID()
		force(t, db, `INSERT INTO customers (id, email, name, token_hash, created_at) VALUES (?, ?, 'n', ?, ?)`, cust, cust+"@example.com", cust, checkTime)
		order := func(status string, refunded int64) string {
			id := newID()
			force(t, db, `INSERT INTO orders (id, customer_id, status, currency, amount_minor, refunded_minor, expires_at, created_at, updated_at)
				VALUES (?, ?, ?, 'USD', 1000, ?, ?, ?, ?)`, id, cust, status, refunded, checkTime, checkTime, checkTime)
			return id
		}
		refund := func(orderID, kind, status string, minor int64) {
			id := newID()
			force(t, db, `INSERT INTO refunds (id, order_id, charge_id, kind, provider_key, currency, amount_minor, status, reason, created_at, updated_at)
				VALUES (?, ?, 'ch_1', ?, ?, 'USD', ?, ?, '', ?, ?)`, id, orderID, kind, id, minor, status, checkTime, checkTime)
		}
		inFlight := order("paid", 800) // 8.00 reserved, nothing confirmed
		refund(inFlight, domain.RefundManual, "pending", 800)
		full := order("refunded", 1000) // 4.00 confirmed, 6.00 reserved
		refund(full, domain.RefundManual, "succeeded", 400)
		refund(full, domain.RefundManual, "pending", 600)
		refund(full, domain.RefundAuto, "pending", 1000) // another charge's: never on the order
		done := order("refunded", 1000)                  // all confirmed
		refund(done, domain.RefundManual, "succeeded", 1000)
		refund(done, domain.RefundManual, "failed", 300)
		unpaid := order("pending", 0)
		force(t, db, `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, 'refund', 'refund:re_1', 'ch_1', 'USD', 400, 'webhook', ?)`, newID(), full, checkTime)
		force(t, db, `INSERT INTO discrepancies (id, type, reference, status, detected_at) VALUES (?, 'disputed', 'dp_1', 'open', ?)`, newID(), checkTime)
		force(t, db, `INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, refunded_minor, order_updated_at,
			charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
			VALUES (?, ?, 2, 'order.refunded', 'operator', '', 'refunded', 1000, ?, 1000, 400, 0, 0, ?)`, newID(), full, checkTime, checkTime)
		rebuilt := []string{"ledger_entries", "discrepancies", "notify_events"}
		rows, idx := map[string]int64{}, map[string][]string{}
		for _, table := range rebuilt {
			rows[table], idx[table] = countRows(t, db, table), indexesOf(t, db, d, table)
		}
		if err := repository.MigrateTo(t.Context(), db, 20); err != nil {
			t.Fatal(err)
		}
		idx20 := map[string][]string{} // before later migrations change them
		for _, table := range rebuilt {
			idx20[table] = indexesOf(t, db, d, table)
		}
		// The orders are read by today's store, which knows the columns
		// migrations after 00020 add; those change no amount.
		if err := repository.Migrate(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			id, status         string
			refunded, reserved string
		}{
			{inFlight, "paid", "0.00", "8.00"},
			{full, "paid", "4.00", "6.00"},
			{done, "refunded", "10.00", "0.00"},
			{unpaid, "pending", "0.00", "0.00"},
		} {
			o := findOrder(t, db, tt.id)
			if string(o.Status) != tt.status || o.RefundedAmount.StringFixed(2) != tt.refunded || o.RefundPending.StringFixed(2) != tt.reserved {
				t.Errorf("order after 00020: %s, refunded %s, reserved %s; want %s, %s, %s",
					o.Status, o.RefundedAmount.StringFixed(2), o.RefundPending.StringFixed(2), tt.status, tt.refunded, tt.reserved)
			}
		}
		for _, table := range rebuilt {
			if got := countRows(t, db, table); got != rows[table] {
				t.Errorf("%s: %d rows after 00020, %d before", table, got, rows[table])
			}
			if got := idx20[table]; !slices.Equal(got, idx[table]) || len(got) == 0 {
				t.Errorf("%s: indexes %q after 00020, %q before", table, got, idx[table])
			}
		}
		force(t, db, `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, 'refund_reversed', 'refund:re_1:reversed', 'ch_1', 'USD', 400, 'webhook', ?)`, newID(), full, checkTime)
		force(t, db, `INSERT INTO discrepancies (id, type, reference, status, detected_at) VALUES (?, 'order_books_repaired', 'books:1', 'open', ?)`, newID(), checkTime)
		if err := db.Gorm().Exec(`UPDATE orders SET refund_reserved_minor = -1 WHERE id = ?`, full).Error; err == nil {
			t.Error("a negative reservation was stored: the CHECK is missing")
		}
	})
}

func countRows(t *testing.T, db *repository.DB, table string) (n int64) {
	t.Helper()
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM " + table).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// indexesOf lists each index of table: its name, whether unique, its
// columns in order.
func indexesOf(t *testing.T, db *repository.DB, d migrations.Dialect, table string) (out []string) {
	t.Helper()
	q := `SELECT il.name || ' ' || il."unique" || ' ' || (SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_index_info(il.name) ORDER BY seqno))
		FROM pragma_index_list(?) il WHERE il.origin = 'c' ORDER BY il.name`
	if d == migrations.MySQL {
		q = `SELECT CONCAT(INDEX_NAME, ' ', 1 - NON_UNIQUE, ' ', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ','))
			FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME <> 'PRIMARY'
			GROUP BY INDEX_NAME, NON_UNIQUE ORDER BY INDEX_NAME`
	}
	if err := db.Gorm().Raw(q, table).Scan(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}
