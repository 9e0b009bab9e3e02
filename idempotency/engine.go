// Package idempotency is payd's idempotency mechanism
// (docs/guarantees.md#idempotency-rules): the
// engine that takes a request's key or finds what an earlier request with
// it answered, the store port it keeps records through, the sealing of
// answers that carry a secret, and the Echo middleware every mutating route
// goes through. It speaks HTTP (a stored answer is a status and a body) so
// that the use cases in service need not.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/payd/payd/domain"
)

// Call describes one idempotent request: who asks (Scope), under which key,
// and what exactly they ask (Method, Path, Body), which the fingerprint covers.
type Call struct {
	Scope   string
	Key     string
	Method  string
	Path    string
	Body    []byte // canonical form of the request body (see canonicalBody)
	OrderID string // the order a pay call is about, if any
	Seal    bool   // store the response encrypted (it carries a secret)

	final       bool      // a failure it answers is final for the key (Final)
	fingerprint string    // Fingerprint, once the middleware has computed it
	expiresAt   time.Time // the record's expiry as Begin saw it (Start.expiresAt), for Replays
	lock        string    // the token of the gate's lock Begin took for this call (Start.lock), for Finish
	lease       time.Time // the end of the lease Begin took on the record for this call (Start.lease), for Finish
}

// Fingerprint is the hex SHA-256 over the method, the concrete path and the
// canonical body: the same key on another order is a different request.
func (c Call) Fingerprint() string {
	if c.fingerprint != "" {
		return c.fingerprint
	}
	in := make([]byte, 0, len(c.Method)+len(c.Path)+2+len(c.Body))
	in = append(append(append(append(in, c.Method...), '\n'), c.Path...), '\n')
	sum := sha256.Sum256(append(in, c.Body...))
	return hex.EncodeToString(sum[:])
}

// Response is an HTTP answer as stored and replayed: status code and body.
type Response struct {
	Status int
	Body   []byte
}

// Start is what Begin decided: replay a stored response, or execute.
type Start struct {
	// Replay, when set, is the stored answer of the original request.
	Replay *Response
	// TookOver is true when the key was in flight under an expired lease and
	// this call now owns it: the use case must recover before doing anything new.
	TookOver bool

	expiresAt time.Time // of the record this call now holds, when it executes
	lock      string    // the token of the gate's lock this call holds, when it executes
	lease     time.Time // the end of the lease this call holds on the record, when it executes
}

// For returns c as Finish needs it after this Start said execute: with the
// record's expiry (for the fast copy), the token of the gate's lock Begin
// took for it, which only this call may free, and the end of its lease on
// the record, which only this call may end early.
func (st Start) For(c Call) Call {
	c.expiresAt, c.lock, c.lease = st.expiresAt, st.lock, st.lease
	return c
}

// ErrAnswerNotStored: the answer a request produced could not be stored
// under its key, so it must not be sent (ADR 0051) — a retry could run
// again and answer otherwise, and every request with the key gets the same
// answer. The record stays processing with its lease ended: a retry with
// the key takes over and answers what this request did.
var ErrAnswerNotStored = errors.New("the answer could not be stored under its idempotency key")

// Finished is what Finish stored, and so what the caller is sent.
type Finished struct {
	// Response is the key's answer: the request's own, or the one another
	// path stored first (Replayed).
	Response
	// Replayed: the record was completed first by another path (a request
	// that took over after this one's lease ran out, a webhook, the
	// recoverer) with another answer, which is the key's one answer.
	Replayed bool
}

// ErrStoredResponseUnreadable: the answer stored under a key was sealed
// with a secret key payd no longer has (PAYD_SECRET_KEY changed), so it
// cannot be replayed. The request is not executed again either: a second
// registration would create nothing, a second payment might charge twice.
var ErrStoredResponseUnreadable = errors.New("stored response cannot be opened")

// InUseError is domain.ErrKeyInUse with the time after which a retry may
// find the original finished or its lease expired.
type InUseError struct{ RetryAfter time.Duration }

func (e *InUseError) Error() string { return domain.ErrKeyInUse.Error() }

// Is makes errors.Is(err, domain.ErrKeyInUse) match.
func (e *InUseError) Is(target error) bool { return target == domain.ErrKeyInUse }

// Observer is told of each decision the engine makes about a key. It
// only watches.
type Observer interface {
	KeyDecided(outcome KeyOutcome)
}

// KeyOutcome is a decision the engine made about a key
// (payd_idempotency_total's outcome label).
type KeyOutcome string

// Key outcomes.
const (
	KeyExecuted KeyOutcome = "executed"
	KeyReplayed KeyOutcome = "replayed"
	KeyInUse    KeyOutcome = "in_use"
	KeyReused   KeyOutcome = "reused"
	KeyTookOver KeyOutcome = "took_over"
)

// KeyOutcomes lists every key outcome.
var KeyOutcomes = []KeyOutcome{KeyExecuted, KeyReplayed, KeyInUse, KeyReused, KeyTookOver}

// Engine is the idempotency engine every mutating request goes through
// (docs/guarantees.md#idempotency-rules).
// Inserting the record is the lock; its lease says how long the holder may
// take before another request with the same key may take over and recover.
type Engine struct {
	Records      RecordStore
	Sealer       *Sealer
	Lease        time.Duration // PAYD_LEASE
	InflightWait time.Duration // PAYD_INFLIGHT_WAIT
	// AnswerWithin, optional, is how long after a request took its key
	// its answer is due at the latest (payd: the provider's timeout and
	// its margin). A duplicate turned away meanwhile is told to retry
	// then, not when the whole lease ends. 0: when the lease ends.
	AnswerWithin time.Duration
	TTL          time.Duration // PAYD_IDEMPOTENCY_TTL
	Now          func() time.Time
	Observer     Observer // optional: told of each decision (metrics)
	Gate         Gate     // optional: fast lock and notifications in front of Records (Redis)
	Replays      Replays  // optional: fast copies of succeeded records (Redis)

	mu   sync.Mutex
	held map[[2]string]time.Time // keys this process left processing (202), with their lease end

	recent recentKeys // keys this process looked at lately: their repeats read first (ADR 0034)
}

// Begin takes the key for c, or finds what an earlier request with it
// answered. It returns domain.ErrKeyReused when the key was used for a
// different request and an *InUseError when the original is still running
// after the in-flight wait.
//
// With a Gate (Redis, ADR 0018) the key's fast lock comes first: a request
// that finds it taken waits for the holder's notification without touching
// the database, and one that holds it looks at the record alone. Past the
// in-flight wait, or while the gate cannot tell, the record decides alone,
// as without a gate.
func (s *Engine) Begin(ctx context.Context, c Call) (Start, error) {
	fp := c.Fingerprint()
	began := s.Now()
	deadline := began.Add(s.InflightWait)
	waited := false       // saw the original in flight: a concurrent duplicate
	var heldOff time.Time // stopped by the gate's lock: when this call began
	// Watching before the first look: a finish between a look and the
	// wait that follows it still wakes the wait.
	done, unwatch := s.watch(c)
	defer unwatch()
	// A key this process has not looked at lately is most likely new:
	// the first look inserts its record straight away, and reads it only
	// if that finds the key taken (ADR 0034).
	k := [2]string{c.Scope, c.Key}
	fresh := !s.recent.seen(k)
	s.recent.add(k) // a duplicate arriving meanwhile reads first
	for pause := 5 * time.Millisecond; ; pause = min(pause*2, 100*time.Millisecond) {
		if rec, ok := s.cached(ctx, c); ok {
			if rec.Fingerprint != fp || rec.Method != c.Method || rec.Path != c.Path {
				// A live copy of another request's success under this key
				// proves the reuse as well as the row would.
				s.observe(KeyReused)
				return Start{}, domain.ErrKeyReused
			}
			return s.replay(rec)
		}
		token := ""
		if s.Gate != nil && s.Now().Before(deadline) {
			t, err := s.Gate.Acquire(ctx, c.Scope, c.Key, s.lockFor())
			if err == nil && t == "" { // a duplicate stopped before the database
				notified, err := s.wait(ctx, done, s.heldOff(pause), deadline)
				if err != nil {
					return Start{}, err
				}
				// Held off by the gate: a concurrent duplicate if the
				// holder finishes after this call began (decide checks
				// the record's time). A lock left behind by a request that
				// ended before this one (its release lost) proves nothing,
				// and a notification may be a late echo of that request's.
				heldOff = began
				if notified {
					continue
				}
				// No word from the holder for a while: look at the record
				// after all, in case its release was lost.
			}
			if err == nil {
				token = t
			}
		}
		start, next, err := s.decide(ctx, c, fp, fresh && !waited && heldOff.IsZero(), waited, heldOff, deadline)
		fresh = false
		switch {
		case token == "":
		case next == executing && err == nil:
			start.lock = token // Finish frees it
		case next == answered && err == nil:
			// A replay: the copy is in Redis now, and duplicates held off
			// meanwhile may take it at once.
			s.Gate.Release(ctx, c.Scope, c.Key, token)
		default:
			// Nothing ran and nothing is new (the original is in flight):
			// free the lock without waking anyone.
			s.Gate.Unlock(ctx, c.Scope, c.Key, token)
		}
		switch {
		case err != nil || next == answered || next == executing:
			return start, err
		case next == waiting:
			waited = true
			if _, err := s.wait(ctx, done, pause, deadline); err != nil {
				return Start{}, err
			}
		}
	}
}

// step is what one look at the record decided.
type step int

const (
	answered  step = iota // a replay, or an error
	executing             // the key is this request's: run it
	again                 // the record changed under us: look again
	waiting               // the original is in flight: wait, then look again
)

// decide looks at the record once and decides what this request does.
// insertFirst: try to insert the record before reading it (a key this
// process has not seen: most likely new); waited: this call saw the
// record in flight; heldOff, if set: the gate's lock stopped this call,
// which began then (or, set here, its insert found the key taken then).
func (s *Engine) decide(ctx context.Context, c Call, fp string, insertFirst, waited bool, heldOff, deadline time.Time) (Start, step, error) {
	if insertFirst {
		tried := s.Now()
		r := s.newRecord(c, fp)
		err := s.Records.InsertIfAbsent(ctx, r)
		if err == nil {
			s.observe(KeyExecuted)
			return Start{expiresAt: r.ExpiresAt, lease: r.LockedUntil}, executing, nil
		}
		if !errors.Is(err, domain.ErrKeyInUse) {
			return Start{}, answered, fmt.Errorf("insert idempotency record: %w", err)
		}
		// The key has a record (maybe a gone one): read it, as for a
		// repeat. It had one when this call tried to take it, so a
		// failure recorded since is one this call was a concurrent
		// duplicate of, as for a call the gate held off: it gets the
		// failure, not a second attempt (the RecordFailed case below).
		if heldOff.IsZero() {
			heldOff = tried
		}
	}
	rec, err := s.find(ctx, c.Scope, c.Key)
	if errors.Is(err, domain.ErrRecordNotFound) {
		r := s.newRecord(c, fp)
		if err := s.Records.Insert(ctx, r); err == nil {
			s.observe(KeyExecuted)
			return Start{expiresAt: r.ExpiresAt, lease: r.LockedUntil}, executing, nil
		} else if !errors.Is(err, domain.ErrKeyInUse) {
			return Start{}, answered, fmt.Errorf("insert idempotency record: %w", err)
		}
		return Start{}, again, nil // another request inserted it first: read what it is
	}
	if err != nil {
		return Start{}, answered, fmt.Errorf("find idempotency record: %w", err)
	}
	if rec.Fingerprint != fp || rec.Method != c.Method || rec.Path != c.Path {
		s.observe(KeyReused)
		return Start{}, answered, domain.ErrKeyReused
	}
	now := s.Now()
	switch rec.Status {
	case domain.RecordSucceeded:
		if s.Replays != nil {
			s.Replays.Put(ctx, rec) // the next replay comes from the copy
		}
		start, err := s.replay(rec)
		return start, answered, err
	case domain.RecordFailed:
		concurrent := waited || !heldOff.IsZero() && !rec.UpdatedAt.Before(heldOff)
		if concurrent || rec.CompletedBy == domain.CompletedInBackground {
			// We were a concurrent duplicate of the attempt that just
			// failed (we saw it in flight, or the gate held us off and
			// it failed after we began), or the original answered 202
			// and learned of the decline only later: either way this
			// caller has not seen the decline yet, so it gets it
			// (docs/guarantees.md#idempotency-rules), not a second attempt. Paying again takes a new key.
			start, err := s.replay(rec)
			return start, answered, err
		}
		lease := now.Add(s.Lease)
		won, err := s.Records.Retry(ctx, c.Scope, c.Key, now, lease)
		if err != nil {
			return Start{}, answered, fmt.Errorf("retry idempotency record: %w", err)
		}
		if won {
			s.observe(KeyExecuted)
			return Start{expiresAt: rec.ExpiresAt, lease: lease}, executing, nil
		}
	case domain.RecordProcessing:
		if rec.LockedUntil.Before(now) {
			lease := now.Add(s.Lease)
			won, err := s.Records.TakeOver(ctx, c.Scope, c.Key, now, lease)
			if err != nil {
				return Start{}, answered, fmt.Errorf("take over idempotency record: %w", err)
			}
			if won {
				s.observe(KeyTookOver)
				return Start{TookOver: true, expiresAt: rec.ExpiresAt, lease: lease}, executing, nil
			}
			return Start{}, again, nil
		}
		if !now.Before(deadline) {
			s.observe(KeyInUse)
			return Start{}, answered, &InUseError{RetryAfter: s.retryAfter(rec, now)}
		}
		return Start{}, waiting, nil
	}
	return Start{}, again, nil
}

// retryAfter is when a duplicate of rec's request, in flight at now,
// should try again: when the request's answer is due (AnswerWithin after
// it took the key, its lease's start by this replica's PAYD_LEASE), or,
// once that has passed with no answer (a 202 waiting on the buyer, a
// replica that died), when its lease ends; never sooner than a second.
func (s *Engine) retryAfter(rec domain.Record, now time.Time) time.Duration {
	until := rec.LockedUntil
	if s.AnswerWithin > 0 {
		if due := rec.LockedUntil.Add(-s.Lease).Add(s.AnswerWithin); due.After(now) && due.Before(until) {
			until = due
		}
	}
	return max(time.Second, until.Sub(now))
}

func (s *Engine) newRecord(c Call, fp string) domain.Record {
	now := s.Now()
	return domain.Record{
		Scope: c.Scope, Key: c.Key, Method: c.Method, Path: c.Path, Fingerprint: fp,
		Status: domain.RecordProcessing, OrderID: c.OrderID,
		LockedUntil: now.Add(s.Lease), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(s.TTL),
	}
}

func (s *Engine) replay(rec domain.Record) (Start, error) {
	body := rec.ResponseBody
	if rec.Sealed {
		var err error
		if body, err = s.Sealer.Open(body); err != nil {
			return Start{}, fmt.Errorf("%w: %s: %w", ErrStoredResponseUnreadable, rec.Key, err)
		}
	}
	s.observe(KeyReplayed)
	return Start{Replay: &Response{Status: rec.ResponseStatus, Body: body}}, nil
}

// Finish stores what the request answered, according to what that answer
// means for a retry with the same key:
//   - success (2xx but 202): stored and replayed from now on;
//   - 202, outcome not known yet: the record stays processing under its
//     lease until the outcome is known (see Complete);
//   - input the request never got to act on (400, 401, 403, 404, 413, 415,
//     422): not recorded, the key is free again;
//   - a business failure (402, 409) or an internal error: stored as failed,
//     so the same key may run again as a new attempt — unless the route
//     marked it final (Final): then it is stored as failed for good and
//     replayed, like a decline learnt in the background.
//
// It returns what the caller is to be sent: r, or the answer another path
// stored first (Finished.Replayed). An error (ErrAnswerNotStored) means
// Finish could not do what r asks of the record, and r must not be sent
// (ADR 0051): the record stays processing, and this request's lease on it
// is ended so that a retry takes over at once.
func (s *Engine) Finish(ctx context.Context, c Call, r Response) (Finished, error) {
	defer s.released(ctx, c)
	f, err := s.store(ctx, c, r)
	if err != nil {
		s.letGo(ctx, c)
		return Finished{}, fmt.Errorf("%w: %s: %w", ErrAnswerNotStored, c.Key, err)
	}
	return f, nil
}

func (s *Engine) store(ctx context.Context, c Call, r Response) (Finished, error) {
	switch {
	case r.Status == http.StatusAccepted:
		s.hold(c, s.Now().Add(s.Lease))
		return Finished{Response: r}, nil
	case r.Status >= 200 && r.Status < 300:
		return s.complete(ctx, c, domain.RecordSucceeded, r)
	case notExecuted(r.Status):
		return Finished{Response: r}, s.Records.Delete(ctx, c.Scope, c.Key)
	case c.final && !c.Seal:
		done, err := s.Records.CompleteFinal(ctx, c.Scope, c.Key, r.Status, r.Body, s.Now())
		if err != nil {
			return Finished{}, fmt.Errorf("complete idempotency record: %w", err)
		}
		if !done {
			return s.storedFirst(ctx, c, r)
		}
		return Finished{Response: r}, nil
	default:
		return s.complete(ctx, c, domain.RecordFailed, r)
	}
}

// storedFirst is what the key answers when completing its record changed
// nothing: another path completed it first — a request that took over
// after this one's lease ran out, a webhook or the recoverer, or this very
// completion, whose first try's reply was lost. That answer is the key's
// one answer, and this caller's too. A record processing again (another
// request runs under the key now) or gone holds no answer to give: this
// request's is not stored.
func (s *Engine) storedFirst(ctx context.Context, c Call, r Response) (Finished, error) {
	rec, err := s.Records.Find(ctx, c.Scope, c.Key)
	if err != nil {
		return Finished{}, fmt.Errorf("read the idempotency record completed first: %w", err)
	}
	if rec.Status == domain.RecordProcessing || rec.Fingerprint != c.Fingerprint() {
		return Finished{}, fmt.Errorf("the idempotency record is %s under another request", rec.Status)
	}
	body := rec.ResponseBody
	if rec.Sealed {
		if body, err = s.Sealer.Open(body); err != nil {
			return Finished{}, fmt.Errorf("%w: %s: %w", ErrStoredResponseUnreadable, rec.Key, err)
		}
	}
	stored := Response{Status: rec.ResponseStatus, Body: body}
	return Finished{Response: stored, Replayed: stored.Status != r.Status || !bytes.Equal(stored.Body, r.Body)}, nil
}

// letGo ends this request's lease on c's record when its answer could not
// be stored, so that a retry with the key takes over at once instead of
// after the lease. That retry runs the request again, and the use cases
// find what this run did under the same key (the order's pay_request_id,
// a refund's request_id) rather than doing it twice. Only this request's
// own lease is ended: a record taken over since keeps its new holder. The
// database failing, this may fail too; the lease then runs out by itself.
func (s *Engine) letGo(ctx context.Context, c Call) {
	if !c.lease.IsZero() {
		_, _ = s.Records.ReleaseLease(ctx, c.Scope, c.Key, c.lease, s.Now())
	}
}

// Complete stores a final answer for (scope, key) if the record is still
// processing. Use cases call it when an outcome arrives outside the original
// request (webhook, recoverer). A final answer is replayed to the key from
// then on, a decline included; one that is not final (nothing happened, the
// customer may simply try again) leaves the key free to run again.
// Only the record of a pay call for orderID is completed.
func (s *Engine) Complete(ctx context.Context, scope, key, orderID string, r Response, final bool) error {
	status := domain.RecordSucceeded
	if r.Status >= 300 {
		status = domain.RecordFailed
	}
	by := domain.CompletedInBackground
	if !final {
		by = domain.CompletedByRequest // the key stays free to run again
	}
	done, err := s.Records.CompleteInBackground(ctx, scope, key, orderID, status, r.Status, r.Body, by, s.Now())
	if err != nil {
		return fmt.Errorf("complete idempotency record: %w", err)
	}
	if done && s.Gate != nil {
		// Wake duplicates waiting on the key. Only tell: the lock, if any
		// is left, is not this caller's (it belongs to whichever request
		// holds it now) and expires by itself.
		s.Gate.Release(ctx, scope, key, "")
	}
	return nil
}

func (s *Engine) complete(ctx context.Context, c Call, status domain.RecordStatus, r Response) (Finished, error) {
	body, sealed := r.Body, false
	if c.Seal {
		var err error
		if body, err = s.Sealer.Seal(r.Body); err != nil {
			return Finished{}, err
		}
		sealed = true
	}
	done, err := s.Records.Complete(ctx, c.Scope, c.Key, status, r.Status, body, sealed, s.Now())
	if err != nil {
		return Finished{}, fmt.Errorf("complete idempotency record: %w", err)
	}
	if !done {
		return s.storedFirst(ctx, c, r)
	}
	if status == domain.RecordSucceeded {
		s.keep(ctx, c, r.Status, body, sealed)
	}
	return Finished{Response: r}, nil
}

// find returns the record for (scope, key) unless it is gone (expired, see
// domain.Record.Gone): a gone record is domain.ErrRecordNotFound from the
// moment it expires, whether or not the purge job has deleted it yet, so
// Begin inserts a new one (Insert replaces the gone row) and the lookups
// answer 404.
func (s *Engine) find(ctx context.Context, scope, key string) (domain.Record, error) {
	rec, err := s.Records.Find(ctx, scope, key)
	if err == nil && rec.Gone(s.Now()) {
		return domain.Record{}, fmt.Errorf("idempotency record %s expired at %s: %w", key, rec.ExpiresAt.Format(time.RFC3339), domain.ErrRecordNotFound)
	}
	return rec, err
}

// Lookup returns the record for (scope, key), for GET /v1/requests/{key}
// and the admin inspection; an expired record is not found. A sealed response stays sealed: it holds a
// secret that only a replay of the original request may see.
func (s *Engine) Lookup(ctx context.Context, scope, key string) (domain.Record, error) {
	rec, err := s.find(ctx, scope, key)
	if err != nil {
		return domain.Record{}, err
	}
	if rec.Sealed {
		rec.ResponseBody = nil
	}
	return rec, nil
}

func notExecuted(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
		http.StatusUnprocessableEntity:
		return true
	}
	return false
}

func (s *Engine) observe(outcome KeyOutcome) {
	if s.Observer != nil {
		s.Observer.KeyDecided(outcome)
	}
}

// hold remembers a key this process left processing under its lease, so
// shutdown can release it; leases already over are forgotten on the way.
func (s *Engine) hold(c Call, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(map[[2]string]time.Time)
	}
	now := s.Now()
	for k, end := range s.held {
		if end.Before(now) {
			delete(s.held, k)
		}
	}
	s.held[[2]string{c.Scope, c.Key}] = until
}

// ReleaseHeld ends the leases of the records this process still holds, so
// after a graceful shutdown a retry with their keys takes over (and
// recovers the payment from the provider) at once instead of waiting for
// the lease to run out. It returns how many leases it released.
func (s *Engine) ReleaseHeld(ctx context.Context) (int, error) {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	n := 0
	var errs []error
	for k := range held {
		ok, err := s.Records.ReleaseLease(ctx, k[0], k[1], time.Time{}, s.Now())
		if ok {
			n++
		}
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}
