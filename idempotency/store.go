package idempotency

import (
	"context"
	"time"

	"github.com/payd/payd/domain"
)

// RecordStore keeps idempotency records.
type RecordStore interface {
	// Find returns the record for (scope, key), or domain.ErrRecordNotFound.
	Find(ctx context.Context, scope, key string) (domain.Record, error)
	// Insert stores a new record in status processing: it is the lock. An
	// existing (scope, key) is domain.ErrKeyInUse, unless that record is
	// gone at r.CreatedAt (domain.Record.Gone): then r replaces it.
	Insert(ctx context.Context, r domain.Record) error
	// InsertIfAbsent is Insert for a key that most likely has no record:
	// one statement, and any record of (scope, key), even a gone one, is
	// domain.ErrKeyInUse (the caller reads it, and Insert replaces it if
	// it is gone).
	InsertIfAbsent(ctx context.Context, r domain.Record) error
	// TakeOver gives a processing record whose lease ran out before now a
	// new lease until lockedUntil; it reports whether this caller won it.
	TakeOver(ctx context.Context, scope, key string, now, lockedUntil time.Time) (bool, error)
	// ReleaseLease ends a processing record's lease at now (graceful
	// shutdown, an answer that could not be stored), so a retry may take it
	// over at once. A non-zero heldUntil is the lease the caller holds: a
	// record under another lease (taken over since) is left alone.
	ReleaseLease(ctx context.Context, scope, key string, heldUntil, now time.Time) (bool, error)
	// Retry moves a failed record back to processing with a new lease, for a
	// new attempt with the same key; it reports whether this caller won it.
	Retry(ctx context.Context, scope, key string, now, lockedUntil time.Time) (bool, error)
	// Complete stores the final response of a processing record and its
	// status (succeeded or failed); it reports whether a row changed.
	Complete(ctx context.Context, scope, key string, status domain.RecordStatus, code int, body []byte, sealed bool, now time.Time) (bool, error)
	// CompleteInBackground is Complete for an answer stored after the
	// request ended (its payment settled by webhook or recoverer), marked
	// as completed by; only a pay record for orderID is completed.
	CompleteInBackground(ctx context.Context, scope, key, orderID string, status domain.RecordStatus, code int, body []byte, by string, now time.Time) (bool, error)
	// CompleteFinal stores a processing record's failure answer as final:
	// failed, yet replayed to every later request with the key instead of
	// running again (marked domain.CompletedInBackground, as a failure
	// learnt after a 202 is); it reports whether a row changed.
	CompleteFinal(ctx context.Context, scope, key string, code int, body []byte, now time.Time) (bool, error)
	// Delete removes a processing record whose request never executed
	// (validation failed), leaving the key free.
	Delete(ctx context.Context, scope, key string) error
	// PurgeExpired deletes up to limit records that expired before now and
	// are not processing under a live lease; it returns how many went.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int64, error)
}
