package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/migrations"
)

// recordRow is a row of idempotency_records.
type recordRow struct {
	Scope          string         `gorm:"column:scope"`
	Key            string         `gorm:"column:idem_key"`
	Method         string         `gorm:"column:method"`
	Path           string         `gorm:"column:path"`
	Fingerprint    string         `gorm:"column:fingerprint"`
	Status         string         `gorm:"column:status"`
	ResponseStatus int            `gorm:"column:response_status"`
	ResponseBody   []byte         `gorm:"column:response_body"`
	ResponseSealed bool           `gorm:"column:response_sealed"`
	OrderID        sql.NullString `gorm:"column:order_id"`
	CompletedBy    sql.NullString `gorm:"column:completed_by"`
	LockedUntil    utcTime        `gorm:"column:locked_until"`
	CreatedAt      utcTime        `gorm:"column:created_at"`
	UpdatedAt      utcTime        `gorm:"column:updated_at"`
	ExpiresAt      utcTime        `gorm:"column:expires_at"`
}

// TableName tells GORM the table.
func (recordRow) TableName() string { return "idempotency_records" }

// recordColumns are the columns of recordRow, in the order of fields and
// values: Find and Insert, on every pay, name them and scan them by hand
// rather than have GORM reflect on the row.
const recordColumns = `scope, idem_key, method, path, fingerprint, status, response_status, response_body,
	response_sealed, order_id, completed_by, locked_until, created_at, updated_at, expires_at`

// fields are the scan destinations of recordColumns.
func (r *recordRow) fields() []any {
	return []any{&r.Scope, &r.Key, &r.Method, &r.Path, &r.Fingerprint, &r.Status, &r.ResponseStatus, &r.ResponseBody,
		&r.ResponseSealed, &r.OrderID, &r.CompletedBy, &r.LockedUntil, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt}
}

// values are the arguments of recordColumns.
func (r *recordRow) values() []any {
	return []any{r.Scope, r.Key, r.Method, r.Path, r.Fingerprint, r.Status, r.ResponseStatus, r.ResponseBody,
		r.ResponseSealed, r.OrderID, r.CompletedBy, r.LockedUntil, r.CreatedAt, r.UpdatedAt, r.ExpiresAt}
}

func recordFromDomain(r domain.Record) recordRow {
	return recordRow{
		Scope: r.Scope, Key: r.Key, Method: r.Method, Path: r.Path, Fingerprint: r.Fingerprint,
		Status: string(r.Status), ResponseStatus: r.ResponseStatus, ResponseBody: r.ResponseBody,
		ResponseSealed: r.Sealed, OrderID: nullString(r.OrderID), LockedUntil: ts(r.LockedUntil),
		CreatedAt: ts(r.CreatedAt), UpdatedAt: ts(r.UpdatedAt), ExpiresAt: ts(r.ExpiresAt),
	}
}

func (r recordRow) toDomain() domain.Record {
	return domain.Record{
		Scope: r.Scope, Key: r.Key, Method: r.Method, Path: r.Path, Fingerprint: r.Fingerprint,
		Status: domain.RecordStatus(r.Status), ResponseStatus: r.ResponseStatus, ResponseBody: r.ResponseBody,
		Sealed: r.ResponseSealed, OrderID: r.OrderID.String, CompletedBy: r.CompletedBy.String, LockedUntil: r.LockedUntil.time(),
		CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time(), ExpiresAt: r.ExpiresAt.time(),
	}
}

// RecordStore keeps idempotency records. The primary key (scope, idem_key)
// is the lock: whoever inserts the row owns the key until its lease
// (locked_until) runs out.
type RecordStore struct{ db *DB }

// NewRecordStore returns a RecordStore on db.
func NewRecordStore(db *DB) *RecordStore { return &RecordStore{db: db} }

// Find returns the record for (scope, key), or domain.ErrRecordNotFound.
// It returns a gone record too (the purge job may not have run): whether
// the record still counts is the caller's decision (domain.Record.Gone).
func (s *RecordStore) Find(ctx context.Context, scope, key string) (domain.Record, error) {
	var row recordRow
	err := s.db.queryRow(ctx, `SELECT `+recordColumns+` FROM idempotency_records WHERE scope = ? AND idem_key = ?`, scope, key).
		Scan(row.fields()...)
	if err != nil {
		return domain.Record{}, fmt.Errorf("find idempotency record %s: %w", key, notFound(classify(err), domain.ErrRecordNotFound))
	}
	return row.toDomain(), nil
}

// Insert stores r in status processing, whatever r.Status says: inserting
// is taking the lock. A (scope, key) that exists already is
// domain.ErrKeyInUse, decided by the primary key, not by a prior read —
// unless the row there is gone at r.CreatedAt (see domain.Record.Gone): a
// gone record is absent, so r takes its place (replaceGone).
func (s *RecordStore) Insert(ctx context.Context, r domain.Record) error {
	err := s.InsertIfAbsent(ctx, r)
	if !errors.Is(err, domain.ErrKeyInUse) {
		return err
	}
	replaced, err := s.replaceGone(ctx, processingRow(r), r.CreatedAt)
	if err != nil || replaced {
		return err
	}
	// The row in the way was live, or another request took the key, or
	// the purge deleted the gone row between the two statements: only in
	// the last case does the key take an INSERT now.
	return s.InsertIfAbsent(ctx, r)
}

// InsertIfAbsent is Insert without the replacement: any row of (scope,
// key), gone or not, is domain.ErrKeyInUse. One statement.
func (s *RecordStore) InsertIfAbsent(ctx context.Context, r domain.Record) error {
	row := processingRow(r)
	_, err := s.db.exec(ctx, `INSERT INTO idempotency_records (`+recordColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row.values()...)
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return domain.ErrKeyInUse
	}
	return fmt.Errorf("insert idempotency record %s: %w", r.Key, err)
}

// processingRow is r's row in status processing, whatever r.Status says:
// inserting is taking the lock.
func processingRow(r domain.Record) recordRow {
	row := recordFromDomain(r)
	row.Status = string(domain.RecordProcessing)
	return row
}

// goneAt is domain.Record.Gone in SQL, for the record's row, at the time
// given as its two arguments.
var goneAt = "expires_at < ? AND (status <> " + sqlStatus(domain.RecordProcessing) + " OR locked_until < ?)"

// The record machine's guards, rendered from domain's table. Complete and
// CompleteInBackground bind the status they set (succeeded or failed):
// both completions leave from the same statuses (a domain test holds them
// to it). Delete removes a record in the statuses a completion leaves
// from: one whose request has not answered.
var (
	recordComplete = guardOf(domain.RecordMachine, domain.RecordEventSucceed)
	recordRetry    = guardOf(domain.RecordMachine, domain.RecordEventRetry)
	recordTakeOver = guardOf(domain.RecordMachine, domain.RecordEventTakeOver)
	recordRelease  = guardOf(domain.RecordMachine, domain.RecordEventRelease)
)

// The record's guarded statements, each built once from the guards above
// (TestDerivedStatements has them written out in full).
var (
	// replaceGoneRecord is replaceGone's.
	replaceGoneRecord = `UPDATE idempotency_records
		SET method = ?, path = ?, fingerprint = ?, status = ?, response_status = 0, response_body = NULL,
			response_sealed = ?, order_id = ?, completed_by = NULL, locked_until = ?, created_at = ?, updated_at = ?, expires_at = ?
		WHERE scope = ? AND idem_key = ? AND ` + goneAt

	// takeOverRecord is TakeOver's.
	takeOverRecord = `UPDATE idempotency_records
		SET locked_until = ?, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status IN ` + recordTakeOver.from + ` AND locked_until < ?`

	// releaseRecordLease is ReleaseLease's.
	releaseRecordLease = `UPDATE idempotency_records
		SET locked_until = ?, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status IN ` + recordRelease.from + ` AND locked_until > ?`

	// releaseOwnRecordLease is ReleaseLease's for the holder of one lease.
	releaseOwnRecordLease = releaseRecordLease + ` AND locked_until = ?`

	// retryRecord is Retry's.
	retryRecord = `UPDATE idempotency_records
		SET status = ` + recordRetry.to + `, locked_until = ?, response_status = 0, response_body = NULL,
			response_sealed = ?, completed_by = NULL, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status IN ` + recordRetry.from

	// completeRecord is Complete's (through complete).
	completeRecord = `UPDATE idempotency_records
		SET status = ?, response_status = ?, response_body = ?, response_sealed = ?, completed_by = ?, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status IN ` + recordComplete.from

	// completeRecordOfOrder is CompleteInBackground's.
	completeRecordOfOrder = completeRecord + ` AND order_id = ?`

	// deleteRecord is Delete's.
	deleteRecord = `DELETE FROM idempotency_records
		WHERE scope = ? AND idem_key = ? AND status IN ` + recordComplete.from
)

// claimBackgroundAnswer is Complete's second statement: the record holds
// the very answer the request carries, stored in the background, and is
// marked as the request's own.
const claimBackgroundAnswer = `UPDATE idempotency_records
		SET completed_by = ?, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status = ? AND response_status = ? AND completed_by = ?`

// replaceGone overwrites every column of the record of (row.Scope, row.Key)
// with row if that record is gone at now, and reports whether it did. One
// UPDATE guarded by the gone predicate, like TakeOver: of callers replacing
// one gone record, the first matches it and every later one finds the new
// record, which is not gone, and matches nothing. Not DELETE then INSERT:
// on InnoDB, INSERTs waiting on a deleted key take shared locks that
// deadlock each other.
func (s *RecordStore) replaceGone(ctx context.Context, row recordRow, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"replace gone idempotency record", row.Key}, replaceGoneRecord,
		row.Method, row.Path, row.Fingerprint, row.Status, false, row.OrderID,
		row.LockedUntil, row.CreatedAt, row.UpdatedAt, row.ExpiresAt, row.Scope, row.Key, ts(now), ts(now))
}

// TakeOver gives a processing record whose lease ran out before now a new
// lease until lockedUntil, and reports whether this caller won it: of many
// callers that saw the same dead lease, the first UPDATE moves
// locked_until past now and every later one matches nothing.
func (s *RecordStore) TakeOver(ctx context.Context, scope, key string, now, lockedUntil time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"take over idempotency record", key}, takeOverRecord,
		ts(lockedUntil), ts(now), scope, key, ts(now))
}

// ReleaseLease ends the lease of a processing record at now, so the next
// request with its key may take it over at once instead of waiting the
// lease out (payd does this for the records it holds when it shuts down,
// and for one whose answer it could not store). A non-zero heldUntil is
// the end of the lease the caller took: the record's locked_until is its
// holder's token, and a record taken over since, under a lease of its new
// holder, is left alone.
func (s *RecordStore) ReleaseLease(ctx context.Context, scope, key string, heldUntil, now time.Time) (bool, error) {
	if heldUntil.IsZero() {
		return s.db.guarded(ctx, act{"release idempotency record", key}, releaseRecordLease,
			ts(now), ts(now), scope, key, ts(now))
	}
	return s.db.guarded(ctx, act{"release idempotency record", key}, releaseOwnRecordLease,
		ts(now), ts(now), scope, key, ts(now), ts(heldUntil))
}

// Retry moves a failed record back to processing with a new lease and no
// stored response, for a new attempt under the same key; it reports whether
// this caller won it.
func (s *RecordStore) Retry(ctx context.Context, scope, key string, now, lockedUntil time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"retry idempotency record", key}, retryRecord,
		ts(lockedUntil), false, ts(now), scope, key)
}

// Complete stores the final response of a processing record with its
// status (succeeded or failed) and reports whether a row changed: a record
// already completed by another path keeps its first response.
//
// A webhook or the recoverer may have stored the very same answer while
// the request was still on its way back (a decline reported both ways at
// once). The caller then did see that answer, so the record is marked as
// completed by the request: a retry with the key is a new attempt, not a
// replay of a decline the caller already has.
func (s *RecordStore) Complete(ctx context.Context, scope, key string, status domain.RecordStatus, code int,
	body []byte, sealed bool, now time.Time) (bool, error) {
	done, err := s.complete(ctx, scope, key, status, code, body, sealed, domain.CompletedByRequest, now)
	if err != nil || done {
		return done, err
	}
	_, err = s.db.guarded(ctx, act{"complete idempotency record", key}, claimBackgroundAnswer,
		domain.CompletedByRequest, ts(now), scope, key, string(status), code, domain.CompletedInBackground)
	return false, err
}

// CompleteInBackground is Complete for an answer stored after the request
// ended — its payment settled by webhook or recoverer — and marked so
// (by = domain.CompletedInBackground), or marked as the request's own
// answer (by = domain.CompletedByRequest) when it leaves the key free to
// run again. Only a record of a pay call for orderID is completed: once a
// record has gone, its key may be taken by a request about another order,
// and a late outcome of the old payment is no answer to that one.
func (s *RecordStore) CompleteInBackground(ctx context.Context, scope, key, orderID string, status domain.RecordStatus, code int,
	body []byte, by string, now time.Time) (bool, error) {
	if _, ok := domain.CompleteEvent(status); !ok {
		return false, fmt.Errorf("complete idempotency record %s: status %q is not final", key, status)
	}
	return s.db.guarded(ctx, act{"complete idempotency record", key}, completeRecordOfOrder,
		string(status), code, body, false, by, ts(now), scope, key, orderID)
}

// CompleteFinal stores a failure answer the request itself gave as final
// for its key: failed, and marked as an answer every later request with
// the key is given (domain.CompletedInBackground), not a second run.
func (s *RecordStore) CompleteFinal(ctx context.Context, scope, key string, code int, body []byte, now time.Time) (bool, error) {
	return s.complete(ctx, scope, key, domain.RecordFailed, code, body, false, domain.CompletedInBackground, now)
}

func (s *RecordStore) complete(ctx context.Context, scope, key string, status domain.RecordStatus, code int,
	body []byte, sealed bool, by string, now time.Time) (bool, error) {
	if _, ok := domain.CompleteEvent(status); !ok {
		return false, fmt.Errorf("complete idempotency record %s: status %q is not final", key, status)
	}
	return s.db.guarded(ctx, act{"complete idempotency record", key}, completeRecord,
		string(status), code, body, sealed, by, ts(now), scope, key)
}

// Delete removes a processing record whose request never executed
// (validation failed), leaving the key free. Completed records stay.
func (s *RecordStore) Delete(ctx context.Context, scope, key string) error {
	_, err := s.db.guarded(ctx, act{"delete idempotency record", key}, deleteRecord, scope, key)
	return err
}

// PurgeExpired deletes up to limit records (100 when limit <= 0) that
// expired before now — completed ones, and processing ones whose lease ran
// out too — and returns how many went. A processing record under a live
// lease is someone's lock and stays; an abandoned one past its expiry only
// takes room: the payment it guarded lives on in the order's
// pay_request_id and attempts, which a later request with the key finds.
// These are exactly the gone records (goneAt), which callers already treat
// as absent: purging frees room and changes no answer.
//
// It reads the batch's keys, oldest first by the expiry index, and then
// deletes them in one round trip and one commit by primary key, the guard
// repeated (docs/adr/0061-set-based-purge.md): one commit per batch, not
// one per record, so the purge outruns the peak rate at which pays create
// records.
//
// One replica purges at a time, under the job's lease (leases.go): two
// purges reading overlapping batches deadlocked on MariaDB with a request
// re-inserting a key, whose INSERT holds a shared lock on the record one
// purge had just deleted and wants it exclusive, while the other purge,
// which read the same record in its batch, queued for it between the two.
// Another replica's pass meanwhile purges nothing (0). On MySQL each
// record is then deleted by its own statement on its whole primary key,
// all in one packet and one transaction: a unique lookup reads no other
// row, where one DELETE of the whole list walked the primary key from
// one listed key to the next and locked the rows between them, a request's
// among them. On SQLite, whose writers take turns, one DELETE of the list
// does it.
func (s *RecordStore) PurgeExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	var n int64
	_, err := s.db.withLease(ctx, purgeLeaseName, now, purgeLease, func(ctx context.Context) error {
		var keys []struct{ Scope, IdemKey string }
		err := s.db.conn(ctx).Model(&recordRow{}).Select("scope, idem_key").
			Where(goneAt, ts(now), ts(now)).
			Order("expires_at").Limit(batchSize(limit)).Scan(&keys).Error
		if err != nil || len(keys) == 0 {
			return err
		}
		if s.db.dialect != migrations.MySQL {
			args := make([]any, 0, 2*len(keys)+2)
			for _, k := range keys {
				args = append(args, k.Scope, k.IdemKey)
			}
			n, err = s.db.exec(ctx, purgeRecords(len(keys)), append(args, ts(now), ts(now))...)
			return err
		}
		args := make([]any, 0, 4*len(keys))
		for _, k := range keys {
			args = append(args, k.Scope, k.IdemKey, ts(now), ts(now))
		}
		return s.db.inTx(ctx, func(ctx context.Context) error {
			if _, err := s.db.exec(ctx, "SET @purged = 0;"+strings.Repeat(purgeOneRecord, len(keys)), args...); err != nil {
				return err
			}
			return s.db.queryRow(ctx, "SELECT @purged").Scan(&n)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("purge expired idempotency records: %w", err)
	}
	return n, nil
}

// The purge's lease: its name in job_leases, and how long a pass may hold
// it (a pass takes milliseconds; one that dies holding it delays the next
// by this much).
const (
	purgeLeaseName = "purge_idempotency"
	purgeLease     = time.Minute
)

// purgeOneRecord deletes one gone record by its whole primary key and adds
// the rows it deleted to @purged: PurgeExpired sends one per record of its
// batch, in one packet; its arguments are the key's scope and idem_key,
// then goneAt's.
var purgeOneRecord = `DELETE FROM idempotency_records WHERE scope = ? AND idem_key = ? AND ` + goneAt + `; SET @purged = @purged + ROW_COUNT();`

// purgeRecords is PurgeExpired's DELETE of n records on SQLite, by primary
// key, the guard repeated: its arguments are the n keys' scope and
// idem_key, then goneAt's.
func purgeRecords(n int) string {
	return `DELETE FROM idempotency_records WHERE (scope, idem_key) IN (` +
		strings.TrimSuffix(strings.Repeat("(?, ?), ", n), ", ") + `) AND ` + goneAt
}
