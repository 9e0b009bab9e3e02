package domain

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// StatsBucket is the width of one step of the operators' overview.
type StatsBucket string

// The bucket widths: a UTC hour, a UTC day.
const (
	BucketHour StatsBucket = "hour"
	BucketDay  StatsBucket = "day"
)

// MaxStatsBuckets bounds the series of one overview.
const MaxStatsBuckets = 1000

// DefaultStatsWindow is the window an overview covers when from is not given.
const DefaultStatsWindow = 24 * time.Hour

// Width returns the bucket's duration (zero for an unknown bucket).
func (b StatsBucket) Width() time.Duration {
	switch b {
	case BucketHour:
		return time.Hour
	case BucketDay:
		return 24 * time.Hour
	}
	return 0
}

// Start returns the start of the bucket holding t: t truncated to the UTC
// hour or to UTC midnight.
func (b StatsBucket) Start(t time.Time) time.Time {
	return t.UTC().Truncate(b.Width()) // UTC: the zero time is a UTC midnight
}

// StatsWindow is what an overview covers: the attempts and ledger entries
// created in [From, To), counted per bucket.
type StatsWindow struct {
	From, To time.Time
	Bucket   StatsBucket
}

// NewStatsWindow applies the defaults to an operator's request — to is
// now, from is to minus DefaultStatsWindow, the bucket an hour up to 48
// hours and a day beyond — and checks it: from before to, a known bucket,
// at most MaxStatsBuckets buckets. Zero times and an empty bucket are not
// given.
func NewStatsWindow(from, to time.Time, bucket string, now time.Time) (StatsWindow, error) {
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-DefaultStatsWindow)
	}
	w := StatsWindow{From: from.UTC(), To: to.UTC(), Bucket: StatsBucket(bucket)}
	var invalid ValidationErrors
	if !w.From.Before(w.To) {
		invalid = append(invalid, &ValidationError{Field: "from", Reason: "must be before to"})
	}
	switch {
	case bucket == "" && w.To.Sub(w.From) <= 48*time.Hour:
		w.Bucket = BucketHour
	case bucket == "":
		w.Bucket = BucketDay
	case w.Bucket.Width() == 0:
		invalid = append(invalid, &ValidationError{Field: "bucket", Reason: "must be hour or day"})
	}
	if len(invalid) == 0 {
		if n := w.Buckets(); n > MaxStatsBuckets {
			invalid = append(invalid, &ValidationError{Field: "bucket",
				Reason: fmt.Sprintf("the window holds %d %s buckets, more than %d: choose a shorter window or a wider bucket", n, w.Bucket, MaxStatsBuckets)})
		}
	}
	return w, invalid.Err()
}

// Buckets returns how many buckets the window touches: from the one
// holding From to the one holding the last instant before To.
func (w StatsWindow) Buckets() int {
	first := w.Bucket.Start(w.From)
	return int((w.To.Sub(first) + w.Bucket.Width() - 1) / w.Bucket.Width())
}

// Starts returns the start of every bucket of the window, in order.
func (w StatsWindow) Starts() []time.Time {
	n := w.Buckets()
	out := make([]time.Time, n)
	first := w.Bucket.Start(w.From)
	for i := range out {
		out[i] = first.Add(time.Duration(i) * w.Bucket.Width())
	}
	return out
}

// StatsOutcome is how the overview counts an attempt's status.
type StatsOutcome string

// The outcomes of the overview.
const (
	OutcomePaid     StatsOutcome = "paid"     // the provider charged the card (succeeded)
	OutcomeDeclined StatsOutcome = "declined" // the provider definitively charged nothing (failed)
	OutcomeUnknown  StatsOutcome = "unknown"  // no final outcome yet: started, unknown, or held for an operator
)

// OutcomeOf returns the overview's outcome of an attempt in status s:
// a final status is paid or declined, every other one is unknown.
func OutcomeOf(s AttemptStatus) StatsOutcome {
	switch s {
	case AttemptSucceeded:
		return OutcomePaid
	case AttemptFailed:
		return OutcomeDeclined
	}
	return OutcomeUnknown
}

// StatsCounts are the attempts by outcome and the refunds of one bucket
// or of a whole window.
type StatsCounts struct {
	Paid, Declined, Unknown, Refunds int64
}

// Add adds o to c.
func (c *StatsCounts) Add(o StatsCounts) {
	c.Paid += o.Paid
	c.Declined += o.Declined
	c.Unknown += o.Unknown
	c.Refunds += o.Refunds
}

// SuccessRate is Paid / (Paid + Declined), and false when both are 0.
func (c StatsCounts) SuccessRate() (float64, bool) {
	if c.Paid+c.Declined == 0 {
		return 0, false
	}
	return float64(c.Paid) / float64(c.Paid+c.Declined), true
}

// StatsPoint is one bucket of the series.
type StatsPoint struct {
	Start time.Time
	StatsCounts
}

// StatsMoney is what the ledger entries of the window moved in one
// currency: Charged every charge, Refunded every refund (payd's and
// outside ones).
type StatsMoney struct {
	Currency Currency
	Charged  decimal.Decimal
	Refunded decimal.Decimal
}

// OldestUnknown is the oldest attempt without a final outcome.
type OldestUnknown struct {
	OrderID   string
	AttemptID string
	Since     time.Time // the attempt's created_at
}

// Stats is the operators' overview of a window: the series (one point per
// bucket, zeros included), its totals and money, and what is open now.
type Stats struct {
	Window            StatsWindow
	Series            []StatsPoint
	Totals            StatsCounts
	Money             []StatsMoney // sorted by currency
	OpenDiscrepancies int64        // open or being resolved, now
	OpenDisputes      int64        // now
	OldestUnknown     *OldestUnknown
	ReadAt            time.Time // when "now" was: the oldest unknown attempt's age is counted to it
}
