package repository_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestRecordConcurrentInsert: inserting is the lock; of 20 identical
// requests arriving at once, exactly one gets the key.
func TestRecordConcurrentInsert(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		const n = 20
		var got, inUse atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				switch err := s.Insert(t.Context(), newRecord("same-key")); {
				case err == nil:
					got.Add(1)
				case errors.Is(err, domain.ErrKeyInUse):
					inUse.Add(1)
				default:
					t.Errorf("Insert(same-key) = %v, want nil or %v", err, domain.ErrKeyInUse)
				}
			})
		}
		wg.Wait()
		if got.Load() != 1 || inUse.Load() != n-1 {
			t.Errorf("concurrent Insert: %d got the key, %d were told it is in use; want 1 and %d", got.Load(), inUse.Load(), n-1)
		}
	})
}

// TestRecordPurgeExpiredConcurrent: replicas purging at once delete each
// record once and fail nowhere.
func TestRecordPurgeExpiredConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		const records, replicas = 30, 5
		for i := range records {
			r := newRecord(fmt.Sprintf("key-%d", i))
			r.ExpiresAt = t0
			insertRecord(t, s, r)
			s.Complete(t.Context(), r.Scope, r.Key, domain.RecordSucceeded, 200, nil, false, t0)
		}
		var total atomic.Int64
		var wg sync.WaitGroup
		for range replicas {
			wg.Go(func() {
				for {
					n, err := s.PurgeExpired(t.Context(), t0.Add(time.Second), 4)
					if err != nil {
						t.Errorf("PurgeExpired = %v", err)
						return
					}
					if n == 0 {
						return
					}
					total.Add(n)
				}
			})
		}
		wg.Wait()
		if total.Load() != records {
			t.Errorf("replicas purged %d records in all, want %d", total.Load(), records)
		}
	})
}

// TestRecordPurgeBesideRequests: replicas purge a table of expired
// records in batches while requests insert and complete live records at
// once, some under keys whose expired records the purge is deleting (the
// request replaces a gone record, replaceGone), as the pay path does under
// a purge. Every expired record not taken again goes, none of the
// requests fails, every key taken again holds its live record, and on
// MariaDB nothing waits out a lock and nothing deadlocks. (Before the
// purge's lease and its deletes by whole key, about one run in ten
// deadlocked a request's INSERT with a purge; see PurgeExpired.)
func TestRecordPurgeBesideRequests(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		var retries, deadlocks atomic.Int64
		db.OnRetry(func(_ context.Context, reason domain.RetryReason, _ int, err error) {
			switch reason {
			case domain.RetrySQLiteBusy:
			case domain.RetryDeadlock:
				deadlocks.Add(1)
				t.Logf("retry (%s): %v", reason, err)
			default:
				retries.Add(1)
				t.Logf("retry (%s): %v", reason, err)
			}
		})
		s := repository.NewRecordStore(db)
		now := t0.Add(48 * time.Hour)
		const expired, replicas, writers, perWriter = 600, 3, 4, 40
		for i := range expired {
			r := newRecord(fmt.Sprintf("old-%03d", i))
			r.ExpiresAt = t0.Add(time.Duration(i) * time.Millisecond)
			insertRecord(t, s, r)
			if i%5 != 0 { // some stay processing, their lease long run out
				s.Complete(t.Context(), r.Scope, r.Key, domain.RecordSucceeded, 200, []byte(`{}`), false, t0)
			}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range replicas {
			wg.Go(func() {
				for {
					n, err := s.PurgeExpired(t.Context(), now, 50)
					if err != nil {
						t.Errorf("PurgeExpired = %v", err)
						return
					}
					if n == 0 {
						select {
						case <-stop:
							return
						default:
						}
					}
				}
			})
		}
		reused := map[string]bool{}
		var writing sync.WaitGroup
		for w := range writers {
			keys := make([]string, perWriter)
			for i := range keys {
				keys[i] = fmt.Sprintf("live-%d-%d", w, i)
				if i%2 == 0 { // every other one an expired key, taken again
					keys[i] = fmt.Sprintf("old-%03d", (w*perWriter+i)*3%expired)
					reused[keys[i]] = true
				}
			}
			writing.Go(func() {
				for _, key := range keys {
					r := newRecord(key)
					r.LockedUntil, r.CreatedAt, r.UpdatedAt, r.ExpiresAt = now.Add(time.Minute), now, now, now.Add(24*time.Hour)
					if err := s.Insert(t.Context(), r); err != nil {
						t.Errorf("Insert(%s) beside the purge = %v", r.Key, err)
						continue
					}
					if ok, err := s.Complete(t.Context(), r.Scope, r.Key, domain.RecordSucceeded, 200, []byte(`{}`), false, now); !ok || err != nil {
						t.Errorf("Complete(%s) beside the purge = %v, %v; want true", r.Key, ok, err)
					}
				}
			})
		}
		writing.Wait()
		close(stop)
		wg.Wait()

		var left []struct {
			IdemKey   string
			ExpiresAt string
		}
		if err := db.Gorm().Raw(`SELECT idem_key, expires_at FROM idempotency_records`).Scan(&left).Error; err != nil {
			t.Fatal(err)
		}
		kept := map[string]bool{}
		for _, r := range left {
			kept[r.IdemKey] = true
			if strings.HasPrefix(r.IdemKey, "old-") && !reused[r.IdemKey] {
				t.Errorf("expired record %q left after the purge", r.IdemKey)
			}
		}
		if want := writers * perWriter; len(left) != want {
			t.Errorf("%d records left, want the %d live ones", len(left), want)
		}
		for key := range reused {
			if !kept[key] {
				t.Errorf("key %q taken again beside the purge has no record", key)
			}
		}
		if n := retries.Load(); n > 0 {
			t.Errorf("%d statements or transactions retried after waiting out a lock, want none", n)
		}
		if n := deadlocks.Load(); n > 0 {
			t.Errorf("%d statements or transactions retried after a deadlock, want none", n)
		}
	})
}
