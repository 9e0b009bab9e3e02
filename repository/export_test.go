package repository

import (
	"context"
	"strings"
	"time"
)

// OpenSQLiteNoWait opens a SQLite database as Open does, but with SQLite's
// busy handler off (busy_timeout 0): a wait for a lock held by another of
// payd's connections fails at once with SQLITE_BUSY instead of being
// retried, so a test sees every such wait.
func OpenSQLiteNoWait(ctx context.Context, path string) (*DB, error) {
	noWait := func(p string) string { return strings.Replace(p, "busy_timeout(10000)", "busy_timeout(0)", 1) }
	return openSQLiteWith(ctx, path, noWait(sqlitePragmas), noWait(sqliteReadPragmas), openConfig{})
}

// FailAt makes the database's statements and commits call fault first:
// point is "statement" (a write outside or inside a transaction) or
// "commit" (the end of an InTx, before COMMIT); a non-nil error fails that
// step as the database would (a commit's rolls the transaction back). nil
// removes the hook.
func (db *DB) FailAt(fault func(point string) error) {
	if fault == nil {
		db.fault.Store(nil)
		return
	}
	db.fault.Store(&fault)
}

// SetRetry changes the database's retry policy.
func (db *DB) SetRetry(attempts int, base, max time.Duration) {
	db.retry = retryPolicy{attempts: attempts, base: base, max: max}
}

// Exec runs one writing statement as the stores do (in ctx's transaction,
// if any, else under the retry policy) and returns the rows it affected.
func (db *DB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return db.exec(ctx, query, args...)
}

// Classification of driver errors.
var (
	RetryReason = retryReason
	Classify    = classify
)

// BacklogQuery is ReadBacklog's statement and its arguments, for the
// query-plan test.
var BacklogQuery, BacklogArgs = backlogQuery, backlogArgs

// MigrateTo applies db's migrations up to version only, for tests of a
// later migration on rows stored before it.
func MigrateTo(ctx context.Context, db *DB, version int64) error {
	p, err := newMigrator(db, true)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
