package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/app"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/preload"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
)

// A grown database (docs/performance.md, "As the data grows"). payd's statements are
// recorded below database/sql while payd serves the pay path, the buyer's
// and the operators' reads and writes, and runs each background job once,
// on a database preloaded with a grown shop's orders (internal/preload).
// Then the database is asked how it runs each one — EXPLAIN on MariaDB,
// EXPLAIN QUERY PLAN on SQLite — and the test fails on a statement that
// reads a whole growing table, or sorts more than a page of its rows.
// On the way, the jobs' passes over the grown tables must remove what
// retention (here 20 days) and the idempotency purge say, and nothing else.

// planOrders is how many orders the plans' database holds: enough that
// MariaDB's planner weighs a table as a grown one (with fewer, it reads a
// batch of 500 rows' worth of a small table whole, as cheaper than its
// index).
const planOrders = 50000

// growingTables grow with the orders. The others may be read whole, or
// sorted: endpoints and products; discrepancies and disputes, which grow
// with mistakes, not with sales; the overview's rollup, a few rows per
// hour however many orders (a 90-day overview sorts some 10,000 of them
// into days).
var growingTables = map[string]bool{
	"customers": true, "orders": true, "order_items": true, "payment_attempts": true, "ledger_entries": true,
	"refunds": true, "audit_log": true, "webhook_events": true, "notify_events": true, "notify_deliveries": true,
	"notify_attempts": true, "idempotency_records": true,
}

// pageRows is the most rows a plan may sort: a page and then some.
const pageRows = 1000

func TestGrownDatabase(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		ctx := t.Context()
		u := dbtest.NewURL(t, migrations.Dialect(dialect))
		var rec dbtest.Statements
		plain := openDB(t, u) // the test's own statements, not recorded
		if err := repository.Migrate(ctx, plain); err != nil {
			t.Fatal(err)
		}
		db, err := repository.Open(ctx, u, repository.WithPoolOpener(rec.Opener()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		pool := plain.Pools()["payd"]
		if pool == nil { // SQLite: the writers' pool
			pool = plain.Pools()["write"]
		}
		if _, err := preload.Load(ctx, pool, dialect == "mysql", planOrders, time.Now(), io.Discard); err != nil {
			t.Fatal(err)
		}
		sealer, err := idempotency.NewSealer(testSecretKey)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := sealer.Seal([]byte("whsec_plans"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.ExecContext(ctx, "UPDATE notify_endpoints SET secret_sealed = ? WHERE id = ?", sealed, preload.Endpoint); err != nil {
			t.Fatal(err)
		}

		prov := startProcProvider(t, "")
		cfg, err := loadConfig("serve", nil, paydEnv(u, prov.url, env{"PAYD_RECONCILE_EVERY": "1m", "PAYD_RETENTION": "20d"}).get, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := app.Wire(cfg, db, provider.NewClient(prov.url, provider.WithTimeout(cfg.ProviderTimeout)), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(parts.Echo)
		t.Cleanup(srv.Close)
		api := newDriver(t, "payd", srv.URL)
		w := exerciseWrites(t, api)
		before := time.Now()
		keep, gone := grownRows(t, plain, 20*24*time.Hour, before)
		for what, n := range gone {
			if n == 0 {
				t.Errorf("before the jobs: no %s; the preload should have some for the jobs to remove", what)
			}
		}
		for _, j := range parts.Jobs { // the overview's rollup among them, as a running payd has it
			for pass := 0; ; pass++ { // until a pass finds nothing: a full batch leaves more
				n, err := j.Run(ctx)
				if err != nil {
					t.Errorf("job %s: %v", j.Name, err)
				}
				if n == 0 || err != nil || pass == 100 {
					break
				}
			}
		}
		keptAfter, goneAfter := grownRows(t, plain, 20*24*time.Hour, before)
		if !maps.Equal(keptAfter, keep) {
			t.Errorf("the jobs removed what they must keep:\n got %v\nwant %v", keptAfter, keep)
		}
		for what, n := range goneAfter {
			if n != 0 {
				t.Errorf("after the jobs: %d %s, want none", n, what)
			}
		}
		exerciseReads(t, api, w)

		checked := 0
		for _, st := range rec.All() {
			for _, one := range splitStatements(st) {
				if !planned(one.Query) {
					continue
				}
				checked++
				for _, bad := range badPlan(t, plain, dialect, one) {
					t.Errorf("%s\n  statement: %s", bad, oneLine(one.Query))
				}
			}
		}
		t.Logf("checked the plans of %d statements", checked)
		if checked < 60 {
			t.Errorf("checked the plans of %d statements, want the pay path's, the reads' and the jobs' (60 or more)", checked)
		}
	})
}

// written is what exerciseWrites made, for the reads.
type written struct{ token, paid, key string }

// exerciseWrites drives payd's writes: a buyer's orders and pays (paid,
// declined, replayed, cancelled) and a refund.
func exerciseWrites(t *testing.T, api *driver) written {
	t.Helper()
	_, token := api.register(newEmail())
	paid := api.paidOrder(token, "12.00")
	key := uuid.NewString()
	declined := api.order(token, "7.00")
	for range 2 { // the second is a replay
		if r := api.pay(token, declined, key, "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay(pm_declined) = %d %s, want 402", r.Status, r.Body)
		}
	}
	if r := api.do(request{method: "POST", path: "/v1/orders/" + api.order(token, "3.00") + "/cancel", token: token, key: uuid.NewString()}); r.Status != http.StatusOK {
		t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
	}
	if r := api.refund(paid, uuid.NewString(), "2.00"); r.Status != http.StatusOK {
		t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
	}
	return written{token: token, paid: paid, key: key}
}

// grownRows counts, on db, the rows the jobs must keep and those they
// must remove, by what they are: keep holds the books, whole, and the
// provider events, finished deliveries and order events younger than the
// retention's cutoff, and the idempotency records not yet expired; gone
// holds those older than the cutoff, and the expired records. Both are
// counted from one instant, before, taken before the jobs run, so that
// the counts before and after the jobs compare the same rows. The jobs
// run later, at their own now: a row that ages past a boundary while
// they run is in neither set, so keep's boundaries stand ten minutes
// later than before (the jobs run in less) and gone's a minute earlier.
func grownRows(t *testing.T, db *repository.DB, retention time.Duration, before time.Time) (keep, gone map[string]int64) {
	t.Helper()
	at := func(d time.Duration) string { return before.Add(d).UTC().Format("2006-01-02 15:04:05") }
	keep, gone = map[string]int64{}, map[string]int64{}
	for _, table := range []string{"customers", "orders", "order_items", "payment_attempts", "ledger_entries", "refunds", "audit_log", "disputes"} {
		keep[table] = countRows(t, db, table)
	}
	const jobs = 10 * time.Minute // the jobs finish within this of before
	young, old := at(-retention+jobs), at(-retention-time.Minute)
	keep["provider events applied since the cutoff"] = countRows(t, db, "webhook_events WHERE processed_at >= ?", young)
	gone["provider events applied before it"] = countRows(t, db, "webhook_events WHERE processed_at < ?", old)
	keep["deliveries ended since the cutoff"] = countRows(t, db, "notify_deliveries WHERE status IN ('delivered', 'failed') AND updated_at >= ?", young)
	gone["deliveries ended before it"] = countRows(t, db, "notify_deliveries WHERE status IN ('delivered', 'failed') AND updated_at < ?", old)
	gone["attempt logs of those"] = countRows(t, db, `notify_attempts a WHERE EXISTS (SELECT 1 FROM notify_deliveries d
		WHERE d.id = a.delivery_id AND d.status IN ('delivered', 'failed') AND d.updated_at < ?)`, old)
	keep["order events since the cutoff"] = countRows(t, db, "notify_events WHERE created_at >= ?", young)
	gone["order events before it"] = countRows(t, db, "notify_events WHERE created_at < ?", old)
	keep["idempotency records alive"] = countRows(t, db, "idempotency_records WHERE expires_at >= ?", at(jobs))
	gone["idempotency records expired"] = countRows(t, db, "idempotency_records WHERE expires_at < ?", at(-time.Minute))
	return keep, gone
}

// exerciseReads drives every read of the buyer, the console and payd
// admin, on the preload's rows.
func exerciseReads(t *testing.T, api *driver, w written) {
	t.Helper()
	token, paid, key := w.token, w.paid, w.key
	stamp := func(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339)) }
	now := time.Now()
	window := now.Add(-45 * 24 * time.Hour)
	customer := preload.ID("8001", 77)
	for _, r := range []request{
		{method: "GET", path: "/v1/orders?limit=20", token: token},
		{method: "GET", path: "/v1/orders/" + paid, token: token},
		{method: "GET", path: "/v1/requests/" + key, token: token},
		{method: "GET", path: "/v1/products"},
	} {
		if rep := api.do(r); rep.Status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", r.path, rep.Status, rep.Body)
		}
	}
	for _, path := range []string{
		"/v1/admin/orders?limit=20",
		"/v1/admin/orders?limit=20&cursor=" + preload.ID("8000", planOrders/2),
		"/v1/admin/orders?limit=20&status=expired",
		"/v1/admin/orders?limit=20&customer=" + customer,
		"/v1/admin/orders?limit=20&customer=c77%40preload.example",
		"/v1/admin/orders?limit=20&from=" + stamp(window) + "&to=" + stamp(window.Add(time.Hour)),
		"/v1/admin/orders?limit=20&attempt=failed",
		"/v1/admin/orders?limit=20&attempt=failed&status=paid",
		"/v1/admin/orders/" + paid,
		"/v1/admin/orders/" + preload.ID("8000", 180),
		"/v1/admin/stats?bucket=hour&from=" + stamp(now.Add(-24*time.Hour)),
		"/v1/admin/stats?bucket=day&from=" + stamp(now.Add(-90*24*time.Hour)),
		"/v1/admin/customers?limit=20",
		"/v1/admin/customers?limit=20&cursor=" + customer,
		"/v1/admin/discrepancies?limit=20",
		"/v1/admin/disputes?limit=20",
		"/v1/admin/reconciliations?limit=20",
		"/v1/admin/products",
		"/v1/admin/endpoints",
		"/v1/admin/endpoints/" + preload.Endpoint + "/deliveries?limit=20",
		"/v1/admin/endpoints/" + preload.Endpoint + "/deliveries?limit=20&status=failed",
	} {
		if rep := api.admin("GET", path, "", nil); rep.Status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, rep.Status, rep.Body)
		}
	}
}

// splitStatements splits a multi-statement packet (a pay's claim or
// settlement goes as one, COMMIT included) into its statements, each with
// its own arguments.
func splitStatements(st dbtest.Statement) []dbtest.Statement {
	var out []dbtest.Statement
	args := st.Args
	for _, q := range strings.Split(st.Query, ";") {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		n := strings.Count(q, "?")
		if n > len(args) {
			n = len(args)
		}
		out = append(out, dbtest.Statement{Query: q, Args: args[:n]})
		args = args[n:]
	}
	return out
}

// planned reports whether a statement reads or changes payd's rows (a
// SELECT, UPDATE, DELETE, or INSERT ... SELECT) rather than running the
// session (BEGIN, SET, PRAGMA), the migrations or a plain INSERT.
func planned(q string) bool {
	lower := strings.ToLower(strings.TrimSpace(q))
	switch {
	case strings.Contains(lower, "goose_db_version"), strings.Contains(lower, "information_schema"),
		strings.Contains(lower, "pragma_"), strings.HasPrefix(lower, "select @@"), lower == "select 1":
		return false
	case strings.HasPrefix(lower, "select"), strings.HasPrefix(lower, "update"), strings.HasPrefix(lower, "delete"):
		return true
	case strings.HasPrefix(lower, "insert"):
		return strings.Contains(lower, "select")
	}
	return false
}

// badPlan is what is wrong with st's plan on db: more than pageRows of a
// growing table's rows read or sorted (MariaDB, where a SELECT is run to
// count them), or a whole growing table read or sorted (SQLite, whose
// plan names no counts).
func badPlan(t *testing.T, db *repository.DB, dialect string, st dbtest.Statement) []string {
	t.Helper()
	ctx := context.Background()
	if dialect == "mysql" {
		// A SELECT is run (ANALYZE): the rows it read, not the planner's
		// guess, which a LIMIT makes small for a walk that goes far. A
		// write is only planned (EXPLAIN).
		how := "EXPLAIN "
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(st.Query)), "select") {
			how = "ANALYZE "
		}
		rows, err := db.Gorm().WithContext(ctx).Raw(how+st.Query, st.Args...).Rows()
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", how, err)}
		}
		defer rows.Close()
		var bad []string
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					row[c] = string(b)
				} else {
					row[c] = fmt.Sprint(vals[i])
				}
			}
			bad = append(bad, mysqlPlanProblems(row)...)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return bad
	}
	var plan []struct{ Detail string }
	if err := db.Gorm().WithContext(ctx).Raw("EXPLAIN QUERY PLAN "+st.Query, st.Args...).Scan(&plan).Error; err != nil {
		return []string{fmt.Sprintf("EXPLAIN QUERY PLAN: %v", err)}
	}
	var bad []string
	limited := regexp.MustCompile(`(?i)\blimit\b`).MatchString(st.Query)
	scanned := false
	for _, p := range plan {
		d := p.Detail
		if m := regexp.MustCompile(`^SCAN (\w+)`).FindStringSubmatch(d); m != nil && growingTables[m[1]] {
			scanned = true
			if !strings.Contains(d, "INDEX") || !limited {
				bad = append(bad, "reads the whole table: "+d)
			}
		}
		if strings.Contains(d, "TEMP B-TREE FOR ORDER BY") && scanned {
			bad = append(bad, "sorts a whole table's rows: "+d)
		}
	}
	return bad
}

// mysqlPlanProblems is what is wrong with one row of MariaDB's EXPLAIN.
func mysqlPlanProblems(row map[string]string) []string {
	table := row["table"]
	if !growingTables[table] {
		return nil
	}
	var rowsRead float64
	fmt.Sscan(row["rows"], &rowsRead) //nolint:errcheck // NULL reads as 0
	if r, ok := row["r_rows"]; ok {   // ANALYZE: the rows read, per loop
		rowsRead = 0
		fmt.Sscan(r, &rowsRead) //nolint:errcheck // NULL (never read) reads as 0
	}
	extra := row["Extra"]
	var bad []string
	switch {
	case rowsRead <= pageRows:
	case strings.Contains(extra, "filesort") || strings.Contains(extra, "temporary"):
		bad = append(bad, fmt.Sprintf("sorts %.0f rows of %s: %v", rowsRead, table, row))
	default:
		bad = append(bad, fmt.Sprintf("reads %.0f rows of %s (%s): %v", rowsRead, table, row["type"], row))
	}
	return bad
}

// oneLine is a statement on one line, for a message.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }
