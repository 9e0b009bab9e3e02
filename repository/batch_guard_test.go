package repository

import (
	"strings"
	"testing"
)

// TestPacketStatements holds each statement PayBatch's packets send after
// their first to its store's statement: the same statement, the same
// arguments, acting only when the statement before it matched one row.
// An UPDATE has "AND ROW_COUNT() = 1" after its condition (before a GROUP
// BY); an INSERT's VALUES become a SELECT of the same values FROM DUAL
// WHERE ROW_COUNT() = 1.
func TestPacketStatements(t *testing.T) {
	const guard = "ROW_COUNT() = 1"
	fromValues := func(insert string) string {
		i := strings.LastIndex(insert, "VALUES (")
		if i < 0 || !strings.HasSuffix(insert, ")") {
			t.Fatalf("%q is not an INSERT ... VALUES (...)", insert)
		}
		return insert[:i] + "SELECT " + insert[i+len("VALUES ("):len(insert)-1] + " FROM DUAL WHERE " + guard
	}
	for _, tc := range []struct{ name, got, want string }{
		{"insertAttemptIfClaimed", insertAttemptIfClaimed, fromValues(insertAttempt)},
		{"insertLedgerEntryIfSettled", insertLedgerEntryIfSettled, fromValues(insertLedgerEntry)},
		{"markPaidIfBooked", markPaidIfBooked, markPaid + " AND " + guard},
		{"markPaidAtIfBooked", markPaidAtIfBooked, markPaidAt + " AND " + guard},
		{"insertEventIfChanged", insertEventIfChanged, strings.TrimSuffix(insertEvent, eventGroup) + " AND " + guard + eventGroup},
		{"insertPaidEventIfPaid", insertPaidEventIfPaid, fromValues(insertPaidEvent)},
	} {
		if oneLine(tc.got) != oneLine(tc.want) {
			t.Errorf("%s = %q\nwant %q", tc.name, oneLine(tc.got), oneLine(tc.want))
		}
	}
}

// oneLine is query with every run of white space one space.
func oneLine(query string) string { return strings.Join(strings.Fields(query), " ") }
