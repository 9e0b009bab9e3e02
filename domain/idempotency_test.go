package domain_test

import (
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

// TestRecordGone: a record is gone once it expired, unless it is a
// processing record whose lease is still running (someone's lock).
func TestRecordGone(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	before, after := now.Add(-time.Second), now.Add(time.Second)
	tests := []struct {
		status         domain.RecordStatus
		expires, until time.Time
		want           bool
	}{
		{domain.RecordSucceeded, after, before, false},
		{domain.RecordSucceeded, now, before, false}, // expires_at < now, strictly, as the purge's SQL
		{domain.RecordSucceeded, before, before, true},
		{domain.RecordFailed, before, after, true},
		{domain.RecordProcessing, before, before, true},
		{domain.RecordProcessing, before, after, false},
		{domain.RecordProcessing, after, before, false},
	}
	for _, tt := range tests {
		r := domain.Record{Status: tt.status, ExpiresAt: tt.expires, LockedUntil: tt.until}
		if got := r.Gone(now); got != tt.want {
			t.Errorf("Record{%s, expires %s, locked until %s}.Gone(%s) = %v, want %v",
				tt.status, tt.expires.Format(time.TimeOnly), tt.until.Format(time.TimeOnly), now.Format(time.TimeOnly), got, tt.want)
		}
	}
}
