package repository_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// statsDay is the day the overview tests' data lives on.
var statsDay = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func at(hour, minute int) time.Time {
	return statsDay.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
}

// statsFixture stores attempts settled to the given statuses, each of its
// own order, ledger entries, discrepancies and disputes, and returns the
// attempt that has waited longest without a final outcome.
func statsFixture(t *testing.T, db *repository.DB) (oldestUnknown domain.Attempt) {
	t.Helper()
	ctx := t.Context()
	attempts := repository.NewAttemptStore(db)
	attempt := func(created time.Time, status domain.AttemptStatus) domain.Attempt {
		t.Helper()
		a := newAttempt(t, attempts, newOrder(t, db), newID(), created)
		var (
			ok  bool
			err error
		)
		switch status {
		case domain.AttemptStarted:
			return a
		case domain.AttemptSucceeded:
			ok, err = attempts.Succeed(ctx, a.ID, "ch_"+a.ID, created)
		case domain.AttemptFailed:
			ok, err = attempts.Fail(ctx, a.ID, "", "card_declined", created)
		case domain.AttemptUnknown:
			ok, err = attempts.MarkUnknown(ctx, a.ID, "", created)
		case domain.AttemptHeld:
			ok, err = attempts.Hold(ctx, a.ID, "ch_"+a.ID, created)
		}
		if err != nil || !ok {
			t.Fatalf("settle attempt to %s = %v, %v", status, ok, err)
		}
		return a
	}
	oldestUnknown = attempt(at(9, 0), domain.AttemptUnknown) // before the window: not counted, but the oldest unknown
	attempt(at(10, 29), domain.AttemptFailed)                // before the window
	attempt(at(10, 40), domain.AttemptSucceeded)
	attempt(at(10, 50), domain.AttemptFailed)
	attempt(at(11, 5), domain.AttemptSucceeded)
	attempt(at(12, 59).Add(59*time.Second+999999*time.Microsecond), domain.AttemptUnknown) // the last microsecond of 12:00
	attempt(at(14, 10), domain.AttemptStarted)
	attempt(at(14, 12), domain.AttemptHeld)
	attempt(at(14, 15), domain.AttemptSucceeded) // at to: after the window
	attempt(at(23, 59), domain.AttemptSucceeded) // the next day's window
	attempt(at(24, 0), domain.AttemptFailed)

	ledger := repository.NewLedgerStore(db)
	entry := func(created time.Time, kind domain.LedgerKind, amount string, cur domain.Currency) {
		t.Helper()
		ref := newID()
		appendEntry(t, ledger, domain.LedgerEntry{ID: newID(), OrderID: newID(), Kind: kind, Reference: string(kind) + ":" + ref,
			ChargeID: "ch_" + ref, Amount: dec(amount), Currency: cur, Source: domain.SourceWebhook, CreatedAt: created})
	}
	entry(at(10, 0), domain.LedgerCharge, "99.00", "USD") // before the window
	entry(at(10, 40), domain.LedgerCharge, "10.00", "USD")
	entry(at(11, 5), domain.LedgerCharge, "9.90", "USD")
	entry(at(11, 30), domain.LedgerCharge, "5.000", "KWD")
	entry(at(12, 10), domain.LedgerRefund, "3.00", "USD")
	entry(at(12, 20), domain.LedgerDisputeOpened, "9.90", "USD") // neither a charge nor a refund
	entry(at(13, 30), domain.LedgerOutsideRefund, "1.235", "KWD")
	entry(at(14, 15), domain.LedgerCharge, "50.00", "USD") // at to: after the window

	discrepancies := repository.NewDiscrepancyStore(db)
	var ds []domain.Discrepancy
	for i := range 3 {
		ds = append(ds, record(t, discrepancies, newDiscrepancy(fmt.Sprintf("ch_d%d_%s", i, newID()), newID(), at(10, 0))))
	}
	if ok, err := discrepancies.Resolve(ctx, ds[0].ID, "ignore", "checked", at(15, 0)); err != nil || !ok {
		t.Fatalf("Resolve = %v, %v", ok, err)
	}
	disputes := repository.NewDisputeStore(db)
	openDispute(t, disputes, newDispute(newID(), "ch_open"))
	openDispute(t, disputes, newDispute(newID(), "ch_lost"))
	if ok, err := disputes.Close(ctx, findDispute(t, disputes, "du_ch_lost").ID, domain.DisputeEventLose, at(15, 0)); err != nil || !ok {
		t.Fatalf("Close = %v, %v", ok, err)
	}
	return oldestUnknown
}

func readStats(t *testing.T, db *repository.DB, from, to time.Time, bucket domain.StatsBucket) domain.Stats {
	t.Helper()
	st, err := repository.NewStatsStore(db).Stats(t.Context(), domain.StatsWindow{From: from, To: to, Bucket: bucket})
	if err != nil {
		t.Fatalf("Stats = %v", err)
	}
	return st
}

func series(st domain.Stats) string {
	out := ""
	for _, p := range st.Series {
		out += fmt.Sprintf("%s %d/%d/%d/%d; ", p.Start.Format("01-02T15"), p.Paid, p.Declined, p.Unknown, p.Refunds)
	}
	return out
}

func money(st domain.Stats) string {
	out := ""
	for _, m := range st.Money {
		out += fmt.Sprintf("%s %s/%s; ", m.Currency, domain.FormatAmount(m.Charged, m.Currency), domain.FormatAmount(m.Refunded, m.Currency))
	}
	return out
}

// TestStatsHourly: attempts count in the hour they were created by their
// outcome now (paid, declined, unknown: started, lost or held), the
// ledger's refunds (payd's and outside ones) in theirs; an hour without
// data is there with zeros; only [from, to) counts, the first bucket
// being the hour holding from; money adds up per currency at its scale;
// what is open and the oldest unknown attempt are read over everything.
func TestStatsHourly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		oldest := statsFixture(t, db)
		st := readStats(t, db, at(10, 30), at(14, 15), domain.BucketHour)
		want := "03-01T10 1/1/0/0; 03-01T11 1/0/0/0; 03-01T12 0/0/1/1; 03-01T13 0/0/0/1; 03-01T14 0/0/2/0; "
		if got := series(st); got != want {
			t.Errorf("series (paid/declined/unknown/refunds)\n got %s\nwant %s", got, want)
		}
		if want := (domain.StatsCounts{Paid: 2, Declined: 1, Unknown: 3, Refunds: 2}); st.Totals != want {
			t.Errorf("totals = %+v, want %+v", st.Totals, want)
		}
		if rate, ok := st.Totals.SuccessRate(); !ok || fmt.Sprintf("%.4f", rate) != "0.6667" {
			t.Errorf("success rate = %v, %v, want 2/3", rate, ok)
		}
		if got, want := money(st), "KWD 5.000/1.235; USD 19.90/3.00; "; got != want {
			t.Errorf("money = %s, want %s", got, want)
		}
		if st.OpenDiscrepancies != 2 || st.OpenDisputes != 1 {
			t.Errorf("open discrepancies, disputes = %d, %d, want 2, 1", st.OpenDiscrepancies, st.OpenDisputes)
		}
		if o := st.OldestUnknown; o == nil || o.AttemptID != oldest.ID || o.OrderID != oldest.OrderID || !o.Since.Equal(at(9, 0)) {
			t.Errorf("oldest unknown = %+v, want attempt %s of order %s since %s", o, oldest.ID, oldest.OrderID, at(9, 0))
		}
	})
}

// TestStatsDaily: day buckets start at UTC midnight and split the
// attempts at it; a window with no data has every bucket at zero and no
// money.
func TestStatsDaily(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		statsFixture(t, db)
		st := readStats(t, db, at(10, 30), at(48, 0), domain.BucketDay)
		if got, want := series(st), "03-01T00 4/1/3/2; 03-02T00 0/1/0/0; "; got != want {
			t.Errorf("series (paid/declined/unknown/refunds)\n got %s\nwant %s", got, want)
		}
		if got, want := money(st), "KWD 5.000/1.235; USD 69.90/3.00; "; got != want {
			t.Errorf("money = %s, want %s", got, want)
		}

		empty := readStats(t, db, at(-72, 0), at(-24, 0), domain.BucketDay)
		if got, want := series(empty), "02-26T00 0/0/0/0; 02-27T00 0/0/0/0; "; got != want {
			t.Errorf("empty window's series = %s, want %s", got, want)
		}
		if empty.Money == nil || len(empty.Money) != 0 {
			t.Errorf("empty window's money = %#v, want none", empty.Money)
		}
		if _, ok := empty.Totals.SuccessRate(); ok {
			t.Error("an empty window has a success rate")
		}
		if empty.OldestUnknown == nil {
			t.Error("the oldest unknown attempt is read in a window without data too: it is not windowed")
		}
	})
}

// TestStatsNothingOpen: a database without discrepancies, disputes or
// unsettled attempts has none open and no oldest unknown attempt.
func TestStatsNothingOpen(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		a := newAttempt(t, repository.NewAttemptStore(db), newOrder(t, db), newID(), at(10, 0))
		if ok, err := repository.NewAttemptStore(db).Succeed(t.Context(), a.ID, "ch_1", at(10, 0)); err != nil || !ok {
			t.Fatalf("Succeed = %v, %v", ok, err)
		}
		st := readStats(t, db, at(10, 0), at(11, 0), domain.BucketHour)
		if got, want := series(st), "03-01T10 1/0/0/0; "; got != want {
			t.Errorf("series = %s, want %s", got, want)
		}
		if st.OldestUnknown != nil || st.OpenDiscrepancies != 0 || st.OpenDisputes != 0 {
			t.Errorf("oldest unknown %+v, open %d discrepancies and %d disputes, want none", st.OldestUnknown, st.OpenDiscrepancies, st.OpenDisputes)
		}
	})
}

// TestStatsReadsTheWindowOnly: on SQLite, whose planner does not depend on
// the data, each read of a window searches its created_at index
// (migrations 00018 and 00028) instead of scanning the table, and needs
// nothing but that index.
func TestStatsReadsTheWindowOnly(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	want := map[string]string{
		"attempts by hour": "SEARCH payment_attempts USING COVERING INDEX payment_attempts_created (created_at>? AND created_at<?)",
		"attempts by day":  "SEARCH payment_attempts USING COVERING INDEX payment_attempts_created (created_at>? AND created_at<?)",
		"ledger by hour":   "SEARCH ledger_entries USING COVERING INDEX ledger_entries_created (created_at>? AND created_at<?)",
		"ledger by day":    "SEARCH ledger_entries USING COVERING INDEX ledger_entries_created (created_at>? AND created_at<?)",
	}
	for name, q := range repository.StatsWindowReads() {
		var plan []struct{ Detail string }
		if err := db.Gorm().Raw("EXPLAIN QUERY PLAN "+q, "2025-03-01 00:00:00.000000", "2025-03-02 00:00:00.000000").Scan(&plan).Error; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		found := false
		for _, p := range plan {
			found = found || p.Detail == want[name]
		}
		if !found {
			t.Errorf("%s: plan %+v, want %q", name, plan, want[name])
		}
	}
}
