package repository

import (
	"database/sql"
	"reflect"
	"testing"
	"time"
)

// TestExpandArgs: the arguments sent around GORM (exec, batches) reach
// the driver as GORM would send them: []string spread into an IN list
// (an empty one matching nothing), Valuers by their value and NULL for a
// nil pointer to one, and the placeholders counted against the arguments.
func TestExpandArgs(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	var noTime *utcTime
	q, args, err := expandArgs("UPDATE t SET a = ?, b = ?, c = ?, d = ? WHERE s IN ? AND k IN ? AND f = ?",
		[]any{ts(at), noTime, sql.NullString{}, sql.NullString{String: "x", Valid: true}, []string{"p", "q"}, []string{}, true}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE t SET a = ?, b = ?, c = ?, d = ? WHERE s IN (?, ?) AND k IN (NULL) AND f = ?"; q != want {
		t.Errorf("query = %q\nwant    %q", q, want)
	}
	var got []any
	for i, a := range args {
		if a.Ordinal != 3+i {
			t.Errorf("argument %d numbered %d, want %d", i, a.Ordinal, 3+i)
		}
		got = append(got, a.Value)
	}
	if want := []any{"2025-03-01 12:00:00.123456", nil, nil, "x", "p", "q", true}; !reflect.DeepEqual(got, want) {
		t.Errorf("values = %#v\nwant     %#v", got, want)
	}
	for _, bad := range []struct {
		query string
		args  []any
	}{{"a = ? AND b = ?", []any{1}}, {"a = ?", []any{1, 2}}, {"a IN ?", []any{[]int{1}}}} {
		if _, _, err := expandArgs(bad.query, bad.args, 0); err == nil {
			t.Errorf("expandArgs(%q, %v) = nil error, want one", bad.query, bad.args)
		}
	}
}
