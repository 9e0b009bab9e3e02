package repository

import (
	"slices"
	"testing"
	"time"
)

func TestUTCTimeValue(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*60*60)
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), "2025-03-01 12:00:00.000000"},
		{time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC), "2025-03-01 12:00:00.123456"},
		{time.Date(2025, 3, 1, 21, 0, 0, 5000, tokyo), "2025-03-01 12:00:00.000005"},
	}
	for _, tt := range tests {
		got, err := ts(tt.in).Value()
		if err != nil || got != tt.want {
			t.Errorf("ts(%v).Value() = %v, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestUTCTimeScan(t *testing.T) {
	want := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	tests := []any{
		want,
		want.In(time.FixedZone("CET", 3600)),
		"2025-03-01 12:00:00.123456",
		[]byte("2025-03-01 12:00:00.123456"),
		"2025-03-01T13:00:00.123456+01:00",
	}
	for _, src := range tests {
		var got utcTime
		if err := got.Scan(src); err != nil || !got.time().Equal(want) || got.time().Location() != time.UTC {
			t.Errorf("Scan(%v) = %v, %v, want %v", src, got.time(), err, want)
		}
	}
	for _, bad := range []any{nil, 42, "yesterday"} {
		var got utcTime
		if err := got.Scan(bad); err == nil {
			t.Errorf("Scan(%v) = nil error, want an error", bad)
		}
	}
}

// TestUTCTimeSortsAsText is why timestamps are fixed width: SQLite compares
// them as text, which must be the same as comparing them as times, down to
// the microsecond and across digit-count changes.
func TestUTCTimeSortsAsText(t *testing.T) {
	base := time.Date(2025, 12, 31, 23, 59, 59, 999999000, time.UTC)
	times := []time.Time{
		base, base.Add(time.Microsecond), base.Add(-time.Microsecond),
		base.Add(-9 * time.Second), base.Add(time.Hour), time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(1, 0, 0),
		time.Date(2025, 1, 1, 0, 0, 0, 100000000, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 99999000, time.UTC),
	}
	texts := make([]string, len(times))
	for i, tm := range times {
		v, _ := ts(tm).Value()
		texts[i] = v.(string)
	}
	slices.SortFunc(times, time.Time.Compare)
	slices.Sort(texts)
	for i := range times {
		if v, _ := ts(times[i]).Value(); v != texts[i] {
			t.Errorf("text order [%d] = %s, time order %s", i, texts[i], v)
		}
	}
}
