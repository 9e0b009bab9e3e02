package repository_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// statusColumn is one column whose values are one of domain's sets, with
// an INSERT of a row that holds v in it (every other column valid).
type statusColumn struct {
	table, column string
	constraint    string   // the CHECK's name
	values        []string // domain's set
	insert        func(fix checkFixture, id, v string) (string, []any)
}

// checkFixture is what the inserted rows refer to.
type checkFixture struct{ customerID, orderID string }

const checkTime = "2025-03-01 12:00:00.000000"

func strs[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// statusColumns lists every status-like column of payd's schema.
var statusColumns = []statusColumn{
	{"orders", "status", "orders_status", strs(domain.OrderMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO orders (id, customer_id, status, currency, amount_minor, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, 'USD', 100, ?, ?, ?)`, []any{id, f.customerID, v, checkTime, checkTime, checkTime}
	}},
	{"payment_attempts", "status", "payment_attempts_status", strs(domain.AttemptMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method, currency, amount_minor, created_at, updated_at)
			VALUES (?, ?, 'req', ?, 'pm_card_visa', 'USD', 100, ?, ?)`, []any{id, f.orderID, v, checkTime, checkTime}
	}},
	{"idempotency_records", "status", "idempotency_records_status", strs(domain.RecordMachine.Statuses()), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO idempotency_records (scope, idem_key, method, path, fingerprint, status, locked_until, created_at, updated_at, expires_at)
			VALUES ('public', ?, 'POST', '/v1/x', 'fp', ?, ?, ?, ?, ?)`, []any{id, v, checkTime, checkTime, checkTime, checkTime}
	}},
	{"refunds", "status", "refunds_status", strs(domain.RefundMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO refunds (id, order_id, charge_id, kind, provider_key, currency, amount_minor, status, reason, created_at, updated_at)
			VALUES (?, ?, 'ch_1', 'manual', ?, 'USD', 100, ?, '', ?, ?)`, []any{id, f.orderID, id, v, checkTime, checkTime}
	}},
	{"refunds", "kind", "refunds_kind", []string{domain.RefundManual, domain.RefundAuto}, func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO refunds (id, order_id, charge_id, kind, provider_key, currency, amount_minor, status, reason, created_at, updated_at)
			VALUES (?, ?, 'ch_1', ?, ?, 'USD', 100, 'pending', '', ?, ?)`, []any{id, f.orderID, v, id, checkTime, checkTime}
	}},
	{"discrepancies", "status", "discrepancies_status", strs(domain.DiscrepancyMachine.Statuses()), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO discrepancies (id, type, reference, status, detected_at)
			VALUES (?, 'amount_mismatch', ?, ?, ?)`, []any{id, id, v, checkTime}
	}},
	{"disputes", "status", "disputes_status", strs(domain.DisputeMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO disputes (id, provider_dispute_id, order_id, charge_id, status, currency, amount_minor, opened_at, updated_at)
			VALUES (?, ?, ?, 'ch_1', ?, 'USD', 100, ?, ?)`, []any{id, id, f.orderID, v, checkTime, checkTime}
	}},
	{"ledger_entries", "kind", "ledger_entries_kind", strs(domain.LedgerKinds), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, ?, ?, 'ch_1', 'USD', 100, 'webhook', ?)`, []any{id, f.orderID, v, id, checkTime}
	}},
	{"ledger_entries", "source", "ledger_entries_source", strs(domain.LedgerSources), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, 'charge', ?, 'ch_1', 'USD', 100, ?, ?)`, []any{id, f.orderID, id, v, checkTime}
	}},
}

// idColumn is the column that names a row of table.
func idColumn(table string) string {
	if table == "idempotency_records" {
		return "idem_key"
	}
	return "id"
}

// TestStatusChecksRefuseUnknown: on both databases, every status-like
// column takes each value of its domain set, and refuses any other, on
// INSERT and on UPDATE, leaving the row as it was.
func TestStatusChecksRefuseUnknown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		fix := checkFixture{customerID: o.CustomerID, orderID: o.ID}
		for _, c := range statusColumns {
			t.Run(c.table+"."+c.column, func(t *testing.T) {
				var kept string
				for _, v := range c.values {
					kept = newID()
					q, args := c.insert(fix, kept, v)
					if err := db.Gorm().Exec(q, args...).Error; err != nil {
						t.Fatalf("insert %s = %q: %v, want it stored", c.column, v, err)
					}
				}
				for _, bad := range []string{"bogus", "", strings.ToUpper(c.values[0])} { // (MariaDB pads: "paid " is "paid")
					q, args := c.insert(fix, newID(), bad)
					if err := db.Gorm().Exec(q, args...).Error; err == nil {
						t.Errorf("insert %s = %q stored; want it refused", c.column, bad)
					}
					err := db.Gorm().Exec("UPDATE "+c.table+" SET "+c.column+" = ? WHERE "+idColumn(c.table)+" = ?", bad, kept).Error
					if err == nil {
						t.Errorf("update %s to %q stored; want it refused", c.column, bad)
					}
					var got string
					if err := db.Gorm().Raw("SELECT "+c.column+" FROM "+c.table+" WHERE "+idColumn(c.table)+" = ?", kept).Scan(&got).Error; err != nil || got != c.values[len(c.values)-1] {
						t.Errorf("after the refused update, %s = %q, %v; want %q", c.column, got, err, c.values[len(c.values)-1])
					}
				}
			})
		}
	})
}

// TestStatusChecksMatchDomain reads each column's CHECK from the migrated
// schema, on both databases, and holds its list to domain's set: a status
// added to a machine without a migration, or a migration without the
// machine, fails here.
func TestStatusChecksMatchDomain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		for _, c := range statusColumns {
			for _, clause := range checkClauses(t, db, d, c) {
				got := checkList(t, clause, c.column)
				want := slices.Clone(c.values)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s.%s: the schema allows %v, domain has %v", c.table, c.column, got, want)
				}
			}
		}
	})
}

// checkClauses returns the text of the CHECK on c's column: MariaDB's
// CHECK clause; on SQLite the table's CREATE statement from the CHECK on.
func checkClauses(t *testing.T, db *repository.DB, d migrations.Dialect, c statusColumn) []string {
	t.Helper()
	var out []string
	if d == migrations.MySQL {
		err := db.Gorm().Raw(`SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
			WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_NAME = ?`, c.constraint).Scan(&out).Error
		if err != nil || len(out) != 1 {
			t.Fatalf("CHECK %s: %q, %v; want one", c.constraint, out, err)
		}
		return out
	}
	var table string
	if err := db.Gorm().Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, c.table).Scan(&table).Error; err != nil {
		t.Fatal(err)
	}
	i := strings.Index(table, c.constraint+" CHECK ("+c.column+" IN")
	if i < 0 { // a CHECK the table was created with is unnamed on SQLite
		i = strings.Index(table, "CHECK ("+c.column+" IN")
	}
	if i < 0 {
		t.Fatalf("%s.%s: no CHECK %s in %s", c.table, c.column, c.constraint, table)
	}
	return []string{table[i:]}
}

// checkList extracts the values of "column [NOT] IN (...)" from clause.
func checkList(t *testing.T, clause, column string) []string {
	t.Helper()
	m := regexp.MustCompile("(?i)[`\"]?\\b" + column + "[`\"]?\\s+(?:not\\s+)?in\\s*\\(([^)]*)\\)").FindStringSubmatch(clause)
	if m == nil {
		t.Fatalf("no %s IN (...) in %s", column, clause)
	}
	var out []string
	for _, v := range strings.Split(m[1], ",") {
		out = append(out, strings.Trim(strings.TrimSpace(v), "'"))
	}
	return out
}

// TestStatusChecksKeepRows: the migration that adds the CHECKs keeps every
// row stored before it (SQLite builds the tables again), and the foreign
// keys still hold after it: an order's items go with it, an attempt needs
// its order.
func TestStatusChecksKeepRows(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, err := repository.Open(t.Context(), dbtest.NewURL(t, d))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := repository.MigrateTo(t.Context(), db, 14); err != nil {
			t.Fatal(err)
		}
		cust, order := newID(), newID()
		fix := checkFixture{customerID: cust, orderID: order}
		force(t, db, `INSERT INTO customers (id, email, name, token_hash, created_at) VALUES (?, ?, 'n', ?, ?)`, cust, cust+"@example.com", cust, checkTime)
		tables := map[string]bool{}
		for _, c := range statusColumns {
			for _, v := range c.values {
				id := newID()
				if c.table == "orders" && v == c.values[0] {
					id = order
				}
				q, args := c.insert(fix, id, v)
				force(t, db, q, args...)
			}
			tables[c.table] = true
		}
		force(t, db, `INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price_minor) VALUES (?, 0, 'sku', 'n', 1, 100)`, order)
		count := func(table string) (n int64) {
			if err := db.Gorm().Raw("SELECT COUNT(*) FROM " + table).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := map[string]int64{"order_items": count("order_items")}
		for table := range tables {
			before[table] = count(table)
		}
		if err := repository.Migrate(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		for table, n := range before {
			if got := count(table); got != n {
				t.Errorf("%s: %d rows after the migration, %d before", table, got, n)
			}
		}
		q, args := statusColumns[1].insert(checkFixture{orderID: newID()}, newID(), string(domain.AttemptStarted))
		if err := db.Gorm().Exec(q, args...).Error; err == nil {
			t.Error("an attempt of no order was stored: the foreign key to orders is gone")
		}
		force(t, db, "DELETE FROM payment_attempts WHERE order_id = ?", order)
		force(t, db, "DELETE FROM refunds WHERE order_id = ?", order)
		force(t, db, "DELETE FROM disputes WHERE order_id = ?", order)
		force(t, db, "DELETE FROM ledger_entries WHERE order_id = ?", order)
		force(t, db, "DELETE FROM orders WHERE id = ?", order)
		if n := count("order_items"); n != before["order_items"]-1 {
			t.Errorf("order_items: %d rows after deleting the order, want %d: the cascade is gone", n, before["order_items"]-1)
		}
	})
}
