package idempotency

import (
	"context"
	"time"

	"github.com/payd/payd/domain"
)

// Gate is an optional fast lock in front of the records (Redis, ADR 0018):
// a request takes it before inserting its record, so a concurrent duplicate
// learns at once that the key is taken and waits for a notification instead
// of racing to the database and polling it. The record stays the lock that
// counts: a gate that fails or forgets only costs work, never correctness.
type Gate interface {
	// Acquire takes the key's fast lock for lease and returns its token,
	// which only this caller has; "" means another request holds it. An
	// error means the gate cannot tell: the caller goes to the database as
	// if there were no gate.
	Acquire(ctx context.Context, scope, key string, lease time.Duration) (string, error)
	// Watch returns a channel signalled when a request finishes with the
	// key (on any replica sharing the gate), and a function ending the
	// watch. It is registered before the caller looks at the record, so a
	// finish between the look and the wait is not missed.
	Watch(scope, key string) (<-chan struct{}, func())
	// Release frees the key's fast lock if it still holds token (a lock
	// that expired and was taken by another request is left alone) and
	// tells every watcher of the key that a request finished with it.
	// With token "" it only tells.
	Release(ctx context.Context, scope, key, token string)
	// Unlock frees the key's fast lock if it still holds token, for a
	// request that then ran nothing (it replayed, or found the original in
	// flight), and tells no one: nothing finished.
	Unlock(ctx context.Context, scope, key, token string)
	// Live reports whether notifications are flowing now; while they are
	// not, a waiting duplicate falls back to polling the records.
	Live() bool
}

// Replays is an optional fast copy of succeeded records (Redis, ADR 0018),
// read before the records when a key arrives. A succeeded record never
// changes until it expires, so a copy is as good as the row; a miss, an
// eviction or an error just means reading the row.
type Replays interface {
	// Get returns the copy of (scope, key), if there is one.
	Get(ctx context.Context, scope, key string) (domain.Record, bool)
	// Put keeps a copy of a succeeded record until at most its ExpiresAt.
	Put(ctx context.Context, r domain.Record)
}

// watch starts watching c's key on the gate, if there is one.
func (s *Engine) watch(c Call) (<-chan struct{}, func()) {
	if s.Gate == nil {
		return nil, func() {}
	}
	return s.Gate.Watch(c.Scope, c.Key)
}

// wait pauses a duplicate until the key's holder finishes (a notification),
// pause passes, or until comes; with live notifications, pause is only a
// safety net and is longer.
// It reports whether a notification ended the wait.
func (s *Engine) wait(ctx context.Context, done <-chan struct{}, pause time.Duration, until time.Time) (bool, error) {
	if s.Gate != nil && s.Gate.Live() {
		pause = max(pause, 250*time.Millisecond)
	}
	t := time.NewTimer(max(0, min(pause, until.Sub(s.Now()))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-done:
		return true, nil
	case <-t.C:
		return false, nil
	}
}

// heldOff is how long a duplicate stopped by the gate waits for the
// holder's notification before it looks at the record after all: long,
// while notifications flow (the notification is what it waits for), the
// usual pause while they do not.
func (s *Engine) heldOff(pause time.Duration) time.Duration {
	if s.Gate.Live() {
		return max(pause, 500*time.Millisecond)
	}
	return pause
}

// lockFor is how long the gate's lock lasts: long enough to cover the
// in-flight wait of the duplicates it holds off, short enough that a lock
// whose release was lost (Redis slow at that moment) strands no one for
// long. A holder that runs longer is still protected by its record.
func (s *Engine) lockFor() time.Duration {
	return min(s.Lease, max(s.InflightWait, time.Second))
}

// released tells the gate the request with c's key is over, freeing the
// lock Begin took for it (c.lock) if it still holds it.
func (s *Engine) released(ctx context.Context, c Call) {
	if s.Gate != nil {
		s.Gate.Release(ctx, c.Scope, c.Key, c.lock)
	}
}

// cached returns the fast copy of c's record if it is one Begin may replay.
func (s *Engine) cached(ctx context.Context, c Call) (domain.Record, bool) {
	if s.Replays == nil {
		return domain.Record{}, false
	}
	rec, ok := s.Replays.Get(ctx, c.Scope, c.Key)
	if !ok || rec.Status != domain.RecordSucceeded || rec.Gone(s.Now()) {
		return domain.Record{}, false
	}
	return rec, true
}

// keep stores a fast copy of a record this request just completed as
// succeeded. Its expiry is the one Begin saw; without it nothing is kept
// (the next replay reads the row and keeps that).
func (s *Engine) keep(ctx context.Context, c Call, code int, body []byte, sealed bool) {
	if s.Replays == nil || c.expiresAt.IsZero() {
		return
	}
	now := s.Now().Truncate(time.Microsecond) // as the row keeps it
	s.Replays.Put(ctx, domain.Record{Scope: c.Scope, Key: c.Key, Method: c.Method, Path: c.Path, Fingerprint: c.Fingerprint(),
		Status: domain.RecordSucceeded, ResponseStatus: code, ResponseBody: body, Sealed: sealed, OrderID: c.OrderID,
		CompletedBy: domain.CompletedByRequest, UpdatedAt: now, ExpiresAt: c.expiresAt})
}
