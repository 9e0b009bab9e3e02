package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

const (
	testLease  = 30 * time.Second
	testTTL    = 24 * time.Hour
	testSecret = "a server secret of enough length"
)

// clock is the engine's clock in tests: real time (the in-flight wait
// sleeps for real) moved forward on demand, at the microsecond precision
// both databases keep.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond).Add(time.Duration(c.offset.Load()))
}

func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newEngine is an engine on a fresh store of dialect d.
func newEngine(t *testing.T, d migrations.Dialect) (*idempotency.Engine, *repository.RecordStore, *clock) {
	t.Helper()
	records := repository.NewRecordStore(dbtest.Open(t, d))
	return engineOn(t, records, testSecret), records, &clock{}
}

// engineOn is an engine on records whose responses are sealed with secret.
func engineOn(t *testing.T, records idempotency.RecordStore, secret string) *idempotency.Engine {
	t.Helper()
	sealer, err := idempotency.NewSealer(secret)
	if err != nil {
		t.Fatalf("NewSealer = %v", err)
	}
	return &idempotency.Engine{Records: records, Sealer: sealer, Lease: testLease, InflightWait: 50 * time.Millisecond,
		TTL: testTTL, Now: time.Now}
}

// payCall is a pay call of customer c1 under key.
func payCall(key string) idempotency.Call {
	return idempotency.Call{Scope: domain.CustomerScope("c1"), Key: key, Method: "POST", Path: "/v1/orders/o1/pay",
		Body: []byte(`{"payment_method":"pm_ok"}`), OrderID: "o1"}
}

// begin takes the key for c and fails the test unless the engine says execute.
func begin(t *testing.T, e *idempotency.Engine, c idempotency.Call) idempotency.Start {
	t.Helper()
	st, err := e.Begin(t.Context(), c)
	if err != nil || st.Replay != nil {
		t.Fatalf("Begin(%s) = %+v, %v; want to execute", c.Key, st, err)
	}
	return st
}

func finish(t *testing.T, e *idempotency.Engine, c idempotency.Call, status int, body string) {
	t.Helper()
	if _, err := e.Finish(t.Context(), c, idempotency.Response{Status: status, Body: []byte(body)}); err != nil {
		t.Fatalf("Finish(%s, %d) = %v", c.Key, status, err)
	}
}

// wantReplay checks that Begin(c) replays exactly status and body.
func wantReplay(t *testing.T, e *idempotency.Engine, c idempotency.Call, status int, body string) {
	t.Helper()
	st, err := e.Begin(t.Context(), c)
	if err != nil || st.Replay == nil || st.Replay.Status != status || !bytes.Equal(st.Replay.Body, []byte(body)) {
		t.Fatalf("Begin(%s) = %+v, %v; want replay of %d %s", c.Key, st, err, status, body)
	}
}

// TestEngineFinishDecidesWhatARetryGets: what a request answered decides
// what the same key gets next (docs/guarantees.md#idempotency-rules): a success is replayed, a business
// failure runs again, input never acted on frees the key, a 202 keeps it
// in flight.
func TestEngineFinishDecidesWhatARetryGets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, _ := newEngine(t, d)
		tests := []struct {
			status int
			body   string
			next   string              // replay, execute, in_use
			stored domain.RecordStatus // "": no record kept
		}{
			{200, `{"status":"paid"}`, "replay", domain.RecordSucceeded},
			{201, `{"id":"o1"}`, "replay", domain.RecordSucceeded},
			{402, `{"code":"card_declined"}`, "execute", domain.RecordFailed},
			{409, `{"code":"order_already_paid"}`, "execute", domain.RecordFailed},
			{500, `{"code":"internal_error"}`, "execute", domain.RecordFailed},
			{400, `{"code":"validation_failed"}`, "execute", ""},
			{404, `{"code":"order_not_found"}`, "execute", ""},
			{422, `{"code":"validation_failed"}`, "execute", ""},
			{202, `{"status":"processing"}`, "in_use", domain.RecordProcessing},
		}
		for i, tt := range tests {
			c := payCall("finish-" + string(rune('a'+i)))
			begin(t, e, c)
			finish(t, e, c, tt.status, tt.body)
			rec, err := e.Lookup(t.Context(), c.Scope, c.Key)
			if tt.stored == "" && !errors.Is(err, domain.ErrRecordNotFound) || tt.stored != "" && (err != nil || rec.Status != tt.stored) {
				t.Errorf("after %d: Lookup = %s, %v; want record %q", tt.status, rec.Status, err, tt.stored)
			}
			switch tt.next {
			case "replay":
				wantReplay(t, e, c, tt.status, tt.body)
			case "execute":
				if st, err := e.Begin(t.Context(), c); err != nil || st.Replay != nil || st.TookOver {
					t.Errorf("after %d: Begin = %+v, %v; want to execute again", tt.status, st, err)
				}
			case "in_use":
				var inUse *idempotency.InUseError
				if _, err := e.Begin(t.Context(), c); !errors.As(err, &inUse) || !errors.Is(err, domain.ErrKeyInUse) || inUse.RetryAfter < time.Second {
					t.Errorf("after %d: Begin = %v; want *InUseError (ErrKeyInUse) with Retry-After >= 1s", tt.status, err)
				}
			}
		}
	})
}

// TestEngineKeyReused: the same key for another body, path or method is
// ErrKeyReused, and the original's answer stays.
func TestEngineKeyReused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, _ := newEngine(t, d)
		c := payCall("reuse")
		begin(t, e, c)
		finish(t, e, c, 200, `{"status":"paid"}`)
		otherBody, otherPath, otherMethod := c, c, c
		otherBody.Body = []byte(`{"payment_method":"pm_other"}`)
		otherPath.Path = "/v1/orders/o2/pay"
		otherMethod.Method = "PUT"
		for _, o := range []idempotency.Call{otherBody, otherPath, otherMethod} {
			if _, err := e.Begin(t.Context(), o); !errors.Is(err, domain.ErrKeyReused) {
				t.Errorf("Begin(%s %s %s) = %v, want %v", o.Method, o.Path, o.Body, err, domain.ErrKeyReused)
			}
		}
		wantReplay(t, e, c, 200, `{"status":"paid"}`)
		other := c
		other.Scope = domain.CustomerScope("c2") // keys never cross callers
		begin(t, e, other)
	})
}

// TestEngineInFlight: a duplicate of a running request waits up to the
// in-flight wait, and gets the original's answer if it arrives meanwhile,
// or ErrKeyInUse with a Retry-After; a failure it waited for is replayed to
// it, not run a second time.
func TestEngineInFlight(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, _ := newEngine(t, d)
		e.InflightWait = 2 * time.Second

		done := payCall("inflight-done")
		begin(t, e, done)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, _ = e.Finish(t.Context(), done, idempotency.Response{Status: 200, Body: []byte(`{"status":"paid"}`)})
		}()
		wantReplay(t, e, done, 200, `{"status":"paid"}`)

		declined := payCall("inflight-declined")
		begin(t, e, declined)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, _ = e.Finish(t.Context(), declined, idempotency.Response{Status: 402, Body: []byte(`{"code":"card_declined"}`)})
		}()
		wantReplay(t, e, declined, 402, `{"code":"card_declined"}`)

		e.InflightWait = 50 * time.Millisecond
		held := payCall("inflight-held")
		begin(t, e, held)
		start := time.Now()
		var inUse *idempotency.InUseError
		if _, err := e.Begin(t.Context(), held); !errors.As(err, &inUse) {
			t.Fatalf("Begin(held) = %v, want *InUseError", err)
		}
		if waited := time.Since(start); waited < e.InflightWait {
			t.Errorf("Begin(held) answered after %v, want to wait %v first", waited, e.InflightWait)
		}
		if inUse.RetryAfter < time.Second || inUse.RetryAfter > testLease {
			t.Errorf("RetryAfter = %v, want between 1s and the lease (%v)", inUse.RetryAfter, testLease)
		}
	})
}

// TestEngineTakeOver: a record whose lease ran out is taken over by the
// next request with the key, which must recover (TookOver); ReleaseHeld
// ends the leases of the records this process left processing (202), so a
// retry takes over at once.
func TestEngineTakeOver(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, clk := newEngine(t, d)
		e.Now = clk.Now
		c := payCall("takeover")
		begin(t, e, c)
		clk.Advance(testLease + time.Second)
		if st, err := e.Begin(t.Context(), c); err != nil || !st.TookOver {
			t.Fatalf("Begin after the lease = %+v, %v; want TookOver", st, err)
		}

		accepted := payCall("accepted")
		begin(t, e, accepted)
		finish(t, e, accepted, 202, `{"status":"processing"}`)
		if _, err := e.Begin(t.Context(), accepted); !errors.Is(err, domain.ErrKeyInUse) {
			t.Fatalf("Begin after 202 = %v, want %v", err, domain.ErrKeyInUse)
		}
		if n, err := e.ReleaseHeld(t.Context()); err != nil || n != 1 {
			t.Fatalf("ReleaseHeld = %d, %v; want 1, nil", n, err)
		}
		clk.Advance(time.Millisecond)
		if st, err := e.Begin(t.Context(), accepted); err != nil || !st.TookOver {
			t.Errorf("Begin after ReleaseHeld = %+v, %v; want TookOver at once", st, err)
		}
		if n, _ := e.ReleaseHeld(t.Context()); n != 0 {
			t.Errorf("second ReleaseHeld = %d, want 0", n)
		}
	})
}

// TestEngineCompleteInBackground: an outcome that arrives after the
// request (webhook, recoverer) completes the record; a final one is
// replayed, a decline included, while one that is not final leaves the key
// free to run again. Only a pay record of that order is completed.
func TestEngineCompleteInBackground(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, _ := newEngine(t, d)
		ctx := t.Context()
		paid := payCall("bg-paid")
		begin(t, e, paid)
		finish(t, e, paid, 202, `{"status":"processing"}`)
		if err := e.Complete(ctx, paid.Scope, paid.Key, "o1", idempotency.Response{Status: 200, Body: []byte(`{"status":"paid"}`)}, true); err != nil {
			t.Fatal(err)
		}
		wantReplay(t, e, paid, 200, `{"status":"paid"}`)

		declined := payCall("bg-declined")
		begin(t, e, declined)
		finish(t, e, declined, 202, `{"status":"processing"}`)
		if err := e.Complete(ctx, declined.Scope, declined.Key, "o1", idempotency.Response{Status: 402, Body: []byte(`{"code":"card_declined"}`)}, true); err != nil {
			t.Fatal(err)
		}
		wantReplay(t, e, declined, 402, `{"code":"card_declined"}`)

		notCharged := payCall("bg-not-charged")
		begin(t, e, notCharged)
		finish(t, e, notCharged, 202, `{"status":"processing"}`)
		if err := e.Complete(ctx, notCharged.Scope, notCharged.Key, "o1", idempotency.Response{Status: 502, Body: []byte(`{"code":"payment_not_completed"}`)}, false); err != nil {
			t.Fatal(err)
		}
		begin(t, e, notCharged) // not final: the key runs again

		other := payCall("bg-other-order")
		begin(t, e, other)
		finish(t, e, other, 202, `{"status":"processing"}`)
		if err := e.Complete(ctx, other.Scope, other.Key, "o2", idempotency.Response{Status: 200, Body: []byte(`{}`)}, true); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Begin(ctx, other); !errors.Is(err, domain.ErrKeyInUse) {
			t.Errorf("Begin after another order's outcome = %v, want the record still processing (%v)", err, domain.ErrKeyInUse)
		}
	})
}

// TestEngineSealed: a sealed answer rests encrypted, is replayed in clear
// to the same request, is hidden from Lookup, and cannot be replayed once
// the secret key changed: ErrStoredResponseUnreadable, nothing executed.
func TestEngineSealed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, records, _ := newEngine(t, d)
		c := idempotency.Call{Scope: domain.ScopePublic, Key: "register", Method: "POST", Path: "/v1/customers",
			Body: []byte(`{"email":"ada@example.com"}`), Seal: true}
		const answer = `{"token":"ptk_secret"}`
		begin(t, e, c)
		finish(t, e, c, 201, answer)

		rec, err := records.Find(t.Context(), c.Scope, c.Key)
		if err != nil || !rec.Sealed || bytes.Contains(rec.ResponseBody, []byte("ptk_secret")) {
			t.Fatalf("stored record = sealed %v body %q, %v; want sealed, no plaintext token", rec.Sealed, rec.ResponseBody, err)
		}
		wantReplay(t, e, c, 201, answer)
		if got, err := e.Lookup(t.Context(), c.Scope, c.Key); err != nil || got.ResponseBody != nil || got.Status != domain.RecordSucceeded {
			t.Errorf("Lookup = body %q status %s, %v; want the status without the sealed body", got.ResponseBody, got.Status, err)
		}

		rotated := engineOn(t, records, "another secret of enough length")
		if _, err := rotated.Begin(t.Context(), c); !errors.Is(err, idempotency.ErrStoredResponseUnreadable) {
			t.Errorf("Begin with another secret = %v, want %v", err, idempotency.ErrStoredResponseUnreadable)
		}
		if _, err := idempotency.NewSealer("short"); err == nil {
			t.Error("NewSealer(short secret) = nil error, want one")
		}
	})
}

// TestEngineExpired: a record past its TTL is gone from the moment it
// expires: Lookup does not find it, and the key executes again.
func TestEngineExpired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, clk := newEngine(t, d)
		e.Now = clk.Now
		c := payCall("expires")
		begin(t, e, c)
		finish(t, e, c, 200, `{"status":"paid"}`)
		if _, err := e.Lookup(t.Context(), c.Scope, c.Key); err != nil {
			t.Fatalf("Lookup before expiry = %v", err)
		}
		clk.Advance(testTTL + time.Second)
		if _, err := e.Lookup(t.Context(), c.Scope, c.Key); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Errorf("Lookup after expiry = %v, want %v", err, domain.ErrRecordNotFound)
		}
		begin(t, e, c)
	})
}

// TestEngineConcurrentSameKey: many requests with one key at once, on a
// real database: exactly one executes; every other one gets its answer
// (replay) or is told the key is in use, never a second execution.
func TestEngineConcurrentSameKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, _ := newEngine(t, d)
		e.InflightWait = 2 * time.Second
		c := payCall("race")
		const n = 12
		var executed, replayed, inUse atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := e.Begin(t.Context(), c)
				switch {
				case errors.Is(err, domain.ErrKeyInUse):
					inUse.Add(1)
				case err != nil:
					t.Errorf("Begin = %v", err)
				case st.Replay != nil:
					replayed.Add(1)
				default:
					executed.Add(1)
					time.Sleep(20 * time.Millisecond)
					if _, err := e.Finish(t.Context(), c, idempotency.Response{Status: 200, Body: []byte(`{"status":"paid"}`)}); err != nil {
						t.Errorf("Finish = %v", err)
					}
				}
			}()
		}
		wg.Wait()
		if executed.Load() != 1 || executed.Load()+replayed.Load()+inUse.Load() != n {
			t.Errorf("executed %d, replayed %d, in use %d; want exactly 1 execution of %d", executed.Load(), replayed.Load(), inUse.Load(), n)
		}
	})
}

// TestFingerprint: the fingerprint covers method, path and body, so the
// same key on another order is another request.
func TestFingerprint(t *testing.T) {
	c := payCall("k")
	other := c
	other.Path = "/v1/orders/o2/pay"
	sameButKey := c
	sameButKey.Key, sameButKey.Scope = "other-key", "admin"
	if c.Fingerprint() == other.Fingerprint() {
		t.Errorf("Fingerprint is the same for %s and %s", c.Path, other.Path)
	}
	if c.Fingerprint() != sameButKey.Fingerprint() {
		t.Error("Fingerprint depends on the key or scope, want only method, path and body")
	}
}

// TestEngineRepeatOnAnotherReplica: a repeat that reaches a replica which
// has not seen its key (so it tries to insert the record first, ADR 0034)
// gets what it would get from the original's replica: the replay of a
// success, ErrKeyReused for another request, a new execution after a
// failure, ErrKeyInUse while the original runs and a takeover after its
// lease, and a new execution once the record is gone. Replicas racing on
// one new key execute it once.
func TestEngineRepeatOnAnotherReplica(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, records, clk := newEngine(t, d)
		e.Now = clk.Now
		replica := func() *idempotency.Engine {
			r := engineOn(t, records, testSecret)
			r.Now = clk.Now
			return r
		}
		ctx := t.Context()

		paid := payCall("elsewhere-paid")
		begin(t, e, paid)
		finish(t, e, paid, 200, `{"status":"paid"}`)
		wantReplay(t, replica(), paid, 200, `{"status":"paid"}`)
		reused := paid
		reused.Body = []byte(`{"payment_method":"pm_other"}`)
		if _, err := replica().Begin(ctx, reused); !errors.Is(err, domain.ErrKeyReused) {
			t.Errorf("Begin(another body) on a replica = %v, want %v", err, domain.ErrKeyReused)
		}

		declined := payCall("elsewhere-declined")
		begin(t, e, declined)
		finish(t, e, declined, 402, `{"code":"card_declined"}`)
		begin(t, replica(), declined)

		running := payCall("elsewhere-running")
		begin(t, e, running)
		var inUse *idempotency.InUseError
		if _, err := replica().Begin(ctx, running); !errors.As(err, &inUse) {
			t.Errorf("Begin(running) on a replica = %v, want *InUseError", err)
		}
		clk.Advance(testLease + time.Second)
		if st, err := replica().Begin(ctx, running); err != nil || !st.TookOver {
			t.Errorf("Begin(lease over) on a replica = %+v, %v, want TookOver", st, err)
		}

		gone := payCall("elsewhere-gone")
		begin(t, e, gone)
		finish(t, e, gone, 200, `{"status":"paid"}`)
		clk.Advance(testTTL + time.Second)
		if st, err := replica().Begin(ctx, gone); err != nil || st.Replay != nil || st.TookOver {
			t.Errorf("Begin(gone) on a replica = %+v, %v, want a new execution", st, err)
		}
		if rec, err := records.Find(ctx, gone.Scope, gone.Key); err != nil || rec.Status != domain.RecordProcessing || rec.Gone(clk.Now()) {
			t.Errorf("record after the new execution = %+v, %v, want a live processing one", rec, err)
		}

		race := payCall("elsewhere-race")
		const n = 8
		var executed atomic.Int64
		var wg sync.WaitGroup
		for range n {
			r := replica()
			wg.Go(func() {
				st, err := r.Begin(ctx, race)
				if err == nil && st.Replay == nil {
					executed.Add(1)
				} else if err != nil && !errors.Is(err, domain.ErrKeyInUse) {
					t.Errorf("Begin(race) = %v", err)
				}
			})
		}
		wg.Wait()
		if executed.Load() != 1 {
			t.Errorf("%d replicas executed one new key, want 1", executed.Load())
		}
	})
}

// finishingRecords is a record store whose InsertIfAbsent, once it found
// the key taken, lets the original finish (then) before answering: the
// window between a duplicate's failed insert and its read.
type finishingRecords struct {
	*repository.RecordStore
	then func()
}

func (r finishingRecords) InsertIfAbsent(ctx context.Context, rec domain.Record) error {
	err := r.RecordStore.InsertIfAbsent(ctx, rec)
	if errors.Is(err, domain.ErrKeyInUse) && r.then != nil {
		r.then()
	}
	return err
}

// TestEngineDuplicateOfAFailureOnAnotherReplica: a duplicate that reaches
// a replica which has not seen its key while the original runs, and whose
// insert finds the key taken just before the original fails, is a
// concurrent duplicate of that failure: it gets the decline (docs/guarantees.md#idempotency-rules), as
// it would had it read the record in flight, not a second attempt.
func TestEngineDuplicateOfAFailureOnAnotherReplica(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, records, _ := newEngine(t, d)
		c := payCall("elsewhere-declined-meanwhile")
		begin(t, e, c)
		r := engineOn(t, finishingRecords{RecordStore: records, then: func() {
			finish(t, e, c, 402, `{"code":"card_declined"}`)
		}}, testSecret)
		wantReplay(t, r, c, 402, `{"code":"card_declined"}`)
	})
}

// TestEngineRetryAfterWhenTheAnswerIsDue: a duplicate turned away while
// the original runs is told to retry when the original's answer is due
// (AnswerWithin after it took the key), not when its whole lease ends;
// past that with no answer, and without AnswerWithin, at the lease's end.
func TestEngineRetryAfterWhenTheAnswerIsDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		e, _, clk := newEngine(t, d)
		e.Now, e.InflightWait = clk.Now, 0 // turned away at once
		inUse := func(c idempotency.Call) time.Duration {
			t.Helper()
			var err *idempotency.InUseError
			if _, got := e.Begin(t.Context(), c); !errors.As(got, &err) {
				t.Fatalf("Begin(duplicate) = %v, want *InUseError", got)
			}
			return err.RetryAfter
		}
		c := payCall("retry-after")
		begin(t, e, c) // the original takes the key, with a 30s lease
		e.AnswerWithin = 15 * time.Second
		clk.Advance(2 * time.Second)
		if got := inUse(c); got < 12*time.Second || got > 13*time.Second {
			t.Errorf("2s into the original: Retry-After %v, want about 13s (its answer is due 15s after it began), not the lease's 28s", got)
		}
		clk.Advance(20 * time.Second)
		if got := inUse(c); got < 7*time.Second || got > 8*time.Second {
			t.Errorf("past the answer's due time, 22s into a 30s lease: Retry-After %v, want about 8s (the lease's end), not a retry every second", got)
		}
		clk.Advance(-20 * time.Second)
		e.AnswerWithin = 0
		if got := inUse(c); got < 27*time.Second || got > 28*time.Second {
			t.Errorf("without AnswerWithin, 2s into a 30s lease: Retry-After %v, want about 28s", got)
		}
	})
}
