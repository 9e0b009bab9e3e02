package repository

import (
	"context"
	"strings"
)

// OpenSQLiteNoWait opens a SQLite database as Open does, but with SQLite's
// busy handler off (busy_timeout 0): a wait for a lock held by another of
// payd's connections fails at once with SQLITE_BUSY instead of being
// retried, so a test sees every such wait.
func OpenSQLiteNoWait(ctx context.Context, path string) (*DB, error) {
	noWait := func(p string) string { return strings.Replace(p, "busy_timeout(10000)", "busy_timeout(0)", 1) }
	return openSQLiteWith(ctx, path, noWait(sqlitePragmas), noWait(sqliteReadPragmas))
}
