package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// executor is what a statement payd writes out is sent on, the same on
// the pool and inside a transaction: outside one, the pool (*sql.DB on
// MySQL; sqlitePools on SQLite, which sends reads to its readers and
// everything else to its one writer); inside one, the transaction's
// *sql.Tx. It is the part of gorm.ConnPool payd uses, so the statements
// GORM builds (models, filtered lists) go out on the same connection and
// in the same transaction. See docs/adr/0033-one-way-to-sql.md.
type executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ executor = (*sql.DB)(nil)
	_ executor = (*sql.Tx)(nil)
	_ executor = sqlitePools{}
)

// on returns the executor ctx's statements run on: ctx's transaction on
// this database if there is one, else the pool.
func (db *DB) on(ctx context.Context) executor {
	if tx, ok := ctx.Value(txKey{db}).(*gorm.DB); ok {
		return tx.Statement.ConnPool
	}
	return db.pool
}

// exec sends one writing statement and returns the rows it matched
// (RowsAffected counts matched rows on both databases: clientFoundRows on
// MySQL). Outside a transaction it runs under the retry policy; inside
// one, a conflict is the transaction's to retry (retrying). Like every
// statement, it runs detached.
func (db *DB) exec(ctx context.Context, query string, args ...any) (int64, error) {
	q, values, err := spread(query, args)
	if err != nil {
		return 0, err
	}
	on := db.on(ctx)
	var n int64
	err = db.retrying(ctx, func() error {
		if err := db.injected("statement"); err != nil {
			return err
		}
		db.countDirect()
		res, err := on.ExecContext(detached(ctx), q, values...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, classify(err)
}

// query sends a read of any number of rows.
func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q, values, err := spread(query, args)
	if err != nil {
		return nil, err
	}
	db.countDirect()
	rows, err := db.on(ctx).QueryContext(detached(ctx), q, values...)
	return rows, classify(err)
}

// queryRow sends a read of one row; its Scan reports sql.ErrNoRows when
// there is none.
func (db *DB) queryRow(ctx context.Context, query string, args ...any) singleRow {
	q, values, err := spread(query, args)
	if err != nil {
		return singleRow{err: err}
	}
	db.countDirect()
	return singleRow{row: db.on(ctx).QueryRowContext(detached(ctx), q, values...)}
}

// singleRow is queryRow's answer: a *sql.Row whose errors are classified
// (classify) like every other statement's.
type singleRow struct {
	row *sql.Row
	err error
}

// Scan copies the row's columns into dest.
func (r singleRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return classify(r.row.Scan(dest...))
}

// countDirect tells the OnDirectStatement hooks of one statement.
func (db *DB) countDirect() {
	if hooks := db.direct.Load(); hooks != nil {
		for _, f := range *hooks {
			f()
		}
	}
}

// OnDirectStatement has f called for every statement sent on the executor
// (exec, query, queryRow, and each of a batch's on SQLite) rather than
// built by GORM, so that a statement counter built on GORM's callbacks
// sees those too (internal/dbtest). Each call adds one more f.
func (db *DB) OnDirectStatement(f func()) {
	for {
		old := db.direct.Load()
		var hooks []func()
		if old != nil {
			hooks = append(hooks, *old...)
		}
		hooks = append(hooks, f)
		if db.direct.CompareAndSwap(old, &hooks) {
			return
		}
	}
}

// spread returns query and args as the executor sends them: a statement
// with a []string argument (a status IN ? guard) has it spread into an IN
// list (expandArgs); any other is sent as it is, and database/sql
// converts its arguments.
func spread(query string, args []any) (string, []any, error) {
	if !slices.ContainsFunc(args, isList) {
		return query, args, nil
	}
	q, named, err := expandArgs(query, args, 0)
	if err != nil {
		return "", nil, err
	}
	values := make([]any, len(named))
	for i, v := range named {
		values[i] = v.Value
	}
	return q, values, nil
}

func isList(arg any) bool {
	_, ok := arg.([]string)
	return ok
}

// expandArgs numbers query's arguments from offset for the driver and
// spreads each []string argument into an IN list: "IN ?" with two values
// becomes "IN (?, ?)", and with none "IN (NULL)", which matches nothing.
// Other arguments are converted as database/sql converts them; a slice
// other than []string or []byte is not a list here and fails. Store
// queries hold no '?' but their placeholders. The executor (spread) and
// the MySQL packets (batchMySQL, which hands the driver its arguments
// itself) use it.
func expandArgs(query string, args []any, offset int) (string, []driver.NamedValue, error) {
	var b strings.Builder
	out := make([]driver.NamedValue, 0, len(args))
	next := 0
	add := func(v any) error {
		// The driver's default conversion, as database/sql applies it:
		// a Valuer's Value (NULL for a nil pointer to one), pointers
		// dereferenced, basic kinds to int64, float64, bool, string.
		v, err := driver.DefaultParameterConverter.ConvertValue(v)
		if err != nil {
			return err
		}
		out = append(out, driver.NamedValue{Ordinal: offset + len(out) + 1, Value: v})
		return nil
	}
	for _, r := range query {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		if next >= len(args) {
			return "", nil, fmt.Errorf("more placeholders than arguments in %q", query)
		}
		arg := args[next]
		next++
		list, ok := arg.([]string)
		if !ok {
			b.WriteByte('?')
			if err := add(arg); err != nil {
				return "", nil, err
			}
			continue
		}
		if len(list) == 0 {
			b.WriteString("(NULL)") // as GORM writes an empty list: matches nothing
			continue
		}
		b.WriteByte('(')
		for i, v := range list {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			if err := add(v); err != nil {
				return "", nil, err
			}
		}
		b.WriteByte(')')
	}
	if next != len(args) {
		return "", nil, fmt.Errorf("%d arguments for %d placeholders in %q", len(args), next, query)
	}
	return b.String(), out, nil
}

// detached is ctx without its cancellation and deadline, for the drivers.
// Given a context that can be cancelled, both drivers start watching it
// for every statement — the MySQL driver hands it to a goroutine per
// connection and takes it back after, SQLite starts one per statement —
// and those wake-ups cost more CPU than the round trip itself
// (docs/performance.md). So statements run detached (ADR 0034): a statement
// is bounded by the connection's read and write timeouts (30 s unless the
// URL says otherwise) and by the database's own lock wait timeout, not by
// the request. The retry policy's waits still end with ctx, and a client
// that hangs up no longer cuts a statement, or a transaction, in half.
func detached(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
