package idempotency_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// unsure is a real record store whose completions can be made to fail
// (the database lost in the middle of the request) or to be beaten by
// another path that completes the record first (a request that took over
// after this one's lease ran out).
type unsure struct {
	idempotency.RecordStore
	fail  atomic.Bool                                           // Complete and CompleteFinal fail, storing nothing
	first atomic.Pointer[func(ctx context.Context, key string)] // runs once before the next Complete
}

var errLost = fmt.Errorf("%w: connection reset by peer", domain.ErrUnavailable)

func (u *unsure) Complete(ctx context.Context, scope, key string, status domain.RecordStatus, code int, body []byte, sealed bool, now time.Time) (bool, error) {
	if f := u.first.Swap(nil); f != nil {
		(*f)(ctx, key)
	}
	if u.fail.Load() {
		return false, errLost
	}
	return u.RecordStore.Complete(ctx, scope, key, status, code, body, sealed, now)
}

func (u *unsure) CompleteFinal(ctx context.Context, scope, key string, code int, body []byte, now time.Time) (bool, error) {
	if u.fail.Load() {
		return false, errLost
	}
	return u.RecordStore.CompleteFinal(ctx, scope, key, code, body, now)
}

// TestAnswerSentOnlyOnceStored: a request whose answer cannot be stored
// under its key is not sent that answer: it gets 503 service_unavailable
// with Retry-After, the record stays processing with its lease ended, and
// the retry takes over at once and runs again; its answer is the key's
// one answer from then on. A success, a failure marked final and a sealed
// answer alike (ADR 0051).
func TestAnswerSentOnlyOnceStored(t *testing.T) {
	pay := `{"payment_method":"pm_ok"}`
	tests := []struct {
		name  string
		first req
	}{
		{"success", req{path: "/orders/o1/pay", key: "k1", body: pay}},
		{"final failure", req{path: "/orders/o1/pay", key: "k1", body: pay, status: 502, final: true}},
		{"sealed", req{path: "/customers", key: "reg-1", body: `{"email":"ada@example.com"}`, scope: domain.ScopePublic}},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				store := &unsure{RecordStore: repository.NewRecordStore(db)}
				s := newServer(t, store)
				s.prefix = fmt.Sprintf("stored%d-", i)
				store.fail.Store(true)
				w := s.do(t, tt.first)
				s.check(t, 0, tt.first, w, want{status: 503, code: "service_unavailable", ran: true}, true, nil)
				if ra := w.Header().Get("Retry-After"); ra == "" {
					t.Errorf("503 without Retry-After")
				}
				scope := tt.first.scope
				if scope == "" {
					scope = domain.CustomerScope("c1")
				}
				rec, err := s.engine.Lookup(t.Context(), s.prefix+scope, tt.first.key)
				if err != nil || rec.Status != domain.RecordProcessing || rec.LockedUntil.After(s.clock.Now()) {
					t.Errorf("record after the lost store = %s locked until %v, %v; want processing, its lease ended", rec.Status, rec.LockedUntil, err)
				}

				store.fail.Store(false)
				s.clock.Advance(time.Millisecond)
				runs := s.runs.Load()
				again := s.do(t, tt.first)
				s.check(t, 1, tt.first, again, want{status: w0(tt.first), ran: true}, s.runs.Load() > runs, nil)
				runs = s.runs.Load()
				replay := s.do(t, tt.first)
				s.check(t, 2, tt.first, replay, want{status: w0(tt.first), replayOf: 1}, s.runs.Load() > runs, [][]byte{again.Body.Bytes()})
			})
		}
	})
}

// w0 is the status the stub answers r with.
func w0(r req) int {
	if r.status != 0 {
		return r.status
	}
	return 201
}

// TestAnswerStoredFirstElsewhereIsSent: when another path completed the
// key's record while this request ran (a request that took over after
// this one's lease ran out), the answer stored there is the key's one
// answer, and this request is sent it, marked replayed, not its own.
func TestAnswerStoredFirstElsewhereIsSent(t *testing.T) {
	pay := `{"payment_method":"pm_ok"}`
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		store := &unsure{RecordStore: repository.NewRecordStore(dbtest.Open(t, d))}
		s := newServer(t, store)
		r := req{path: "/orders/o1/pay", key: "k1", body: pay}
		other := []byte(`{"run":"the taker's"}`)
		taker := func(ctx context.Context, key string) {
			c := s.call(domain.CustomerScope("c1"), key, r.path, r.body)
			if _, err := store.RecordStore.Complete(ctx, c.Scope, c.Key, domain.RecordSucceeded, 200, other, false, s.clock.Now()); err != nil {
				t.Errorf("the taker's Complete = %v", err)
			}
		}
		store.first.Store(&taker)
		w := s.do(t, r)
		s.check(t, 0, r, w, want{status: 200, replayOf: 1, ran: true}, true, [][]byte{other})
		replay := s.do(t, r)
		s.check(t, 1, r, replay, want{status: 200, replayOf: 1}, false, [][]byte{other})
	})
}
