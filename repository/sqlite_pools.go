package repository

import (
	"context"
	"database/sql"
	"strings"

	"gorm.io/gorm"
)

// sqlitePools is the connection pool GORM and the executor see on SQLite
// outside a transaction: two database/sql pools on the same file, and
// every statement sent to the right one.
//
//   - write has a single connection. Every transaction and every statement
//     that may write runs on it, so payd's writers queue in Go's pool (a
//     FIFO hand-off, woken at once) and never meet another payd connection
//     on SQLite's write lock, whose busy handler waits by sleeping and
//     polling, up to 100 ms a try.
//   - read has several query_only connections for SELECTs outside a
//     transaction; under WAL they run beside the writer and never block it.
//
// A statement is a read only if it begins with SELECT; anything else
// (INSERT … RETURNING, PRAGMA, WITH …) goes to the writer. A write sent to
// a reader by mistake fails loudly (query_only) instead of contending.
type sqlitePools struct {
	write, read *sql.DB
}

var (
	_ gorm.ConnPool       = sqlitePools{}
	_ gorm.TxBeginner     = sqlitePools{}
	_ gorm.GetDBConnector = sqlitePools{}
)

func (p sqlitePools) pick(query string) *sql.DB {
	if isSelect(query) {
		return p.read
	}
	return p.write
}

// isSelect reports whether query is a plain SELECT.
func isSelect(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "select")
}

func (p sqlitePools) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.pick(query).PrepareContext(ctx, query)
}

func (p sqlitePools) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.write.ExecContext(ctx, query, args...)
}

func (p sqlitePools) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.pick(query).QueryContext(ctx, query, args...)
}

func (p sqlitePools) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.pick(query).QueryRowContext(ctx, query, args...)
}

// BeginTx begins every transaction on the writer (BEGIN IMMEDIATE, see
// sqlitePragmas), reads included: a transaction is serializable only if it
// holds the write lock from its start.
func (p sqlitePools) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return p.write.BeginTx(ctx, opts)
}

// GetDBConn is the pool GORM's DB() returns: the writer.
func (p sqlitePools) GetDBConn() (*sql.DB, error) { return p.write, nil }
