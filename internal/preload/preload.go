// Package preload fills a migrated payd database with a grown shop's
// orders and all that goes with them, in bulk, for paydbench -preload and
// the tests that need a database with rows (the query plans' test).
package preload

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The preload (-preload N) fills the database, before payd is measured,
// with N orders of the shape a shop's database has after 90 days, so the
// figures are those of a database that has grown, not of an empty one.
//
// Order i (0 ≤ i < N) was created (N−i)/N × 90 days before the load, by
// customer i mod N/10, for 5.00 to 204.99 USD, one line of the catalogue:
//   - 80% paid, 8% paid then refunded whole by an operator, 6% cancelled,
//     6% expired (i mod 100);
//   - every tenth (i mod 10 = 3) has a declined attempt first;
//   - a paid order has its attempt, its charge's ledger entry and the
//     provider's payment.succeeded webhook; a refunded one also its
//     refund, the refund's ledger entry and the operator's audit row;
//   - the merchant was told of each payment and refund (order.paid,
//     order.refunded): the outbox event, its delivery to the shop's
//     endpoint and the delivery's attempt log;
//   - each order's creation and pay requests have their idempotency
//     records.
//
// Rows payd's own jobs delete are there as those jobs leave them: webhook
// events, outbox events, deliveries and their attempts for the last 30
// days (PAYD_RETENTION's default), idempotency records for the last two
// days (the last day's inside their 24-hour TTL, the day before's outside
// it, for the purge to find). Orders, attempts, ledger, refunds and audit
// rows, which payd never deletes, go back the whole 90 days.
//
// The rows are written by the database itself, INSERT ... SELECT over a
// table of the numbers 0..9999 (preload_seq), 10,000 orders per statement
// and a transaction per 10,000 orders, so 10M orders load in minutes. IDs
// are UUID-shaped, and grow with i as payd's UUIDv7 grow with time, under
// payd's own (which start with today's timestamp, so sort after them).

// Span is how far back the preload's orders go.
const Span = 90 * 24 * time.Hour

// chunk is how many orders one statement writes.
const chunk = 10000

// sqlDialect writes the expressions the preload's statements need in one
// database's SQL.
type sqlDialect struct {
	mysql bool
	now   string // the load's "now", as payd writes a time
}

// cat concatenates SQL string expressions.
func (d sqlDialect) cat(parts ...string) string {
	if d.mysql {
		return "CONCAT(" + strings.Join(parts, ", ") + ")"
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// hex is the number x in lower-case hexadecimal, zero-padded to width.
func (d sqlDialect) hex(x string, width int) string {
	if d.mysql {
		return fmt.Sprintf("LOWER(LPAD(HEX(%s), %d, '0'))", x, width)
	}
	return fmt.Sprintf("printf('%%0%dx', %s)", width, x)
}

// id is a UUID-shaped ID, unique per tag and number x: tag (4 hex digits)
// tells the tables' IDs apart.
func (d sqlDialect) id(tag, x string) string {
	return d.cat("'00000000-0000-7000-"+tag+"-'", d.hex(x, 12))
}

// at is the time secs seconds before the load's now, as payd writes
// times (microseconds, UTC).
func (d sqlDialect) at(secs string) string {
	if d.mysql {
		return fmt.Sprintf("TIMESTAMPADD(SECOND, -(%s), '%s')", secs, d.now)
	}
	return fmt.Sprintf("(strftime('%%Y-%%m-%%d %%H:%%M:%%S', '%s', printf('%%d seconds', -(%s))) || '.000000')", d.now[:19], secs)
}

// div is integer division.
func (d sqlDialect) div(a, b string) string {
	if d.mysql {
		return fmt.Sprintf("(%s) DIV (%s)", a, b)
	}
	return fmt.Sprintf("(%s) / (%s)", a, b)
}

// table is one table's rows: per number i of a chunk (an order's,
// or a customer's), the SELECT list of its columns and which numbers have
// a row (where, "" for all).
type table struct {
	name      string
	columns   string
	values    func(d sqlDialect, n, customers int) string
	where     func(d sqlDialect, n int) string
	customers bool // numbered by customer, not by order
}

// The orders' mix, by i mod 100 (see the file's comment).
const (
	charged  = "i % 100 < 88"                   // paid, or paid then refunded
	refunded = "i % 100 >= 80 AND i % 100 < 88" // paid then refunded
	declined = "i % 10 = 3"                     // a declined attempt first
)

// recent keeps the orders created less than secs seconds before the load.
func (d sqlDialect) recent(n int, secs int64) string {
	return fmt.Sprintf("%s < %d", d.age(n), secs)
}

// age is how many whole seconds before the load order i of n was created.
func (d sqlDialect) age(n int) string {
	return "(" + d.div(fmt.Sprintf("(%d - i) * %d", n, int64(Span/time.Second)), strconv.Itoa(n)) + ")"
}

// tables are the tables the preload writes, parents first.
var tables = []table{
	{name: "customers", customers: true, columns: "id, email, name, token_hash, request_id, created_at, request_fingerprint",
		values: func(d sqlDialect, _, _ int) string {
			return strings.Join([]string{d.id("8001", "i"), d.cat("'c'", "i", "'@preload.example'"), "'Preloaded customer'",
				d.hex("i", 64), "NULL", d.at(strconv.FormatInt(int64(Span/time.Second)+3600, 10)), "NULL"}, ", ")
		}},
	{name: "orders", columns: "id, customer_id, status, currency, amount_minor, refunded_minor, pay_request_id, version, paid_at, " +
		"expires_at, created_at, updated_at, create_request_id, create_fingerprint, refund_reserved_minor, creator",
		values: func(d sqlDialect, n, customers int) string {
			a := d.age(n)
			cust := d.id("8001", fmt.Sprintf("i %% %d", customers))
			return strings.Join([]string{d.id("8000", "i"), cust,
				"CASE WHEN i % 100 < 80 THEN 'paid' WHEN i % 100 < 88 THEN 'refunded' WHEN i % 100 < 94 THEN 'cancelled' ELSE 'expired' END",
				"'USD'", amount,
				"CASE WHEN " + refunded + " THEN " + amount + " ELSE 0 END",
				"CASE WHEN " + charged + " THEN " + d.id("8002", "i") + " END",
				"1 + CASE WHEN " + charged + " THEN 2 ELSE 1 END + CASE WHEN " + refunded + " THEN 1 ELSE 0 END + CASE WHEN " + declined + " THEN 2 ELSE 0 END",
				"CASE WHEN " + charged + " THEN " + d.at(a+" + 8") + " END",
				d.at(a + " + 10 - 1800"), d.at(a + " + 10"),
				"CASE WHEN " + refunded + " THEN " + d.at(a+" + 1") + " ELSE " + d.at(a+" + 8") + " END",
				d.id("8003", "i"), "NULL", "0", d.cat("'customer:'", cust)}, ", ")
		}},
	{name: "order_items", columns: "order_id, position, sku, name, quantity, unit_price_minor, stock_taken",
		values: func(d sqlDialect, _, _ int) string {
			return strings.Join([]string{d.id("8000", "i"), "0", d.cat("'preload-'", "i % 50"), "'Preloaded product'", "1", amount, "0"}, ", ")
		}},
	{name: "payment_attempts", columns: "id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, " +
		"currency, amount_minor, created_at, updated_at, leased_until, in_flight_until",
		values: func(d sqlDialect, n, _ int) string {
			a := d.age(n)
			return strings.Join([]string{d.id("8004", "i"), d.id("8000", "i"), d.id("8002", "i"), "'succeeded'", "'pm_ok'",
				d.cat("'ch_pre_'", d.hex("i", 12)), "NULL", "'USD'", amount, d.at(a + " + 9"), d.at(a + " + 8"), "NULL", "NULL"}, ", ")
		},
		where: func(sqlDialect, int) string { return charged }},
	{name: "payment_attempts", columns: "id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, " +
		"currency, amount_minor, created_at, updated_at, leased_until, in_flight_until",
		values: func(d sqlDialect, n, _ int) string {
			a := d.age(n)
			return strings.Join([]string{d.id("8005", "i"), d.id("8000", "i"), d.id("800e", "i"), "'failed'", "'pm_declined'",
				"NULL", "'card_declined'", "'USD'", amount, d.at(a + " + 9"), d.at(a + " + 9"), "NULL", "NULL"}, ", ")
		},
		where: func(sqlDialect, int) string { return declined }},
	{name: "ledger_entries", columns: "id, order_id, kind, reference, charge_id, currency, amount_minor, source, actor, note, created_at",
		values: func(d sqlDialect, n, _ int) string {
			charge := d.cat("'ch_pre_'", d.hex("i", 12))
			return strings.Join([]string{d.id("8006", "i"), d.id("8000", "i"), "'charge'", d.cat("'charge:'", charge), charge,
				"'USD'", amount, "'pay_reply'", "''", "''", d.at(d.age(n) + " + 8")}, ", ")
		},
		where: func(sqlDialect, int) string { return charged }},
	{name: "refunds", columns: "id, order_id, charge_id, request_id, kind, provider_key, provider_refund_id, currency, amount_minor, " +
		"status, reason, created_at, updated_at, request_fingerprint",
		values: func(d sqlDialect, n, _ int) string {
			a := d.age(n)
			return strings.Join([]string{d.id("8008", "i"), d.id("8000", "i"), d.cat("'ch_pre_'", d.hex("i", 12)), d.id("800d", "i"),
				"'manual'", d.id("8008", "i"), d.cat("'re_pre_'", d.hex("i", 12)), "'USD'", amount, "'succeeded'",
				"'preloaded: damaged in transit'", d.at(a + " + 2"), d.at(a + " + 1"), d.hex("i", 64)}, ", ")
		},
		where: func(sqlDialect, int) string { return refunded }},
	{name: "ledger_entries", columns: "id, order_id, kind, reference, charge_id, currency, amount_minor, source, actor, note, created_at",
		values: func(d sqlDialect, n, _ int) string {
			return strings.Join([]string{d.id("8007", "i"), d.id("8000", "i"), "'refund'", d.cat("'refund:re_pre_'", d.hex("i", 12)),
				d.cat("'ch_pre_'", d.hex("i", 12)), "'USD'", amount, "'operator'", "'preload-operator'", "'damaged in transit'",
				d.at(d.age(n) + " + 1")}, ", ")
		},
		where: func(sqlDialect, int) string { return refunded }},
	{name: "audit_log", columns: "id, actor, action, order_id, target, request_id, result, detail, created_at",
		values: func(d sqlDialect, n, _ int) string {
			return strings.Join([]string{d.id("8009", "i"), "'preload-operator'", "'refund'", d.id("8000", "i"), d.id("8008", "i"),
				d.id("800d", "i"), "200", "NULL", d.at(d.age(n) + " + 1")}, ", ")
		},
		where: func(sqlDialect, int) string { return refunded }},
	{name: "webhook_events", columns: "id, type, order_id, attempt_id, charge_id, payload, outcome, received_at, processed_at",
		values: func(d sqlDialect, n, _ int) string {
			a := d.age(n)
			charge := d.cat("'ch_pre_'", d.hex("i", 12))
			payload := d.cat(`'{"id":"evt_pre_'`, d.hex("i", 12), `'","type":"payment.succeeded","data":{"charge_id":"'`, charge,
				`'","idempotency_key":"'`, d.id("8004", "i"), `'","order_id":"'`, d.id("8000", "i"), `'","status":"succeeded"}}'`)
			return strings.Join([]string{d.cat("'evt_pre_'", d.hex("i", 12)), "'payment.succeeded'", d.id("8000", "i"), d.id("8004", "i"),
				charge, payload, "'duplicate'", d.at(a + " + 7"), d.at(a + " + 7")}, ", ")
		},
		where: func(d sqlDialect, n int) string { return charged + " AND " + d.recent(n, 30*24*3600) }},
	{name: "notify_events", columns: "id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, " +
		"order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at",
		values: func(d sqlDialect, n, _ int) string {
			paid := d.at(d.age(n) + " + 8")
			return strings.Join([]string{d.id("800a", "i"), d.id("8000", "i"), paidSeq, "'order.paid'", "'pay_request'", d.id("8002", "i"),
				"'paid'", d.id("8002", "i"), paid, "0", paid, amount, "0", "0", "0",
				d.cat(`'{"type":"order.paid","order_id":"'`, d.id("8000", "i"), `'"}'`), "1", paid}, ", ")
		},
		where: func(d sqlDialect, n int) string { return charged + " AND " + d.recent(n, 30*24*3600) }},
	{name: "notify_events", columns: "id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, " +
		"order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at",
		values: func(d sqlDialect, n, _ int) string {
			a := d.age(n)
			return strings.Join([]string{d.id("800f", "i"), d.id("8000", "i"), paidSeq + " + 1", "'order.refunded'", "'operator'",
				"'preload-operator'", "'refunded'", d.id("8002", "i"), d.at(a + " + 8"), amount, d.at(a + " + 1"), amount, amount, "0", "0",
				d.cat(`'{"type":"order.refunded","order_id":"'`, d.id("8000", "i"), `'"}'`), "1", d.at(a + " + 1")}, ", ")
		},
		where: func(d sqlDialect, n int) string { return refunded + " AND " + d.recent(n, 30*24*3600) }},
	{name: "notify_deliveries", columns: "id, endpoint_id, event_id, order_id, seq, status, attempts, next_attempt_at, leased_until, " +
		"last_status, last_error, delivered_at, failed_at, created_at, updated_at",
		values: func(d sqlDialect, n, _ int) string {
			paid := d.at(d.age(n) + " + 8")
			return strings.Join([]string{d.id("800b", "i"), "'" + Endpoint + "'", d.id("800a", "i"), d.id("8000", "i"), paidSeq,
				"'delivered'", "1", paid, "NULL", "204", "''", paid, "NULL", paid, paid}, ", ")
		},
		where: func(d sqlDialect, n int) string { return charged + " AND " + d.recent(n, 30*24*3600) }},
	{name: "notify_attempts", columns: "id, delivery_id, n, started_at, duration_us, status, error, request_head, response",
		values: func(d sqlDialect, n, _ int) string {
			return strings.Join([]string{d.id("800c", "i"), d.id("800b", "i"), "1", d.at(d.age(n) + " + 8"), "12000", "204", "''",
				"'POST /payd-events HTTP/1.1'", "'HTTP/1.1 204 No Content'"}, ", ")
		},
		where: func(d sqlDialect, n int) string { return charged + " AND " + d.recent(n, 30*24*3600) }},
	{name: "idempotency_records", columns: "scope, idem_key, method, path, fingerprint, status, response_status, response_body, " +
		"response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by",
		values: func(d sqlDialect, n, customers int) string {
			a := d.age(n)
			return strings.Join([]string{d.cat("'customer:'", d.id("8001", fmt.Sprintf("i %% %d", customers))), d.id("8003", "i"), "'POST'",
				"'/v1/orders'", d.hex("i", 64), "'succeeded'", "201", d.cat(`'{"id":"'`, d.id("8000", "i"), `'"}'`), "0", d.id("8000", "i"),
				d.at(a + " + 10"), d.at(a + " + 10"), d.at(a + " + 10"), d.at(a + " + 10 - 86400"), "'request'"}, ", ")
		},
		where: func(d sqlDialect, n int) string { return d.recent(n, 2*24*3600) }},
	{name: "idempotency_records", columns: "scope, idem_key, method, path, fingerprint, status, response_status, response_body, " +
		"response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by",
		values: func(d sqlDialect, n, customers int) string {
			a := d.age(n)
			return strings.Join([]string{d.cat("'customer:'", d.id("8001", fmt.Sprintf("i %% %d", customers))), d.id("8002", "i"), "'POST'",
				d.cat("'/v1/orders/'", d.id("8000", "i"), "'/pay'"), d.hex("i", 64), "'succeeded'", "200",
				d.cat(`'{"id":"'`, d.id("8000", "i"), `'","status":"paid"}'`), "0", d.id("8000", "i"),
				d.at(a + " + 8"), d.at(a + " + 9"), d.at(a + " + 8"), d.at(a + " + 9 - 86400"), "'request'"}, ", ")
		},
		where: func(d sqlDialect, n int) string { return charged + " AND " + d.recent(n, 2*24*3600) }},
}

const (
	// amount is order i's amount in cents: 5.00 to 204.99.
	amount = "(500 + (i * 7919) % 20000)"
	// paidSeq is the order's version its payment left: created (1), a
	// declined attempt claimed and released (+2), claimed and paid (+2).
	paidSeq = "(3 + CASE WHEN i % 10 = 3 THEN 2 ELSE 0 END)"
	// Endpoint is the shop's endpoint the preload's deliveries
	// went to, disabled, so the events payd writes while it is measured
	// are sent nowhere.
	Endpoint = "00000000-0000-7000-8010-000000000000"
)

// Marker records, in the database, that the preload of a number of
// orders finished: a kept database (-preload-keep) is loaded once.
const Marker = "paydbench_preload"

// Stats is what one preload did.
type Stats struct {
	Orders int           `json:"orders"`
	Rows   int64         `json:"rows"`
	Took   time.Duration `json:"took_ns"`
	Reused bool          `json:"reused"` // a kept database already held them
	// Bytes is the database's size (tables and indexes) after the load.
	Bytes int64 `json:"bytes,omitempty"`
}

// Load writes n orders and all that goes with them into db (payd's
// schema, migrated), unless its marker says a load of n finished before.
// progress hears a line per million orders.
func Load(ctx context.Context, db *sql.DB, mysqlDB bool, n int, now time.Time, progress io.Writer) (Stats, error) {
	st := Stats{Orders: n}
	start := time.Now()
	conn, err := db.Conn(ctx) // one session: the MySQL settings below are a session's
	if err != nil {
		return st, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+Marker+" (orders BIGINT NOT NULL)"); err != nil {
		return st, fmt.Errorf("preload marker: %w", err)
	}
	var done int
	switch err := conn.QueryRowContext(ctx, "SELECT orders FROM "+Marker).Scan(&done); {
	case err == nil && done == n:
		st.Reused = true
		return st, nil
	case err == nil:
		return st, fmt.Errorf("the kept database holds a preload of %d orders, not %d: drop it or ask for %d", done, n, done)
	case err != sql.ErrNoRows:
		return st, fmt.Errorf("preload marker: %w", err)
	}
	var orders int64
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		return st, err
	}
	if orders > 0 {
		return st, fmt.Errorf("the database holds %d orders but no finished preload (one was stopped halfway?): drop it and load again", orders)
	}
	if mysqlDB {
		// The rows are new and consistent: no need to check each key. The
		// connection goes back to its pool after: checks on again.
		if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0, unique_checks = 0"); err != nil {
			return st, err
		}
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION foreign_key_checks = 1, unique_checks = 1")
		}()
	}
	if err := makeSeq(ctx, conn); err != nil {
		return st, err
	}
	d := sqlDialect{mysql: mysqlDB, now: now.UTC().Format(timeLayout)}
	customers := max(1, n/10)
	if _, err := conn.ExecContext(ctx, `INSERT INTO notify_endpoints (id, url, description, events, status, disabled_reason,
		secret_sealed, created_at, updated_at) VALUES (?, 'https://shop.example/payd-events', 'preloaded', 'order.paid order.refunded',
		'disabled', 'preloaded by paydbench', X'00', ?, ?)`, Endpoint, ts(now.Add(-Span)), ts(now.Add(-Span))); err != nil {
		return st, fmt.Errorf("preload endpoint: %w", err)
	}
	for base := 0; base < max(n, customers); base += chunk {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return st, err
		}
		for _, t := range tables {
			limit := n
			if t.customers {
				limit = customers
			}
			if base >= limit {
				continue
			}
			q := "INSERT INTO " + t.name + " (" + t.columns + ") SELECT " + t.values(d, n, customers) +
				" FROM (SELECT " + strconv.Itoa(base) + " + s.i AS i FROM preload_seq s WHERE " + strconv.Itoa(base) + " + s.i < " + strconv.Itoa(limit) + ") q"
			if t.where != nil {
				q += " WHERE " + t.where(d, n)
			}
			res, err := tx.ExecContext(ctx, q)
			if err != nil {
				_ = tx.Rollback()
				return st, fmt.Errorf("preload %s, orders from %d: %w", t.name, base, err)
			}
			rows, _ := res.RowsAffected()
			st.Rows += rows
		}
		if err := tx.Commit(); err != nil {
			return st, err
		}
		if next := base + chunk; next%1_000_000 == 0 && next < n {
			fmt.Fprintf(progress, "paydbench: preloaded %d of %d orders (%s)\n", next, n, time.Since(start).Round(time.Second))
		}
	}
	if _, err := conn.ExecContext(ctx, "DROP TABLE preload_seq"); err != nil {
		return st, err
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+Marker+" (orders) VALUES (?)", n); err != nil {
		return st, err
	}
	// The planner's statistics, as a grown table would have them.
	if mysqlDB {
		seen := map[string]bool{}
		for _, t := range tables {
			if !seen[t.name] {
				seen[t.name] = true
				if _, err := conn.ExecContext(ctx, "ANALYZE TABLE "+t.name); err != nil {
					return st, err
				}
			}
		}
	} else if _, err := conn.ExecContext(ctx, "ANALYZE"); err != nil {
		return st, err
	}
	st.Took = time.Since(start)
	return st, nil
}

// Bytes is the size of the database conn is on: its tables and
// indexes (MySQL, as the server estimates them), or its file's pages
// (SQLite).
func Bytes(ctx context.Context, db *sql.DB, mysqlDB bool) (int64, error) {
	q := "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
	if mysqlDB {
		q = "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables WHERE table_schema = DATABASE()"
	}
	var n int64
	err := db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// makeSeq makes preload_seq, the numbers 0..chunk-1.
func makeSeq(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS preload_seq"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE preload_seq (i BIGINT NOT NULL PRIMARY KEY)"); err != nil {
		return err
	}
	for lo := 0; lo < chunk; lo += 1000 {
		var b strings.Builder
		b.WriteString("INSERT INTO preload_seq (i) VALUES ")
		for i := lo; i < lo+1000; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d)", i)
		}
		if _, err := conn.ExecContext(ctx, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// ID is the preload's ID of number i in the table tag names: the IDs
// its statements write (sqlDialect.id), for a reader of the preload.
func ID(tag string, i int) string {
	return fmt.Sprintf("00000000-0000-7000-%s-%012x", tag, i)
}

// timeLayout is how payd writes timestamps (repository.timeLayout): UTC,
// microseconds.
const timeLayout = "2006-01-02 15:04:05.000000"

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }

// Words says what the preload did, for a report.
func (p *Stats) Words() string {
	if p.Reused {
		return fmt.Sprintf("%d orders, kept from an earlier run; the database is %.0f MiB, %.0f bytes per order",
			p.Orders, float64(p.Bytes)/(1<<20), float64(p.Bytes)/float64(p.Orders))
	}
	return fmt.Sprintf("%d orders (%d rows) in %s; the database is %.0f MiB, %.0f bytes per order", p.Orders, p.Rows,
		p.Took.Round(time.Second), float64(p.Bytes)/(1<<20), float64(p.Bytes)/float64(p.Orders))
}
