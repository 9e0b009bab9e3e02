package repository

import (
	"context"
	"fmt"
)

// guarded runs one guarded statement — an UPDATE or DELETE whose WHERE
// clause holds every condition it may run under — and reports whether it
// matched its row. Under concurrency the database decides: exactly one
// caller's statement matches, every other caller's matches nothing and
// reports false. RowsAffected counts matched rows on both databases
// (clientFoundRows on MySQL), so "affected 1" means "the guard held" even
// when the new values equal the old. what names the statement in an error,
// as in "claim order o_1". Outside a transaction a conflict runs the
// statement again (retrying): it then matches nothing if the winner's
// write changed the row, as on one server.
func (db *DB) guarded(ctx context.Context, what act, query string, args ...any) (bool, error) {
	n, err := db.exec(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return n == 1, nil
}

// act names a guarded statement for an error — what it does and to which
// row, act{"claim order", id} — and is written out only if there is one.
type act struct{ does, row string }

// String is the act as an error tells it: "claim order o_1".
func (a act) String() string { return a.does + " " + a.row }

// names turns statuses into the strings a GORM list filter's "status IN ?"
// binds (GORM spreads a list itself; the statements payd writes out have
// their statuses in their text).
func names[S ~string](statuses []S) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}
