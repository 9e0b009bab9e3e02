package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// StatsStore reads the operators' overview (GET /v1/admin/stats): four
// reads, each scanned by hand, none building a row struct.
type StatsStore struct{ db *DB }

// NewStatsStore returns the overview's reads on db.
func NewStatsStore(db *DB) *StatsStore { return &StatsStore{db: db} }

// The series are counted by the database, grouped by the first characters
// of created_at: "2026-12-01 10" is an hour, "2026-12-01" a day. Both
// databases hold every timestamp in UTC (timeLayout), SQLite as that text
// and MySQL as a DATETIME(6) that SUBSTR reads as the same text, so one
// statement serves both and the buckets are UTC hours and days. The WHERE
// is a range of created_at that the indexes of migrations 00018 and 00028
// serve (payment_attempts_created holds the status, ledger_entries_created
// the kind, currency and amount, so both reads need the index only); the
// database sends one row per bucket and status
// (or kind and currency), never one per attempt.
var (
	statsKeyLength = map[domain.StatsBucket]int{domain.BucketHour: len("2006-01-02 15"), domain.BucketDay: len("2006-01-02")}
	statsKeyLayout = map[domain.StatsBucket]string{domain.BucketHour: "2006-01-02 15", domain.BucketDay: "2006-01-02"}

	// statsAttempts: the attempts created in [from, to) by bucket and status.
	statsAttempts = perBucket(`SELECT SUBSTR(created_at, 1, %d) AS bucket, status, COUNT(*)
	FROM payment_attempts WHERE created_at >= ? AND created_at < ?
	GROUP BY bucket, status`)

	// statsLedger: the charges and refunds (payd's and outside ones, and
	// the refunds the provider reversed) booked in [from, to) by bucket,
	// kind and currency, counted and added up in minor units.
	statsLedger = perBucket(`SELECT SUBSTR(created_at, 1, %d) AS bucket, kind, currency, COUNT(*), SUM(amount_minor)
	FROM ledger_entries WHERE created_at >= ? AND created_at < ? AND kind IN ` + statsLedgerKinds + `
	GROUP BY bucket, kind, currency`)

	// statsLedgerKinds are the kinds of entry the overview counts.
	statsLedgerKinds = sqlStatuses(domain.LedgerCharge, domain.LedgerRefund, domain.LedgerOutsideRefund, domain.LedgerRefundReversed)

	// statsRolledAttempts and statsRolledLedger are the same counts, of
	// the whole hours in [from, to), from the rollup (stats_rollup.go).
	statsRolledAttempts = perBucket(`SELECT SUBSTR(hour, 1, %d) AS bucket, status, SUM(n)
	FROM stats_attempt_hours WHERE hour >= ? AND hour < ? GROUP BY bucket, status`)
	statsRolledLedger = perBucket(`SELECT SUBSTR(hour, 1, %d) AS bucket, kind, currency, SUM(n), SUM(amount_minor)
	FROM stats_ledger_hours WHERE hour >= ? AND hour < ? GROUP BY bucket, kind, currency`)
)

// statsOpen is what is open now, in one round trip: discrepancies open or
// being resolved (discrepancies_status) and open disputes (disputes_status),
// counted as the backlog gauges count them.
var statsOpen = `SELECT
	(SELECT COUNT(*) FROM discrepancies WHERE status IN ` + sqlStatuses(domain.DiscrepancyOpen, domain.DiscrepancyResolving) + `),
	(SELECT COUNT(*) FROM disputes WHERE status = ` + sqlStatus(domain.DisputeOpen) + `)`

// statsOldestUnknown is the oldest attempt without a final outcome
// (domain.OutcomeOf): payment_attempts_status finds the few rows in those
// statuses, and only they are sorted.
var statsOldestUnknown = `SELECT id, order_id, created_at FROM payment_attempts
	WHERE status IN ` + sqlStatuses(unfinishedAttempts()...) + `
	ORDER BY created_at, id LIMIT 1`

// unfinishedAttempts lists the attempt statuses the overview counts as
// unknown.
func unfinishedAttempts() []domain.AttemptStatus {
	var out []domain.AttemptStatus
	for _, s := range domain.AttemptStatuses {
		if domain.OutcomeOf(s) == domain.OutcomeUnknown {
			out = append(out, s)
		}
	}
	return out
}

// perBucket writes statement out once per bucket width, with that width's
// key length.
func perBucket(statement string) map[domain.StatsBucket]string {
	out := map[domain.StatsBucket]string{}
	for b, n := range statsKeyLength {
		out[b] = fmt.Sprintf(statement, n)
	}
	return out
}

// Stats reads the overview of w; now is when "open now" and the oldest
// unknown attempt are read. The four reads are not one snapshot: a pay
// settled between them may be counted in one and not yet in another.
func (s *StatsStore) Stats(ctx context.Context, w domain.StatsWindow) (domain.Stats, error) {
	if _, ok := statsKeyLength[w.Bucket]; !ok {
		return domain.Stats{}, fmt.Errorf("read stats: unknown bucket %q", w.Bucket)
	}
	starts := w.Starts()
	st := domain.Stats{Window: w, Series: make([]domain.StatsPoint, len(starts)), Money: []domain.StatsMoney{}}
	index := make(map[time.Time]int, len(starts))
	for i, t := range starts {
		st.Series[i].Start = t
		index[t] = i
	}
	point := func(key string) (*domain.StatsCounts, error) {
		t, err := time.ParseInLocation(statsKeyLayout[w.Bucket], key, time.UTC)
		if err != nil {
			return nil, fmt.Errorf("read stats: bucket %q: %w", key, err)
		}
		i, ok := index[t]
		if !ok {
			return nil, fmt.Errorf("read stats: bucket %q is outside the window", key)
		}
		return &st.Series[i].StatsCounts, nil
	}
	through, err := s.rolledThrough(ctx)
	if err != nil {
		return domain.Stats{}, err
	}
	money := map[domain.Currency]*domain.StatsMoney{}
	rolled, live := splitWindow(w.From, w.To, through)
	for _, r := range live {
		if err := s.attempts(ctx, statsAttempts[w.Bucket], r, point); err != nil {
			return domain.Stats{}, err
		}
		if err := s.ledger(ctx, statsLedger[w.Bucket], r, point, money); err != nil {
			return domain.Stats{}, err
		}
	}
	if rolled != nil {
		if err := s.attempts(ctx, statsRolledAttempts[w.Bucket], *rolled, point); err != nil {
			return domain.Stats{}, err
		}
		if err := s.ledger(ctx, statsRolledLedger[w.Bucket], *rolled, point, money); err != nil {
			return domain.Stats{}, err
		}
	}
	for _, m := range money {
		st.Money = append(st.Money, *m)
	}
	slices.SortFunc(st.Money, func(a, b domain.StatsMoney) int { return strings.Compare(string(a.Currency), string(b.Currency)) })
	for _, p := range st.Series {
		st.Totals.Add(p.StatsCounts)
	}
	if err := s.db.queryRow(ctx, statsOpen).Scan(&st.OpenDiscrepancies, &st.OpenDisputes); err != nil {
		return domain.Stats{}, fmt.Errorf("read stats: open: %w", err)
	}
	var (
		o     domain.OldestUnknown
		since utcTime
	)
	switch err := s.db.queryRow(ctx, statsOldestUnknown).Scan(&o.AttemptID, &o.OrderID, &since); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return domain.Stats{}, fmt.Errorf("read stats: oldest unknown attempt: %w", err)
	default:
		o.Since = since.time()
		st.OldestUnknown = &o
	}
	return st, nil
}

// span is a half-open range of time, [from, to).
type span struct{ from, to time.Time }

// splitWindow splits [from, to) into the whole hours the rollup holds,
// those before through (nil: none), and the rest, to be counted from the
// tables: the window's ends and the hours not yet rolled.
func splitWindow(from, to, through time.Time) (rolled *span, live []span) {
	a := from.Truncate(time.Hour)
	if a.Before(from) {
		a = a.Add(time.Hour)
	}
	b := to.Truncate(time.Hour)
	if through.Before(b) {
		b = through
	}
	if !a.Before(b) {
		return nil, []span{{from, to}}
	}
	if from.Before(a) {
		live = append(live, span{from, a})
	}
	if b.Before(to) {
		live = append(live, span{b, to})
	}
	return &span{a, b}, live
}

// attempts adds the attempts query counts in r to their buckets.
func (s *StatsStore) attempts(ctx context.Context, query string, r span, point func(string) (*domain.StatsCounts, error)) error {
	rows, err := s.db.query(ctx, query, ts(r.from), ts(r.to))
	if err != nil {
		return fmt.Errorf("read stats: attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, status string
			n           int64
		)
		if err := rows.Scan(&key, &status, &n); err != nil {
			return fmt.Errorf("read stats: attempts: %w", classify(err))
		}
		p, err := point(key)
		if err != nil {
			return err
		}
		switch domain.OutcomeOf(domain.AttemptStatus(status)) {
		case domain.OutcomePaid:
			p.Paid += n
		case domain.OutcomeDeclined:
			p.Declined += n
		default:
			p.Unknown += n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read stats: attempts: %w", classify(err))
	}
	return nil
}

// ledger adds the entries query counts in r to their buckets and their
// money to money's currencies.
func (s *StatsStore) ledger(ctx context.Context, query string, r span, point func(string) (*domain.StatsCounts, error), money map[domain.Currency]*domain.StatsMoney) error {
	rows, err := s.db.query(ctx, query, ts(r.from), ts(r.to))
	if err != nil {
		return fmt.Errorf("read stats: ledger: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, kind, currency string
			n, minor            int64
		)
		if err := rows.Scan(&key, &kind, &currency, &n, &minor); err != nil {
			return fmt.Errorf("read stats: ledger: %w", classify(err))
		}
		p, err := point(key)
		if err != nil {
			return err
		}
		c := domain.Currency(currency)
		m := money[c]
		if m == nil {
			m = &domain.StatsMoney{Currency: c, Charged: decimal.Zero, Refunded: decimal.Zero}
			money[c] = m
		}
		amount := domain.FromMinorUnits(minor, c)
		switch domain.LedgerKind(kind) {
		case domain.LedgerCharge:
			m.Charged = m.Charged.Add(amount)
		case domain.LedgerRefundReversed:
			m.Refunded = m.Refunded.Sub(amount) // money the provider took back after giving it: not refunded after all
		default:
			p.Refunds += n
			m.Refunded = m.Refunded.Add(amount)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read stats: ledger: %w", classify(err))
	}
	return nil
}
