package repository

import (
	"context"
	"database/sql"

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
	on := db.on(ctx)
	var n int64
	err := db.retrying(ctx, func() error {
		if err := db.injected("statement"); err != nil {
			return err
		}
		db.countDirect()
		res, err := on.ExecContext(detached(ctx), query, args...)
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
	db.countDirect()
	rows, err := db.on(ctx).QueryContext(detached(ctx), query, args...)
	return rows, classify(err)
}

// queryRow sends a read of one row; its Scan reports sql.ErrNoRows when
// there is none.
func (db *DB) queryRow(ctx context.Context, query string, args ...any) singleRow {
	db.countDirect()
	return singleRow{row: db.on(ctx).QueryRowContext(detached(ctx), query, args...)}
}

// singleRow is queryRow's answer: a *sql.Row whose errors are classified
// (classify) like every other statement's.
type singleRow struct{ row *sql.Row }

// Scan copies the row's columns into dest.
func (r singleRow) Scan(dest ...any) error { return classify(r.row.Scan(dest...)) }

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
