package repository

import (
	"database/sql"
	"database/sql/driver"
	"reflect"
	"testing"
	"time"
)

// TestAppendArgs: a packet's arguments reach the driver as database/sql
// sends the executor's: Valuers by their value and NULL for a nil pointer
// to one, numbered on from the statements before them; a list is no
// argument.
func TestAppendArgs(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	var noTime *utcTime
	args, err := appendArgs([]driver.NamedValue{{Ordinal: 1, Value: "a"}, {Ordinal: 2, Value: "b"}},
		[]any{ts(at), noTime, sql.NullString{}, sql.NullString{String: "x", Valid: true}, true, int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	for i, a := range args {
		if a.Ordinal != 1+i {
			t.Errorf("argument %d numbered %d, want %d", i, a.Ordinal, 1+i)
		}
		got = append(got, a.Value)
	}
	if want := []any{"a", "b", "2025-03-01 12:00:00.123456", nil, nil, "x", true, int64(7)}; !reflect.DeepEqual(got, want) {
		t.Errorf("values = %#v\nwant     %#v", got, want)
	}
	if _, err := appendArgs(nil, []any{[]string{"p"}}); err == nil {
		t.Error("appendArgs of a list = nil error, want one")
	}
}
