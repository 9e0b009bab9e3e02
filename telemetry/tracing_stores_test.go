package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/XSAM/otelsql"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestDatabaseSpans: with tracing on, each statement sent inside a span is
// a client span beneath it, with the database's system, namespace and the
// statement's operation; no bound value — not even one a driver's error
// message quotes — is in any attribute or event; statements outside a
// span make none.
func TestDatabaseSpans(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		rec := tracetest.NewSpanRecorder()
		otelEnv(t, nil)
		tr, err := StartTracing(context.Background(), TracingConfig{Provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		db, err := repository.Open(ctx, dbtest.NewURL(t, d), tr.DatabaseOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		g := db.Gorm()
		if err := g.WithContext(ctx).Exec("CREATE TABLE secrets (k VARCHAR(64) PRIMARY KEY, amount_minor BIGINT)").Error; err != nil {
			t.Fatal(err)
		}
		if n := len(rec.Ended()); n != 0 {
			t.Fatalf("%d spans for statements outside any span, want none", n)
		}

		const secret, amount = "tok_5f2c9e1ab7d04e3b", 731942
		ctx, parent := tr.tp.Tracer("test").Start(ctx, "request")
		if err := g.WithContext(ctx).Exec("INSERT INTO secrets (k, amount_minor) VALUES (?, ?)", secret, amount).Error; err != nil {
			t.Fatal(err)
		}
		if err := g.WithContext(ctx).Exec("INSERT INTO secrets (k, amount_minor) VALUES (?, ?)", secret, amount).Error; err == nil {
			t.Fatal("duplicate insert succeeded")
		}
		var n int64
		if err := g.WithContext(ctx).Raw("SELECT COUNT(*) FROM secrets WHERE k = ?", secret).Scan(&n).Error; err != nil || n != 1 {
			t.Fatalf("count = %d, %v", n, err)
		}
		parent.End()

		system := map[migrations.Dialect]string{migrations.SQLite: "sqlite", migrations.MySQL: "mysql"}[d]
		if d == migrations.MySQL { // the conventions name MariaDB apart
			var version string
			if err := g.Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToLower(version), "mariadb") {
				system = "mariadb"
			}
		}
		var ops []string
		failed := false
		for _, s := range rec.Ended() {
			if s.Name() == "request" {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					attrs["event."+string(kv.Key)] = kv.Value.String()
				}
			}
			attrs["status"] = s.Status().Description
			for k, v := range attrs {
				if strings.Contains(v, secret) || strings.Contains(v, "731942") {
					t.Errorf("span %s: %s = %q holds a bound value", s.Name(), k, v)
				}
			}
			if s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("span %s: kind %v under %s, want a client span under the request's", s.Name(), s.SpanKind(), s.Parent().SpanID())
			}
			if attrs["db.system.name"] != system || attrs["db.namespace"] == "" || attrs["db.operation.name"] != s.Name() {
				t.Errorf("span %s: attributes %v, want db.system.name %s, db.namespace and db.operation.name", s.Name(), attrs, system)
			}
			if attrs["error.type"] != "" {
				failed = true
			}
			ops = append(ops, s.Name())
		}
		if strings.Join(ops, " ") != "INSERT INSERT SELECT" || !failed {
			t.Errorf("spans %v (an error marked: %v), want INSERT INSERT SELECT, the second with its error.type", ops, failed)
		}
	})
}

// TestTracingOffWrapsNothing: off, the database is opened without a pool
// opener and the Redis client gets no hook.
func TestTracingOffWrapsNothing(t *testing.T) {
	otelEnv(t, nil)
	tr, err := StartTracing(context.Background(), TracingConfig{})
	if err != nil || tr.On() {
		t.Fatalf("StartTracing = on %v, %v; want off", tr.On(), err)
	}
	if opts := tr.DatabaseOptions(); opts != nil {
		t.Errorf("DatabaseOptions() = %d options, want none", len(opts))
	}
	if err := tr.Redis(nil); err != nil { // a nil client: touched, it would panic
		t.Errorf("Redis(nil) = %v", err)
	}
}

// TestDBOperation: a span's operation is the statement's first keyword,
// BATCH for a packet, the step for a transaction's methods.
func TestDBOperation(t *testing.T) {
	for _, c := range []struct {
		m     otelsql.Method
		query string
		want  string
	}{
		{otelsql.MethodConnQuery, "SELECT id FROM orders WHERE id = ?", "SELECT"},
		{otelsql.MethodConnExec, "\n\t  update orders SET status = ?", "UPDATE"},
		{otelsql.MethodConnExec, "INSERT INTO `orders` (`id`) VALUES (?)", "INSERT"},
		{otelsql.MethodConnExec, "(SELECT 1)", "SELECT"},
		{otelsql.MethodConnExec, "START TRANSACTION; UPDATE orders SET x = ?; COMMIT", "BATCH"},
		{otelsql.MethodConnExec, "START TRANSACTION", "START"},
		{otelsql.MethodConnExec, "PRAGMA journal_mode = WAL", "PRAGMA"},
		{otelsql.MethodConnBeginTx, "", "BEGIN"},
		{otelsql.MethodTxCommit, "", "COMMIT"},
		{otelsql.MethodTxRollback, "", "ROLLBACK"},
		{otelsql.MethodConnExec, "", "sql.conn.exec"},
	} {
		if got := dbOperation(c.m, c.query); got != c.want {
			t.Errorf("dbOperation(%s, %q) = %q, want %q", c.m, c.query, got, c.want)
		}
	}
}

// BenchmarkStatementTraced is what a span costs one statement: the same
// read on a pool opened plainly (tracing off) and through otelsql inside a
// request's span (on, spans dropped by a no-op exporter).
//
//	go test -run '^$' -bench BenchmarkStatementTraced -benchmem ./telemetry
func BenchmarkStatementTraced(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			var tr Tracing
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				tr = Tracing{tp: tp}
			}
			db, err := repository.Open(b.Context(), dbtest.NewURL(b, migrations.SQLite), tr.DatabaseOptions()...)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			if on {
				var span trace.Span
				ctx, span = tr.tp.Tracer("bench").Start(ctx, "request")
				defer span.End()
			}
			g := db.Gorm()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var n int64
				if err := g.WithContext(ctx).Raw("SELECT ?", 1).Scan(&n).Error; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
