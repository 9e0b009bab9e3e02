package repository_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// lease is the tests' lease length.
const lease = 30 * time.Second

// newRecord builds a processing record for key leased from t0, expiring a day later.
func newRecord(key string) domain.Record {
	return domain.Record{
		Scope: domain.CustomerScope("c1"), Key: key, Method: "POST", Path: "/v1/orders/o1/pay",
		Fingerprint: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Status:      domain.RecordProcessing, OrderID: "o1",
		LockedUntil: t0.Add(lease), CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
	}
}

func insertRecord(t *testing.T, s *repository.RecordStore, r domain.Record) {
	t.Helper()
	if err := s.Insert(t.Context(), r); err != nil {
		t.Fatalf("Insert(%q) = %v", r.Key, err)
	}
}

func findRecord(t *testing.T, s *repository.RecordStore, scope, key string) domain.Record {
	t.Helper()
	r, err := s.Find(t.Context(), scope, key)
	if err != nil {
		t.Fatalf("Find(%q) = %v", key, err)
	}
	return r
}

func TestRecordInsertFind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		r := newRecord("key-1")
		r.Status = domain.RecordSucceeded // Insert always takes the lock: processing
		insertRecord(t, s, r)

		got := findRecord(t, s, r.Scope, r.Key)
		want := r
		want.Status = domain.RecordProcessing
		if got.Scope != want.Scope || got.Key != want.Key || got.Method != want.Method || got.Path != want.Path ||
			got.Fingerprint != want.Fingerprint || got.Status != want.Status || got.OrderID != want.OrderID ||
			!got.LockedUntil.Equal(want.LockedUntil) || !got.ExpiresAt.Equal(want.ExpiresAt) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("Find(%q) = %+v, want %+v", r.Key, got, want)
		}

		if err := s.Insert(t.Context(), newRecord("key-1")); !errors.Is(err, domain.ErrKeyInUse) {
			t.Errorf("Insert(duplicate key-1) = %v, want %v", err, domain.ErrKeyInUse)
		}
		other := newRecord("key-1")
		other.Scope = domain.CustomerScope("c2") // keys are scoped to the caller
		if err := s.Insert(t.Context(), other); err != nil {
			t.Errorf("Insert(key-1 in another scope) = %v, want nil", err)
		}
		if _, err := s.Find(t.Context(), r.Scope, "missing"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Errorf("Find(missing) = %v, want %v", err, domain.ErrRecordNotFound)
		}
	})
}

// TestRecordTakeOver: a lease can be taken over only once it has run out,
// strictly before now, to the microsecond; the winner's new lease shuts out
// everyone after it.
func TestRecordTakeOver(t *testing.T) {
	tests := []struct {
		name   string
		locked time.Time
		want   bool
	}{
		{"lease ran out a microsecond ago", t0.Add(-time.Microsecond), true},
		{"lease ran out 900ms ago", t0.Add(-900 * time.Millisecond), true},
		{"lease ends now", t0, false},
		{"lease ends in a microsecond", t0.Add(time.Microsecond), false},
		{"lease ends in 30s", t0.Add(lease), false},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		for _, tt := range tests {
			r := newRecord(tt.name)
			r.LockedUntil = tt.locked
			insertRecord(t, s, r)
			if ok, err := s.TakeOver(t.Context(), r.Scope, r.Key, t0, t0.Add(lease)); ok != tt.want || err != nil {
				t.Errorf("TakeOver(%s) = %v, %v, want %v", tt.name, ok, err, tt.want)
			}
			if ok, err := s.TakeOver(t.Context(), r.Scope, r.Key, t0, t0.Add(lease)); ok || err != nil {
				t.Errorf("second TakeOver(%s) = %v, %v, want false", tt.name, ok, err)
			}
			if got := findRecord(t, s, r.Scope, r.Key); tt.want && !got.LockedUntil.Equal(t0.Add(lease)) {
				t.Errorf("TakeOver(%s): locked until %v, want %v", tt.name, got.LockedUntil, t0.Add(lease))
			}
		}
		done := newRecord("completed")
		done.LockedUntil = t0.Add(-time.Hour)
		insertRecord(t, s, done)
		s.Complete(t.Context(), done.Scope, done.Key, domain.RecordSucceeded, 200, []byte("{}"), false, t0)
		if ok, err := s.TakeOver(t.Context(), done.Scope, done.Key, t0, t0.Add(lease)); ok || err != nil {
			t.Errorf("TakeOver(completed record) = %v, %v, want false", ok, err)
		}
	})
}

// TestRecordReleaseOwnLease: a holder that names its lease ends it, to
// the microsecond it took it with (nanoseconds dropped as the column
// drops them); a record taken over since, under its new holder's lease,
// is left alone, and so is a completed one.
func TestRecordReleaseOwnLease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		now := t0.Add(time.Second)
		mine := newRecord("own-lease")
		mine.LockedUntil = t0.Add(lease + 123456789*time.Nanosecond)
		insertRecord(t, s, mine)
		if ok, err := s.ReleaseLease(t.Context(), mine.Scope, mine.Key, mine.LockedUntil, now); !ok || err != nil {
			t.Fatalf("ReleaseLease(own lease) = %v, %v, want true", ok, err)
		}
		if got := findRecord(t, s, mine.Scope, mine.Key); got.Status != domain.RecordProcessing || !got.LockedUntil.Equal(now) {
			t.Errorf("after ReleaseLease: %s locked until %v, want processing until %v", got.Status, got.LockedUntil, now)
		}

		taken := newRecord("taken-over")
		taken.LockedUntil = t0.Add(-time.Second)
		insertRecord(t, s, taken)
		if ok, err := s.TakeOver(t.Context(), taken.Scope, taken.Key, t0, t0.Add(lease)); !ok || err != nil {
			t.Fatalf("TakeOver = %v, %v", ok, err)
		}
		if ok, err := s.ReleaseLease(t.Context(), taken.Scope, taken.Key, taken.LockedUntil, t0); ok || err != nil {
			t.Errorf("ReleaseLease(the lease before the takeover) = %v, %v, want false", ok, err)
		}
		if got := findRecord(t, s, taken.Scope, taken.Key); !got.LockedUntil.Equal(t0.Add(lease)) {
			t.Errorf("the new holder's lease ends %v, want %v", got.LockedUntil, t0.Add(lease))
		}

		done := newRecord("completed-lease")
		insertRecord(t, s, done)
		s.Complete(t.Context(), done.Scope, done.Key, domain.RecordSucceeded, 200, []byte("{}"), false, t0)
		if ok, err := s.ReleaseLease(t.Context(), done.Scope, done.Key, done.LockedUntil, t0); ok || err != nil {
			t.Errorf("ReleaseLease(completed record) = %v, %v, want false", ok, err)
		}
	})
}

// TestRecordConcurrentTakeOver: of 20 callers that find the same dead
// lease, exactly one wins it.
func TestRecordConcurrentTakeOver(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		r := newRecord("dead-lease")
		r.LockedUntil = t0.Add(-time.Second)
		insertRecord(t, s, r)
		const n = 20
		won := make(chan bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				now := t0.Add(time.Duration(i) * time.Microsecond)
				ok, err := s.TakeOver(t.Context(), r.Scope, r.Key, now, now.Add(lease))
				if err != nil {
					t.Errorf("TakeOver = %v", err)
				}
				won <- ok
			})
		}
		wg.Wait()
		close(won)
		winners := 0
		for ok := range won {
			if ok {
				winners++
			}
		}
		if winners != 1 {
			t.Errorf("%d of %d concurrent TakeOvers won, want 1", winners, n)
		}
	})
}

func TestRecordComplete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		r := newRecord("key-1")
		insertRecord(t, s, r)
		body := []byte(`{"id":"o1","status":"paid","amount":"19.90"}`)
		if ok, err := s.Complete(t.Context(), r.Scope, r.Key, domain.RecordSucceeded, 200, body, true, t0.Add(time.Second)); !ok || err != nil {
			t.Fatalf("Complete = %v, %v, want true", ok, err)
		}
		got := findRecord(t, s, r.Scope, r.Key)
		if got.Status != domain.RecordSucceeded || got.ResponseStatus != 200 || !bytes.Equal(got.ResponseBody, body) ||
			!got.Sealed || !got.UpdatedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("after Complete: %+v, want succeeded 200 %s sealed", got, body)
		}
		// A second completion (another path finishing the same request) keeps the first response.
		if ok, err := s.Complete(t.Context(), r.Scope, r.Key, domain.RecordFailed, 402, []byte("{}"), false, t0); ok || err != nil {
			t.Errorf("second Complete = %v, %v, want false", ok, err)
		}
		if again := findRecord(t, s, r.Scope, r.Key); again.ResponseStatus != 200 || !bytes.Equal(again.ResponseBody, body) {
			t.Errorf("second Complete changed the record: %d %s", again.ResponseStatus, again.ResponseBody)
		}
		if _, err := s.Complete(t.Context(), r.Scope, r.Key, domain.RecordProcessing, 200, nil, false, t0); err == nil {
			t.Errorf("Complete(status processing) = nil error, want an error")
		}
	})
}

// TestRecordRetry: only a failed record runs again; it gets a new lease and
// loses its stored response.
func TestRecordRetry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		r := newRecord("key-1")
		insertRecord(t, s, r)
		if ok, err := s.Retry(t.Context(), r.Scope, r.Key, t0, t0.Add(lease)); ok || err != nil {
			t.Errorf("Retry(processing) = %v, %v, want false", ok, err)
		}
		s.Complete(t.Context(), r.Scope, r.Key, domain.RecordFailed, 402, []byte(`{"code":"card_declined"}`), true, t0)
		later := t0.Add(time.Minute)
		if ok, err := s.Retry(t.Context(), r.Scope, r.Key, later, later.Add(lease)); !ok || err != nil {
			t.Errorf("Retry(failed) = %v, %v, want true", ok, err)
		}
		got := findRecord(t, s, r.Scope, r.Key)
		if got.Status != domain.RecordProcessing || got.ResponseStatus != 0 || len(got.ResponseBody) != 0 || got.Sealed ||
			!got.LockedUntil.Equal(later.Add(lease)) {
			t.Errorf("after Retry: %+v, want processing, no response, locked until %v", got, later.Add(lease))
		}
		if ok, err := s.Retry(t.Context(), r.Scope, r.Key, later, later.Add(lease)); ok || err != nil {
			t.Errorf("second Retry = %v, %v, want false", ok, err)
		}
	})
}

func TestRecordDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		open, done := newRecord("open"), newRecord("done")
		insertRecord(t, s, open)
		insertRecord(t, s, done)
		s.Complete(t.Context(), done.Scope, done.Key, domain.RecordSucceeded, 201, []byte("{}"), false, t0)
		for _, r := range []domain.Record{open, done} {
			if err := s.Delete(t.Context(), r.Scope, r.Key); err != nil {
				t.Errorf("Delete(%q) = %v", r.Key, err)
			}
		}
		if _, err := s.Find(t.Context(), open.Scope, open.Key); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Errorf("Find(deleted processing record) = %v, want %v", err, domain.ErrRecordNotFound)
		}
		if _, err := s.Find(t.Context(), done.Scope, done.Key); err != nil {
			t.Errorf("Find(completed record after Delete) = %v, want it kept", err)
		}
		// The key is free again.
		insertRecord(t, s, open)
	})
}

// TestRecordPurgeExpired: expired records go, in batches — completed ones,
// and processing ones whose lease ran out too (their payment's outcome lives
// on in the order); a processing record still under its lease, and
// unexpired ones, stay.
func TestRecordPurgeExpired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		now := t0.Add(48 * time.Hour)
		add := func(key string, status domain.RecordStatus, expires time.Time) {
			r := newRecord(key)
			r.ExpiresAt = expires
			if key == "old-processing-leased" {
				r.LockedUntil = now.Add(time.Minute)
			}
			insertRecord(t, s, r)
			if status != domain.RecordProcessing {
				s.Complete(t.Context(), r.Scope, key, status, 200, nil, false, t0)
			}
		}
		add("old-ok-1", domain.RecordSucceeded, now.Add(-time.Hour))
		add("old-ok-2", domain.RecordSucceeded, now.Add(-time.Microsecond))
		add("old-failed", domain.RecordFailed, now.Add(-time.Hour))
		add("old-processing", domain.RecordProcessing, now.Add(-time.Hour))
		add("old-processing-leased", domain.RecordProcessing, now.Add(-time.Hour))
		add("expires-now", domain.RecordSucceeded, now)
		add("fresh", domain.RecordSucceeded, now.Add(time.Hour))

		for _, want := range []int64{2, 2, 0} {
			if n, err := s.PurgeExpired(t.Context(), now, 2); n != want || err != nil {
				t.Errorf("PurgeExpired(limit 2) = %d, %v, want %d", n, err, want)
			}
		}
		scope := domain.CustomerScope("c1")
		for key, kept := range map[string]bool{
			"old-ok-1": false, "old-ok-2": false, "old-failed": false,
			"old-processing": false, "old-processing-leased": true, "expires-now": true, "fresh": true,
		} {
			_, err := s.Find(t.Context(), scope, key)
			if kept && err != nil || !kept && !errors.Is(err, domain.ErrRecordNotFound) {
				t.Errorf("Find(%q) after purge = %v, want kept=%v", key, err, kept)
			}
		}
	})
}
