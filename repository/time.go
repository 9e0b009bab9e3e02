package repository

import (
	"database/sql/driver"
	"fmt"
	"time"
)

// timeLayout is how every timestamp is written: UTC, fixed width, with
// microseconds. MySQL reads it into DATETIME(6); SQLite keeps it as TEXT,
// where fixed width makes comparing strings the same as comparing times
// (locked_until < ?, expires_at <= ?). Nanoseconds are truncated.
const timeLayout = "2006-01-02 15:04:05.000000"

// utcTime is a timestamp column. Every time value that reaches SQL, as a
// column or as a WHERE argument, goes through it: a bare time.Time would be
// written by the SQLite driver in its String() form, which neither sorts nor
// compares with the stored text.
type utcTime time.Time

// ts converts t for use as a column value or SQL argument.
func ts(t time.Time) utcTime { return utcTime(t) }

// Value writes the fixed-width UTC form.
func (t utcTime) Value() (driver.Value, error) {
	return time.Time(t).UTC().Format(timeLayout), nil
}

// Scan reads what either driver returns: time.Time from MySQL (parseTime),
// text from SQLite.
func (t *utcTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*t = utcTime(v.UTC())
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	}
	return fmt.Errorf("scan timestamp: unsupported type %T", src)
}

func (t *utcTime) parse(s string) error {
	// Parsing accepts any fraction (or none) after the seconds.
	p, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
	if err != nil {
		if p, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("scan timestamp %q: %w", s, err)
		}
	}
	*t = utcTime(p.UTC())
	return nil
}

// time returns the value as a UTC time.Time.
func (t utcTime) time() time.Time { return time.Time(t).UTC() }

// tsPtr converts an optional time: nil is SQL NULL.
func tsPtr(t *time.Time) *utcTime {
	if t == nil {
		return nil
	}
	u := utcTime(*t)
	return &u
}

// timePtr is the inverse of tsPtr.
func timePtr(t *utcTime) *time.Time {
	if t == nil {
		return nil
	}
	v := t.time()
	return &v
}
