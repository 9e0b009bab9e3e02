package telemetry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"strings"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/payd/payd/repository"
)

// DatabaseOptions have repository.Open wrap payd's pools in otelsql when
// tracing is on: a client span per statement, a child of the request's
// span. Off, there are none, and the pools are database/sql's own,
// unwrapped.
//
// A span carries db.system.name, db.namespace, server.address and
// server.port (poolAttributes), db.operation.name (SELECT,
// INSERT, UPDATE, DELETE, BEGIN, COMMIT, …; BATCH for the MySQL packets
// of ADR 0034) and db.query.text, the statement as payd wrote it: every
// value in it is a ? placeholder, and the bound arguments are never
// recorded (ADR 0035). An error is recorded as its type (error.type), not
// its message: a driver's message may quote a value (MySQL's "Duplicate
// entry '…'"). Statements outside any span — background polls — make
// none (parentOnly).
func (t Tracing) DatabaseOptions() []repository.Option {
	if !t.On() {
		return nil
	}
	tp := parentOnly{tp: t.tp}
	return []repository.Option{repository.WithPoolOpener(func(c driver.Connector, p repository.Pool) *sql.DB {
		return otelsql.OpenDB(c,
			otelsql.WithTracerProvider(tp),
			otelsql.WithMeterProvider(noop.NewMeterProvider()), // payd's metrics are Prometheus's
			otelsql.WithAttributes(poolAttributes(c, p)...),
			otelsql.WithSpanNameFormatter(func(_ context.Context, m otelsql.Method, query string) string {
				return dbOperation(m, query)
			}),
			otelsql.WithAttributesGetter(func(_ context.Context, m otelsql.Method, query string, _ []driver.NamedValue) []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String("db.operation.name", dbOperation(m, query))}
			}),
			otelsql.WithSpanErrorAttributesGetter(func(err error) []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String("error.type", reflect.TypeOf(err).String())}
			}),
			otelsql.WithSpanOptions(otelsql.SpanOptions{
				DisableErrSkip:       true,
				RecordError:          func(error) bool { return false }, // the message may quote a value
				OmitConnResetSession: true,
				OmitConnPrepare:      true,
				OmitRows:             true,
				OmitConnectorConnect: true,
			}))
	})}
}

// poolAttributes are what every statement's span of a pool says of its
// database: db.system.name, db.namespace, and the server's address and
// port when it has one (SQLite has none).
func poolAttributes(c driver.Connector, p repository.Pool) []attribute.KeyValue {
	system := p.System
	if system == "mysql" {
		system = mysqlFlavour(c)
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", system), attribute.String("db.namespace", p.Namespace)}
	if p.Address != "" {
		attrs = append(attrs, attribute.String("server.address", p.Address))
	}
	if p.Port != 0 {
		attrs = append(attrs, attribute.Int("server.port", p.Port))
	}
	return attrs
}

// mysqlFlavour is db.system.name for a MySQL-protocol server: "mariadb"
// when its version says MariaDB, as the conventions name it apart, else
// "mysql" (also when it cannot be asked within two seconds: the spans
// then say mysql, which the protocol is).
func mysqlFlavour(c driver.Connector) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := c.Connect(ctx)
	if err != nil {
		return "mysql"
	}
	defer conn.Close()
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return "mysql"
	}
	rows, err := q.QueryContext(ctx, "SELECT VERSION()", nil)
	if err != nil {
		return "mysql"
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if rows.Next(v) != nil {
		return "mysql"
	}
	var version string
	switch x := v[0].(type) {
	case []byte:
		version = string(x)
	case string:
		version = x
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}

// dbOperation is a statement's operation: its first keyword (SELECT,
// INSERT, …), BATCH for a packet that starts a transaction and runs
// several, or the transaction's step for the methods without text.
func dbOperation(m otelsql.Method, query string) string {
	switch m {
	case otelsql.MethodConnBeginTx:
		return "BEGIN"
	case otelsql.MethodTxCommit:
		return "COMMIT"
	case otelsql.MethodTxRollback:
		return "ROLLBACK"
	case otelsql.MethodConnPing:
		return "PING"
	}
	q := strings.TrimLeft(query, " \t\r\n(")
	end := strings.IndexAny(q, " \t\r\n(;")
	if end < 0 {
		end = len(q)
	}
	op := strings.ToUpper(q[:end])
	if op == "START" && strings.Contains(query, ";") {
		return "BATCH"
	}
	if op == "" {
		return string(m)
	}
	return op
}

// Redis instruments a Redis client payd made when tracing is on: a client
// span per command or pipeline, a child of the request's span, named
// after the command, with db.system.name "redis", server.address and
// server.port, as the current conventions name them (redisConventions).
// The command's arguments (keys, values: tokens and idempotency keys
// among them) are never recorded, nor the caller's source line; dials
// make no span. Commands outside a traced request — background
// subscriptions and health checks — make none (parentOnly).
func (t Tracing) Redis(c redis.UniversalClient) error {
	if !t.On() {
		return nil
	}
	return redisotel.InstrumentTracing(c,
		redisotel.WithTracerProvider(redisConventions{tp: parentOnly{tp: t.tp}}),
		redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false),
		redisotel.WithDialFilter(true))
}

// redisConventions is a tracer provider that puts redisotel's spans on the
// current semantic conventions: its db.system becomes db.system.name, as
// on payd's SQL spans, its db.connection_string (deprecated, and a copy of
// server.address and server.port) is left out, and the command is named
// in db.operation.name and the span's name (redisOperation).
type redisConventions struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p redisConventions) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return redisConventionsTracer{t: p.tp.Tracer(name, opts...)}
}

type redisConventionsTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t redisConventionsTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	attrs := make([]attribute.KeyValue, 0, len(cfg.Attributes()))
	for _, a := range cfg.Attributes() {
		switch a.Key {
		case "db.connection_string":
			continue
		case "db.system":
			a = attribute.String("db.system.name", a.Value.String())
		}
		attrs = append(attrs, a)
	}
	out := []trace.SpanStartOption{trace.WithAttributes(attrs...), trace.WithSpanKind(cfg.SpanKind()), trace.WithLinks(cfg.Links()...)}
	if ts := cfg.Timestamp(); !ts.IsZero() {
		out = append(out, trace.WithTimestamp(ts))
	}
	if cfg.NewRoot() {
		out = append(out, trace.WithNewRoot())
	}
	op := redisOperation(name)
	out = append(out, trace.WithAttributes(attribute.String("db.operation.name", op)))
	return t.t.Start(ctx, op, out...)
}

// redisOperation is db.operation.name, and the span's name, for redisotel's
// span name: the command as Redis spells it (GET, EVALSHA), or PIPELINE
// for a pipeline of several.
func redisOperation(name string) string {
	if strings.HasPrefix(name, "pipeline") {
		return "PIPELINE"
	}
	return strings.ToUpper(name)
}

// parentOnly is a tracer provider whose tracers start a span only inside
// another: a statement or a command sent outside any traced request or
// job gets the context's no-op span back.
type parentOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p parentOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return parentOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type parentOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t parentOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, opts...)
}
