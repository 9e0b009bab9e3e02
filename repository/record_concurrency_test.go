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
