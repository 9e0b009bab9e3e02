package repository

import "testing"

// TestGuardedByPrevious pins the text batchMySQL sends after a pay
// transaction's first statement: the store's own statement, acting only
// when the statement before it matched one row.
func TestGuardedByPrevious(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"UPDATE t SET a = ? WHERE id = ? AND s IN ?", "UPDATE t SET a = ? WHERE id = ? AND s IN ? AND ROW_COUNT() = 1"},
		{"UPDATE t\n\t\tSET a = ?\n\t\tWHERE id = ?", "UPDATE t\n\t\tSET a = ?\n\t\tWHERE id = ? AND ROW_COUNT() = 1"},
		{"INSERT INTO t (a, b)\n\tVALUES (?, ?)", "INSERT INTO t (a, b)\n\tSELECT ?, ? FROM DUAL WHERE ROW_COUNT() = 1"},
	} {
		if got, err := guardedByPrevious(tc.in); err != nil || got != tc.want {
			t.Errorf("guardedByPrevious(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, q := range []string{
		"UPDATE t SET a = ?",                     // no WHERE: every row
		"UPDATE t SET a = ? WHERE s = ? LIMIT 1", // the guard would land after LIMIT
		"DELETE FROM t WHERE id = ?",             // not a statement a batch sends
		"INSERT INTO t (a) SELECT a FROM u",      // no VALUES to turn into a SELECT
		"INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = a",
	} {
		if got, err := guardedByPrevious(q); err == nil {
			t.Errorf("guardedByPrevious(%q) = %q, want a refusal", q, got)
		}
	}
	for _, q := range []string{claimOrder, insertAttempt, settleAttempt, markPaid} {
		if _, err := guardedByPrevious(q); err != nil {
			t.Errorf("a pay statement cannot be guarded: %v", err)
		}
	}
}
