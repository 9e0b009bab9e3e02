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
	constraint    string   // the CHECK's name (SQLite: its triggers' stem, or the table of an inline CHECK)
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

// checkClauses returns the text of the rules on c's column: MariaDB's
// CHECK clause; on SQLite the insert and update triggers, or the table's
// own CREATE statement for a CHECK it was created with.
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
	err := db.Gorm().Raw(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?) ORDER BY name`,
		c.constraint+"_insert", c.constraint+"_update").Scan(&out).Error
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 2 {
		return out
	}
	var table string
	if err := db.Gorm().Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, c.table).Scan(&table).Error; err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 || !strings.Contains(table, "CHECK ("+c.column+" IN") {
		t.Fatalf("%s.%s: triggers %q and no CHECK in %s; want both triggers or an inline CHECK", c.table, c.column, out, table)
	}
	return []string{table}
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
