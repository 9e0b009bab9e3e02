package repository

import (
	"strings"
	"testing"
)

// TestGuardedByPrevious pins the text batchMySQL sends after a pay
// transaction's first statement: the store's own statement, acting only
// when the statement before it matched one row.
func TestGuardedByPrevious(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"UPDATE t SET a = ? WHERE id = ? AND s IN ?", "UPDATE t SET a = ? WHERE (id = ? AND s IN ?) AND ROW_COUNT() = 1"},
		{"UPDATE t SET a = ? WHERE a = ? OR b = ?", "UPDATE t SET a = ? WHERE (a = ? OR b = ?) AND ROW_COUNT() = 1"},
		{"UPDATE t\n\t\tSET a = ?\n\t\tWHERE id = ?", "UPDATE t\n\t\tSET a = ?\n\t\tWHERE (id = ?) AND ROW_COUNT() = 1"},
		{"INSERT INTO t (a, b)\n\tVALUES (?, ?)", "INSERT INTO t (a, b)\n\tSELECT ?, ? FROM DUAL WHERE ROW_COUNT() = 1"},
		{"INSERT INTO t (a, b) SELECT ?, c FROM u WHERE id = ?", "INSERT INTO t (a, b) SELECT ?, c FROM u WHERE (id = ?) AND ROW_COUNT() = 1"},
	} {
		if got, err := guardedByPrevious(tc.in); err != nil || got != tc.want {
			t.Errorf("guardedByPrevious(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, q := range []string{
		"UPDATE t SET a = ?", // no WHERE: every row
		"UPDATE t SET a = (SELECT b FROM u WHERE id = ?), c = ?",        // the WHERE is a subquery's
		"UPDATE t SET a = ? WHERE id IN (SELECT id FROM u WHERE b = ?)", // the last WHERE is a subquery's
		"UPDATE t SET a = ? WHERE s = ? LIMIT 1",                        // the guard would land after LIMIT
		"update t set a = ? where s = ? limit 1",                        // in lower case too
		"DELETE FROM t WHERE id = ?",                                    // not a statement a batch sends
		"INSERT INTO t (a) SELECT a FROM u",                             // no WHERE, no VALUES
		"INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = a",
	} {
		if got, err := guardedByPrevious(q); err == nil {
			t.Errorf("guardedByPrevious(%q) = %q, want a refusal", q, got)
		}
	}
	// What the pay packets send after their first statement.
	for q, want := range map[string]string{
		insertAttempt: strings.TrimSpace(insertAttempt[:strings.LastIndex(insertAttempt, "VALUES (")]) +
			" SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1",
		markPaid: strings.TrimSpace(markPaid[:strings.LastIndex(markPaid, "WHERE ")]) +
			" WHERE (id = ? AND status IN ? AND pay_request_id = ?) AND ROW_COUNT() = 1",
	} {
		got, err := guardedByPrevious(q)
		if err != nil || strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(want), " ") {
			t.Errorf("guardedByPrevious(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
}
