package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

// TestNewStatsWindow: the defaults (to now, from a day before, hour
// buckets up to 48 hours and day buckets beyond), the buckets a window
// touches, aligned to UTC hours and midnights, and the refusals.
func TestNewStatsWindow(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	h := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name     string
		from, to time.Time
		bucket   string
		want     domain.StatsWindow
		first    time.Time
		buckets  int
		field    string // the invalid field; "" when valid
	}{
		{"defaults", time.Time{}, time.Time{}, "", domain.StatsWindow{From: now.Add(-24 * time.Hour), To: now, Bucket: domain.BucketHour}, h("2026-12-01T10:00:00Z"), 25, ""},
		{"48 hours is hourly", now.Add(-48 * time.Hour), time.Time{}, "", domain.StatsWindow{From: now.Add(-48 * time.Hour), To: now, Bucket: domain.BucketHour}, h("2026-11-30T10:00:00Z"), 49, ""},
		{"beyond 48 hours is daily", now.Add(-48*time.Hour - time.Second), time.Time{}, "", domain.StatsWindow{From: now.Add(-48*time.Hour - time.Second), To: now, Bucket: domain.BucketDay}, h("2026-11-30T00:00:00Z"), 3, ""},
		{"aligned", h("2026-12-01T00:00:00Z"), h("2026-12-03T00:00:00Z"), "day", domain.StatsWindow{From: h("2026-12-01T00:00:00Z"), To: h("2026-12-03T00:00:00Z"), Bucket: domain.BucketDay}, h("2026-12-01T00:00:00Z"), 2, ""},
		{"in another zone", h("2026-12-01T01:30:00+02:00"), h("2026-12-01T02:00:00+02:00"), "hour", domain.StatsWindow{From: h("2026-11-30T23:30:00Z"), To: h("2026-12-01T00:00:00Z"), Bucket: domain.BucketHour}, h("2026-11-30T23:00:00Z"), 1, ""},
		{"1000 hours", h("2026-11-01T00:00:00Z"), h("2026-11-01T00:00:00Z").Add(1000 * time.Hour), "hour", domain.StatsWindow{}, time.Time{}, 1000, "-"},
		{"from equals to", now, now, "", domain.StatsWindow{}, time.Time{}, 0, "from"},
		{"from after to", now, now.Add(-time.Hour), "hour", domain.StatsWindow{}, time.Time{}, 0, "from"},
		{"unknown bucket", time.Time{}, time.Time{}, "week", domain.StatsWindow{}, time.Time{}, 0, "bucket"},
		{"1001 hours", now.Add(-1000*time.Hour - time.Minute), now, "hour", domain.StatsWindow{}, time.Time{}, 0, "bucket"},
		{"1001 days", now.Add(-1001 * 24 * time.Hour), now.Add(-24 * time.Hour), "day", domain.StatsWindow{}, time.Time{}, 0, "bucket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := domain.NewStatsWindow(tt.from, tt.to, tt.bucket, now)
			if tt.field != "" && tt.field != "-" {
				var ve *domain.ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.field {
					t.Fatalf("NewStatsWindow = %v, want one invalid %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewStatsWindow = %v", err)
			}
			if tt.field == "" && w != tt.want {
				t.Errorf("window = %+v, want %+v", w, tt.want)
			}
			starts := w.Starts()
			if len(starts) != tt.buckets || w.Buckets() != tt.buckets {
				t.Fatalf("%d starts, Buckets() = %d, want %d", len(starts), w.Buckets(), tt.buckets)
			}
			if tt.field == "" && !starts[0].Equal(tt.first) {
				t.Errorf("first bucket = %s, want %s", starts[0], tt.first)
			}
			for i := 1; i < len(starts); i++ {
				if starts[i].Sub(starts[i-1]) != w.Bucket.Width() {
					t.Fatalf("buckets %d and %d are %s apart", i-1, i, starts[i].Sub(starts[i-1]))
				}
			}
			if last := starts[len(starts)-1]; !last.Before(w.To) || !last.Add(w.Bucket.Width()).After(w.To.Add(-time.Nanosecond)) {
				t.Errorf("last bucket %s does not hold the window's end %s", last, w.To)
			}
		})
	}
}

// TestOutcomeOf: only a final status is paid or declined.
func TestOutcomeOf(t *testing.T) {
	for _, s := range domain.AttemptStatuses {
		want := domain.OutcomeUnknown
		switch s {
		case domain.AttemptSucceeded:
			want = domain.OutcomePaid
		case domain.AttemptFailed:
			want = domain.OutcomeDeclined
		}
		if got := domain.OutcomeOf(s); got != want || (got != domain.OutcomeUnknown) != s.Final() {
			t.Errorf("OutcomeOf(%s) = %s, want %s", s, got, want)
		}
	}
}
