package repository_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

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
type checkFixture struct {
	customerID, orderID string
	before22            bool // the schema before 00022: orders have no creator
}

const checkTime = "2025-03-01 12:00:00.000000"

// checkSeq numbers the notify_events rows the checks insert: (order_id,
// seq) is unique.
var checkSeq atomic.Int64

func strs[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// statusColumns lists every status-like column of payd's schema: each
// column that holds one of a closed set of values domain lists in one
// place. Columns that look alike but are left without a CHECK:
//   - webhook_events.type: the provider's event type, stored for every
//     signed event, also of types payd ignores ("other", charge.disputed
//     before disputes): an open set.
//   - discrepancies.resolution: the operators' actions and payd's own
//     (apply, refund, ignore, auto_refunded, recorded) are service's
//     constants in three files, not one list, and the claim compares the
//     column with the resolution asked (Claim/Settle/Unclaim).
//   - reconciliation_runs.source: "provider", "csv" or who started the run
//     ("schedule"), literals in service, not one list.
//   - audit_log.action and actor, payment_attempts.failure_code and
//     payment_method, disputes.reason: names chosen by operators or the
//     provider, open sets.
var statusColumns = []statusColumn{
	{"orders", "status", "orders_status", strs(domain.OrderMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		if f.before22 {
			return `INSERT INTO orders (id, customer_id, status, currency, amount_minor, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, 'USD', 100, ?, ?, ?)`, []any{id, f.customerID, v, checkTime, checkTime, checkTime}
		}
		return `INSERT INTO orders (id, customer_id, creator, status, currency, amount_minor, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, 'USD', 100, ?, ?, ?)`, []any{id, f.customerID, domain.CustomerScope(f.customerID), v, checkTime, checkTime, checkTime}
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
	{"discrepancies", "type", "discrepancies_type", strs(domain.DiscrepancyTypes), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO discrepancies (id, type, reference, status, detected_at)
			VALUES (?, ?, ?, 'open', ?)`, []any{id, v, id, checkTime}
	}},
	{"webhook_events", "outcome", "webhook_events_outcome", strs(domain.WebhookOutcomes), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO webhook_events (id, type, payload, outcome, received_at, processed_at)
			VALUES (?, 'payment.succeeded', '{}', ?, ?, ?)`, []any{id, v, checkTime, checkTime}
	}},
	{"idempotency_records", "completed_by", "idempotency_records_completed_by", domain.RecordCompleters, func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO idempotency_records (scope, idem_key, method, path, fingerprint, status, response_status, completed_by, locked_until, created_at, updated_at, expires_at)
			VALUES ('public', ?, 'POST', '/v1/x', 'fp', 'succeeded', 200, ?, ?, ?, ?, ?)`, []any{id, v, checkTime, checkTime, checkTime, checkTime}
	}},
	{"disputes", "status", "disputes_status", strs(domain.DisputeMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO disputes (id, provider_dispute_id, order_id, charge_id, status, currency, amount_minor, opened_at, updated_at)
			VALUES (?, ?, ?, 'ch_1', ?, 'USD', 100, ?, ?)`, []any{id, id, f.orderID, v, checkTime, checkTime}
	}},
	{"ledger_entries", "kind", "ledger_entries_kind", strs(domain.LedgerKinds), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, ?, ?, 'ch_1', 'USD', 100, 'webhook', ?)`, []any{id, f.orderID, v, id, checkTime}
	}},
	{"notify_events", "type", "notify_events_type", strs(domain.NotifyTypes), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO notify_events (id, order_id, seq, type, cause, order_status, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
			VALUES (?, ?, ?, ?, 'webhook', 'paid', 0, ?, 0, 0, 0, 0, ?)`, []any{id, f.orderID, checkSeq.Add(1), v, checkTime, checkTime}
	}},
	{"notify_events", "cause", "notify_events_cause", strs(domain.CauseKinds), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO notify_events (id, order_id, seq, type, cause, order_status, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
			VALUES (?, ?, ?, 'order.paid', ?, 'paid', 0, ?, 0, 0, 0, 0, ?)`, []any{id, f.orderID, checkSeq.Add(1), v, checkTime, checkTime}
	}},
	{"notify_endpoints", "status", "notify_endpoints_status", strs(domain.EndpointStatuses), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO notify_endpoints (id, url, events, status, secret_sealed, created_at, updated_at)
			VALUES (?, 'https://shop.example', 'order.paid', ?, 'x', ?, ?)`, []any{id, v, checkTime, checkTime}
	}},
	{"notify_deliveries", "status", "notify_deliveries_status", strs(domain.DeliveryMachine.Statuses()), func(_ checkFixture, id, v string) (string, []any) {
		return `INSERT INTO notify_deliveries (id, endpoint_id, event_id, order_id, seq, status, next_attempt_at, created_at, updated_at)
			VALUES (?, 'ep', ?, 'o', 1, ?, ?, ?, ?)`, []any{id, id, v, checkTime, checkTime, checkTime}
	}},
	{"ledger_entries", "source", "ledger_entries_source", strs(domain.LedgerSources), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
			VALUES (?, ?, 'charge', ?, 'ch_1', 'USD', 100, ?, ?)`, []any{id, f.orderID, id, v, checkTime}
	}},
	{"orders", "capture_method", "orders_capture_method", captureMethods, func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO orders (id, customer_id, creator, status, capture_method, currency, amount_minor, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, 'pending', ?, 'USD', 100, ?, ?, ?)`, []any{id, f.customerID, domain.CustomerScope(f.customerID), v, checkTime, checkTime, checkTime}
	}},
	{"payment_attempts", "capture_method", "payment_attempts_capture_method", captureMethods, func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method, capture_method, currency, amount_minor, created_at, updated_at)
			VALUES (?, ?, ?, 'started', 'pm_ok', ?, 'USD', 100, ?, ?)`, []any{id, f.orderID, id, v, checkTime, checkTime}
	}},
	{"hold_actions", "kind", "hold_actions_kind", strs(domain.HoldActionKinds), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO hold_actions (id, order_id, kind, status, currency, created_at, updated_at)
			VALUES (?, ?, ?, 'started', 'USD', ?, ?)`, []any{id, f.orderID, v, checkTime, checkTime}
	}},
	{"hold_actions", "status", "hold_actions_status", strs(domain.HoldActionMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO hold_actions (id, order_id, kind, status, currency, created_at, updated_at)
			VALUES (?, ?, 'capture', ?, 'USD', ?, ?)`, []any{id, f.orderID, v, checkTime, checkTime}
	}}, {"orders", "fulfillment_status", "orders_fulfillment_status", strs(domain.FulfillmentMachine.Statuses()), func(f checkFixture, id, v string) (string, []any) {
		return `INSERT INTO orders (id, customer_id, creator, status, fulfillment_status, currency, amount_minor, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, 'paid', ?, 'USD', 100, ?, ?, ?)`, []any{id, f.customerID, domain.CustomerScope(f.customerID), v, checkTime, checkTime, checkTime}
	}},
}

// idColumn is the column that names a row of table.
func idColumn(table string) string {
	if table == "idempotency_records" {
		return "idem_key"
	}
	return "id"
}

// refusedByCheck reports whether err is c's CHECK refusing a value:
// MariaDB's ER_CONSTRAINT_FAILED (4025, "CONSTRAINT `name` failed for
// ..."), SQLite's SQLITE_CONSTRAINT_CHECK (275, "CHECK constraint failed:
// name", or the expression of a CHECK the table was created with, which
// SQLite leaves unnamed). Any other error (a syntax error, a missing
// column, a foreign key, another CHECK) is not the refusal asked for.
func refusedByCheck(err error, c statusColumn) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 4025 && strings.Contains(my.Message, "`"+c.constraint+"`")
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) && lite.Code() == 275 {
		msg := err.Error()
		return strings.Contains(msg, "CHECK constraint failed: "+c.constraint) || strings.Contains(msg, "CHECK constraint failed: "+c.column+" IN (")
	}
	return false
}

// column returns the statusColumn of table.column.
func column(t *testing.T, table, col string) statusColumn {
	t.Helper()
	for _, c := range statusColumns {
		if c.table == table && c.column == col {
			return c
		}
	}
	t.Fatalf("no status column %s.%s", table, col)
	return statusColumn{}
}

// TestRefusedByCheckIsSpecific: refusedByCheck counts only the CHECK it
// is asked about, on both databases: a foreign key, a missing column, a
// unique key or another column's CHECK refusing the row is not it.
func TestRefusedByCheckIsSpecific(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		fix := checkFixture{customerID: o.CustomerID, orderID: o.ID}
		attempts, status, kind := column(t, "payment_attempts", "status"), column(t, "refunds", "status"), column(t, "refunds", "kind")
		refuse := func(what string, c statusColumn, want bool, q string, args ...any) {
			t.Helper()
			err := db.Gorm().Exec(q, args...).Error
			if err == nil {
				t.Fatalf("%s: stored; want it refused", what)
			}
			if got := refusedByCheck(err, c); got != want {
				t.Errorf("%s: refusedByCheck(%v, %s) = %v, want %v", what, err, c.constraint, got, want)
			}
		}
		q, args := attempts.insert(checkFixture{orderID: newID()}, newID(), string(domain.AttemptStarted))
		refuse("an attempt of no order", attempts, false, q, args...)
		refuse("a missing column", attempts, false, "INSERT INTO payment_attempts (no_such_column) VALUES ('started')")
		q, args = kind.insert(fix, newID(), "bogus")
		refuse("an unknown kind, asked as the status", status, false, q, args...)
		refuse("an unknown kind, asked as the kind", kind, true, q, args...)
		id := newID()
		q, args = status.insert(fix, id, string(domain.RefundPending))
		force(t, db, q, args...)
		refuse("a second refund of one provider key", status, false, q, args...)
	})
}

// TestStatusChecksRefuseUnknown: on both databases, every status-like
// column takes each value of its domain set, and its CHECK refuses any
// other, on INSERT and on UPDATE, leaving the row as it was.
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
					if err := db.Gorm().Exec(q, args...).Error; !refusedByCheck(err, c) {
						t.Errorf("insert %s = %q: %v; want it refused by CHECK %s", c.column, bad, err, c.constraint)
					}
					err := db.Gorm().Exec("UPDATE "+c.table+" SET "+c.column+" = ? WHERE "+idColumn(c.table)+" = ?", bad, kept).Error
					if !refusedByCheck(err, c) {
						t.Errorf("update %s to %q: %v; want it refused by CHECK %s", c.column, bad, err, c.constraint)
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

// addedBy00020 are the closed sets' values migration 00020 added.
var addedBy00020 = map[string]bool{
	string(domain.LedgerRefundReversed): true, // and discrepancy type refund_reversed
	string(domain.OrderBooksRepaired):   true, string(domain.DisputeExceedsRemaining): true,
	string(domain.NotifyOrderRefundReversed): true,
}

// captureMethods are the capture methods, as the CHECKs name them.
var captureMethods = []string{string(domain.CaptureAutomatic), string(domain.CaptureManual)}

// addedBy00033 are the closed sets' values migration 00033 added.
var addedBy00033 = map[string]bool{
	string(domain.StatusAuthorized): true, string(domain.LedgerHold): true, string(domain.LedgerHoldReleased): true,
	string(domain.NotifyOrderAuthorized): true,
}

// TestStatusChecksKeepRows: the migrations that add the CHECKs (00015,
// 00016) keep every row stored before them, also those whose outcome or
// completed_by is still NULL, and every index (SQLite builds the tables
// again), and the foreign keys still hold after them: an order's items go
// with it, an attempt needs its order.
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
		fix := checkFixture{customerID: cust, orderID: order, before22: true}
		force(t, db, `INSERT INTO customers (id, email, name, token_hash, created_at) VALUES (?, ?, 'n', ?, ?)`, cust, cust+"@example.com", cust, checkTime)
		tables := map[string]bool{}
		for _, c := range statusColumns {
			if strings.HasPrefix(c.table, "notify_") || c.column == "fulfillment_status" || // created by 00019 and 00032,
				c.column == "capture_method" || c.table == "hold_actions" { // and 00033, after the migrations under test
				continue
			}
			for _, v := range c.values {
				if addedBy00020[v] || addedBy00033[v] {
					continue // a value migration 00020 added: no CHECK before it takes it
				}
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
		// an event not applied yet, a record still processing
		force(t, db, `INSERT INTO webhook_events (id, type, payload, received_at) VALUES (?, 'payment.succeeded', '{}', ?)`, newID(), checkTime)
		force(t, db, `INSERT INTO idempotency_records (scope, idem_key, method, path, fingerprint, status, locked_until, created_at, updated_at, expires_at)
			VALUES ('public', ?, 'POST', '/v1/x', 'fp', 'processing', ?, ?, ?, ?)`, newID(), checkTime, checkTime, checkTime, checkTime)
		count := func(table string) int64 { return countRows(t, db, table) }
		indexes := func(table string) []string { return indexesOf(t, db, d, table) }
		tables["order_items"] = true
		nulls := []string{"webhook_events WHERE outcome IS NULL", "idempotency_records WHERE completed_by IS NULL"}
		before, beforeIdx := map[string]int64{}, map[string][]string{}
		for table := range tables {
			before[table], beforeIdx[table] = count(table), indexes(table)
		}
		if len(beforeIdx["discrepancies"]) == 0 || len(beforeIdx["webhook_events"]) == 0 {
			t.Fatalf("no index read: %q", beforeIdx)
		}
		for _, q := range nulls {
			if before[q] = count(q); before[q] == 0 {
				t.Fatalf("%s: no row", q)
			}
		}
		if err := repository.MigrateTo(t.Context(), db, 16); err != nil {
			t.Fatal(err)
		}
		for table, n := range before {
			if got := count(table); got != n {
				t.Errorf("%s: %d rows after the migration, %d before", table, got, n)
			}
		}
		for table, idx := range beforeIdx {
			if got := indexes(table); !slices.Equal(got, idx) {
				t.Errorf("%s: indexes %q after the migration, %q before", table, got, idx)
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
