package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/redistest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/redisx"
	"github.com/payd/payd/repository"
)

// countingStore counts the reads of the records (Find).
type countingStore struct {
	idempotency.RecordStore
	finds atomic.Int64
}

func (s *countingStore) Find(ctx context.Context, scope, key string) (domain.Record, error) {
	s.finds.Add(1)
	return s.RecordStore.Find(ctx, scope, key)
}

// TestGateKeepsDuplicatesFromTheRecords: two engines (two replicas) on one
// database and one Redis. While the original of a key runs, 20 concurrent
// duplicates wait for its notification instead of reading the record; all
// replay its answer, byte for byte, and a later replay comes from Redis.
func TestGateKeepsDuplicatesFromTheRecords(t *testing.T) {
	srv := redistest.Start(t)
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		store := &countingStore{RecordStore: repository.NewRecordStore(dbtest.Open(t, d))}
		engines := make([]*idempotency.Engine, 2)
		for i := range engines {
			r := liveRedis(t, srv.URL())
			e := engineOn(t, store, testSecret)
			e.InflightWait, e.Gate, e.Replays = 5*time.Second, r, r
			engines[i] = e
		}
		ctx := context.Background()
		call := payCall("gate-" + string(d))
		start, err := engines[0].Begin(ctx, call)
		if err != nil || start.Replay != nil {
			t.Fatalf("Begin(original) = %+v, %v; want to execute", start, err)
		}
		before := store.finds.Load()
		answer := idempotency.Response{Status: 200, Body: []byte(`{"id":"o1","status":"paid"}`)}
		var wg sync.WaitGroup
		replays := make([]*idempotency.Response, 20)
		for i := range replays {
			wg.Go(func() {
				start, err := engines[i%2].Begin(ctx, call)
				if err != nil {
					t.Errorf("Begin(duplicate) = %v", err)
					return
				}
				replays[i] = start.Replay
			})
		}
		time.Sleep(200 * time.Millisecond) // the original runs; the duplicates wait (their safety-net look comes at 500ms)
		during := store.finds.Load() - before
		if _, err := engines[0].Finish(ctx, start.For(call), answer); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, r := range replays {
			if r == nil || r.Status != 200 || !bytes.Equal(r.Body, answer.Body) {
				t.Fatalf("duplicate %d = %+v, want the original's answer replayed", i, r)
			}
		}
		after := store.finds.Load() - before
		t.Logf("record reads while the original ran: %d; in all: %d (20 duplicates)", during, after)
		// Finish keeps a copy and frees the lock: the duplicates woken
		// replay the copy. A few may read the row on a slow machine (a
		// Redis command past its 50 ms deadline under -race sends its
		// caller to the database), never each of them.
		if during > 4 || after > 6 {
			t.Errorf("duplicates read the record %d times while waiting, %d in all; want at most 4 and 6 of 20 (Redis held them off, then replayed the copy)", during, after)
		}
	})
}

// liveRedis is a Redis gate on url whose notifications flow.
func liveRedis(t *testing.T, url string) *redisx.Redis {
	t.Helper()
	client, err := redisx.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	r := redisx.New(client, slog.New(slog.DiscardHandler), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Listen(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; r.Close() })
	for !r.Live() {
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// TestLeftoverLockIsNoDuplicate: a decline, then a lock left behind on the
// key (its release lost, as when Redis was slow or the breaker open). A
// sequential retry finds the lock taken and hears nothing: it is no
// concurrent duplicate of the declined attempt, so it runs as a new attempt
// (docs/guarantees.md#idempotency-rules) rather than being replayed the decline.
func TestLeftoverLockIsNoDuplicate(t *testing.T) {
	srv := redistest.Start(t)
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		r := liveRedis(t, srv.URL())
		e := engineOn(t, repository.NewRecordStore(dbtest.Open(t, d)), testSecret)
		e.InflightWait, e.Gate, e.Replays = 5*time.Second, r, r
		ctx := context.Background()
		call := payCall("leftover-" + string(d))
		start := begin(t, e, call)
		if _, err := e.Finish(ctx, start.For(call), idempotency.Response{Status: 402, Body: []byte(`{"code":"card_declined"}`)}); err != nil {
			t.Fatal(err)
		}
		for try := 0; ; try++ { // the lock whose release was lost
			token, err := r.Acquire(ctx, call.Scope, call.Key, 10*time.Second)
			if token != "" {
				break
			}
			if try == 20 {
				t.Fatalf("could not leave a lock behind: %q, %v", token, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		retry, err := e.Begin(ctx, call)
		if err != nil || retry.Replay != nil {
			var got any = retry.Replay
			if retry.Replay != nil {
				got = retry.Replay.Status
			}
			t.Fatalf("sequential retry after a decline = replay %v, %v; want a new attempt", got, err)
		}
	})
}

// TestCopyProvesReuse: a live copy of a success under the key for another
// request (another order) is the answer: 422 key reused, without the
// database, as the row would say.
func TestCopyProvesReuse(t *testing.T) {
	srv := redistest.Start(t)
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		r := liveRedis(t, srv.URL())
		store := &countingStore{RecordStore: repository.NewRecordStore(dbtest.Open(t, d))}
		e := engineOn(t, store, testSecret)
		e.InflightWait, e.Gate, e.Replays = 5*time.Second, r, r
		ctx := context.Background()
		call := payCall("copy-reused-" + string(d))
		other := call
		other.Path, other.OrderID = "/v1/orders/o2/pay", "o2"
		now := time.Now()
		// Only the copy: the row is not there to say it.
		r.Put(ctx, domain.Record{Scope: other.Scope, Key: other.Key, Method: other.Method, Path: other.Path,
			Fingerprint: other.Fingerprint(), Status: domain.RecordSucceeded, ResponseStatus: 200,
			ResponseBody: []byte(`{"id":"o2"}`), OrderID: "o2", CompletedBy: domain.CompletedByRequest,
			UpdatedAt: now, ExpiresAt: now.Add(time.Hour)})
		for try := 0; ; try++ { // the first Put of a fresh client may miss its deadline
			if _, ok := r.Get(ctx, other.Scope, other.Key); ok {
				break
			}
			if try == 20 {
				t.Fatal("the copy never landed")
			}
			time.Sleep(100 * time.Millisecond)
			r.Put(ctx, domain.Record{Scope: other.Scope, Key: other.Key, Method: other.Method, Path: other.Path,
				Fingerprint: other.Fingerprint(), Status: domain.RecordSucceeded, ResponseStatus: 200,
				ResponseBody: []byte(`{"id":"o2"}`), OrderID: "o2", CompletedBy: domain.CompletedByRequest,
				UpdatedAt: now, ExpiresAt: now.Add(time.Hour)})
		}
		st, err := e.Begin(ctx, call)
		if !errors.Is(err, domain.ErrKeyReused) {
			t.Fatalf("Begin with another request's copy under the key = %+v, %v; want ErrKeyReused", st, err)
		}
		if n := store.finds.Load(); n != 0 {
			t.Errorf("read the record %d times; want 0 (the copy proves the reuse)", n)
		}
	})
}
