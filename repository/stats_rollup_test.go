package repository_test

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// rollupPass is a pass of the rollup at now, as the job runs it.
func rollupPass(now time.Time) repository.RollupPass {
	return repository.RollupPass{Now: now, Settle: 10 * time.Minute, Margin: 5 * time.Minute, Lease: time.Minute, MaxHours: 500}
}

// statsWindows are the windows the rollup tests read: whole hours and
// days, ends inside an hour, and the fixture's day and the next.
var statsWindows = []domain.StatsWindow{
	{From: at(0, 0), To: at(48, 0), Bucket: domain.BucketHour},
	{From: at(0, 0), To: at(48, 0), Bucket: domain.BucketDay},
	{From: at(10, 30), To: at(14, 15), Bucket: domain.BucketHour},
	{From: at(10, 45), To: at(11, 10), Bucket: domain.BucketHour},
	{From: at(9, 59), To: at(24, 1), Bucket: domain.BucketDay},
}

func readAll(t *testing.T, db *repository.DB) []domain.Stats {
	t.Helper()
	var out []domain.Stats
	for _, w := range statsWindows {
		out = append(out, readStats(t, db, w.From, w.To, w.Bucket))
	}
	return out
}

// TestStatsRollup: once the hours are rolled, the overview of every window
// reads as it did from the tables; it does read the rollup; an attempt
// whose status changes after its hour was rolled is counted again by the
// next pass; an hour not yet over is never rolled, and an empty one is
// stepped over.
func TestStatsRollup(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		statsFixture(t, db)
		s := repository.NewStatsStore(db)
		want := readAll(t, db)

		// Settled up to 13:00: 9:00 to 12:00 rolled (the first row is at
		// 9:00), 13:00 and after still read from the tables.
		n, err := s.Roll(t.Context(), rollupPass(at(14, 5)))
		if err != nil || n != 4 {
			t.Fatalf("Roll(14:05) = %d, %v; want 4 hours (9:00 to 12:00)", n, err)
		}
		if got := readAll(t, db); !reflect.DeepEqual(got, want) {
			t.Errorf("after rolling to 13:00:\n got %+v\nwant %+v", got, want)
		}
		n, err = s.Roll(t.Context(), rollupPass(at(48, 30)))
		if err != nil || n != 4 {
			t.Fatalf("Roll(next day 00:30) = %d, %v; want the 4 hours that have rows (13:00, 14:00, 23:00 and the next day's 0:00), the empty ones stepped over", n, err)
		}
		if got := readAll(t, db); !reflect.DeepEqual(got, want) {
			t.Errorf("after rolling both days:\n got %+v\nwant %+v", got, want)
		}
		if n, err := s.Roll(t.Context(), rollupPass(at(48, 31))); err != nil || n != 0 {
			t.Errorf("Roll(again) = %d, %v; want nothing to roll", n, err)
		}

		// The overview reads the rollup: a count changed there shows.
		if err := db.Gorm().Exec("UPDATE stats_attempt_hours SET n = n + 100 WHERE status = 'succeeded'").Error; err != nil {
			t.Fatal(err)
		}
		if got := readStats(t, db, at(10, 0), at(12, 0), domain.BucketHour); got.Totals.Paid != 202 {
			t.Errorf("paid with the rollup's counts raised by 100 each = %d, want 202 (one success at 10:40, one at 11:05)", got.Totals.Paid)
		}
		if err := db.Gorm().Exec("UPDATE stats_attempt_hours SET n = n - 100 WHERE status = 'succeeded'").Error; err != nil {
			t.Fatal(err)
		}

		// A declined attempt of 10:50 found charged after all, two days on:
		// the next pass counts its hour again.
		attempts := repository.NewAttemptStore(db)
		var declined domain.Attempt
		for _, a := range listAttempts(t, db) {
			if a.Status == domain.AttemptFailed && a.CreatedAt.Equal(at(10, 50)) {
				declined = a
			}
		}
		later := at(72, 0)
		if ok, err := attempts.Adopt(t.Context(), declined.ID, domain.AttemptFailed, "ch_late", later); !ok || err != nil {
			t.Fatalf("Adopt = %v, %v", ok, err)
		}
		if n, err := s.Roll(t.Context(), rollupPass(later.Add(time.Minute))); err != nil || n < 1 {
			t.Fatalf("Roll(after the late charge) = %d, %v; want 10:00 counted again", n, err)
		}
		got := readStats(t, db, at(10, 0), at(11, 0), domain.BucketHour)
		if got.Totals.Paid != 2 || got.Totals.Declined != 1 {
			t.Errorf("10:00 after the late charge: %d paid, %d declined; want 2 and 1", got.Totals.Paid, got.Totals.Declined)
		}
	})
}

// listAttempts reads every attempt.
func listAttempts(t *testing.T, db *repository.DB) []domain.Attempt {
	t.Helper()
	var ids []string
	if err := db.Gorm().Raw("SELECT id FROM payment_attempts").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	s := repository.NewAttemptStore(db)
	out := make([]domain.Attempt, 0, len(ids))
	for _, id := range ids {
		out = append(out, findAttempt(t, s, id))
	}
	return out
}

// TestStatsRollupOnce: replicas running the rollup at once count each
// hour once between them; the others find it taken and do nothing.
func TestStatsRollupOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		statsFixture(t, db)
		want := readAll(t, db)
		const replicas = 4
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for range replicas {
			wg.Go(func() {
				n, err := repository.NewStatsStore(db).Roll(t.Context(), rollupPass(at(48, 30)))
				if err != nil {
					t.Errorf("Roll = %v", err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if total != 8 {
			t.Errorf("replicas rolled %d hours between them, want the 8 that have rows (9:00 to 14:00, 23:00, the next day's 0:00), each once", total)
		}
		if got := readAll(t, db); !reflect.DeepEqual(got, want) {
			t.Errorf("after the replicas' passes:\n got %+v\nwant %+v", got, want)
		}
	})
}
