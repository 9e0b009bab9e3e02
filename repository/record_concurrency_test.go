package repository_test

import (
	"errors"
	"fmt"
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
// records in batches while requests insert, take over and complete live
// records at once, as the pay path does under a purge. Every expired record
// goes, exactly once in all; no live record goes, none of the requests
// fails (no deadlock, no lock wait), and the purge fails nowhere.
func TestRecordPurgeBesideRequests(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewRecordStore(db)
		now := t0.Add(48 * time.Hour)
		const expired, live, replicas, writers = 600, 120, 3, 4
		for i := range expired {
			r := newRecord(fmt.Sprintf("old-%d", i))
			r.ExpiresAt = t0.Add(time.Duration(i) * time.Millisecond)
			insertRecord(t, s, r)
			if i%5 != 0 { // some stay processing, their lease long run out
				s.Complete(t.Context(), r.Scope, r.Key, domain.RecordSucceeded, 200, []byte(`{}`), false, t0)
			}
		}
		var purged atomic.Int64
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
					purged.Add(n)
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
		var writing sync.WaitGroup
		for w := range writers {
			writing.Go(func() {
				for i := range live / writers {
					r := newRecord(fmt.Sprintf("live-%d-%d", w, i))
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
		if purged.Load() != expired {
			t.Errorf("replicas purged %d records in all, want %d", purged.Load(), expired)
		}
		var left []string
		if err := db.Gorm().Raw(`SELECT idem_key FROM idempotency_records ORDER BY idem_key`).Scan(&left).Error; err != nil {
			t.Fatal(err)
		}
		if len(left) != live {
			t.Errorf("%d records left, want the %d live ones: %v", len(left), live, left[:min(len(left), 5)])
		}
		for _, k := range left {
			if len(k) < 5 || k[:5] != "live-" {
				t.Errorf("record %q left after the purge, want only live ones", k)
			}
		}
	})
}
