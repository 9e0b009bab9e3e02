package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
)

// The raw-SQL floor: the statements payd's pay path sends, written with
// database/sql (no HTTP, no ORM, no provider), so the gap between payd and
// the floor is what payd adds around them. The statements are those of the
// repository, verbatim.
const (
	// authenticate (CustomerStore.FindByTokenHash): every request.
	qAuth = `SELECT id, email, name, token_hash, request_id, request_fingerprint, created_at
		FROM customers WHERE token_hash = ?`
	// RecordStore.Insert: taking the idempotency key.
	qInsertRecord = `INSERT INTO idempotency_records (scope, idem_key, method, path, fingerprint, status,
		response_status, response_body, response_sealed, order_id, completed_by, locked_until, created_at, updated_at, expires_at)
		VALUES (?, ?, ?, ?, ?, 'processing', 0, NULL, ?, ?, NULL, ?, ?, ?, ?)`
	// The claim transaction: OrderStore.Claim, AttemptStore.Create.
	qClaim = `UPDATE orders
		SET status = 'processing', pay_request_id = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status = 'pending' AND expires_at > ?`
	qInsertAttempt = `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method,
		provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until)
		VALUES (?, ?, ?, 'started', ?, NULL, NULL, ?, ?, ?, ?, ?, ?)`
	// The settle transaction: AttemptStore.Succeed, LedgerStore.Append
	// (the charge's entry, ADR 0030), OrderStore.MarkPaid.
	qInsertLedger = `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency,
	amount_minor, source, actor, note, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qFinishAttempt = `UPDATE payment_attempts
		SET status = ?, provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
		WHERE id = ? AND status IN (?, ?)`
	qMarkPaid = `UPDATE orders
		SET status = 'paid', paid_at = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status = 'processing' AND pay_request_id = ?`
	// RecordStore.Complete: storing the answer.
	qCompleteRecord = `UPDATE idempotency_records
		SET status = ?, response_status = ?, response_body = ?, response_sealed = ?, completed_by = ?, updated_at = ?
		WHERE scope = ? AND idem_key = ? AND status = 'processing'`
	// RecordStore.Find: the replay's one read.
	qFindRecord = `SELECT scope, idem_key, method, path, fingerprint, status, response_status, response_body,
		response_sealed, order_id, completed_by, locked_until, created_at, updated_at, expires_at
		FROM idempotency_records WHERE scope = ? AND idem_key = ?`
)

// floorPay is one pay of the floor: an order of a customer, under a key.
type floorPay struct {
	orderID, customerID, tokenHash, key string
}

// floor runs payd's pay statements: writes and transactions on db, reads
// outside a transaction on read (the same pool on MySQL).
type floor struct {
	db, read *sql.DB
	reply    []byte // the answer stored in each record: one payd gave
	// batched, on MySQL, sends each transaction as payd's PayBatch does:
	// START TRANSACTION, its statements (the second guarded by
	// ROW_COUNT() = 1) and COMMIT in one packet (db must allow multiple
	// statements). Every statement must match one row, as payd's guards
	// require, or the run fails.
	batched bool
}

// pay is a new pay: authenticate, take the key, claim, (the provider
// answers at once), settle, store the answer.
func (f *floor) pay(ctx context.Context, p floorPay) error {
	if err := f.auth(ctx, p.tokenHash); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	path := "/v1/orders/" + p.orderID + "/pay"
	scope := "customer:" + p.customerID
	if _, err := f.db.ExecContext(ctx, qInsertRecord, scope, p.key, "POST", path, fingerprint(path), false, p.orderID,
		ts(now.Add(time.Minute)), ts(now), ts(now), ts(now.Add(24*time.Hour))); err != nil {
		return fmt.Errorf("insert record: %w", err)
	}
	attemptID := uuid.Must(uuid.NewV7()).String()
	claim, settle := f.claim, f.settle
	if f.batched {
		claim, settle = f.claimBatched, f.settleBatched
	}
	if err := claim(ctx, p, attemptID, now); err != nil {
		return err
	}
	if err := settle(ctx, p, attemptID, time.Now().UTC()); err != nil {
		return err
	}
	_, err := f.db.ExecContext(ctx, qCompleteRecord, "succeeded", 200, f.reply, false, "request", ts(time.Now()), scope, p.key)
	return err
}

func (f *floor) auth(ctx context.Context, tokenHash string) error {
	var id, email, name, hash string
	var reqID, reqFP sql.NullString
	var created any
	if err := f.read.QueryRowContext(ctx, qAuth, tokenHash).Scan(&id, &email, &name, &hash, &reqID, &reqFP, &created); err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	return nil
}

// claim is payd's first transaction: the order pending → processing, and
// the attempt recorded.
func (f *floor) claim(ctx context.Context, p floorPay, attemptID string, now time.Time) error {
	return inTx(ctx, f.db, func(tx *sql.Tx) error {
		if err := exactlyOne(tx.ExecContext(ctx, qClaim, p.key, ts(now), p.orderID, ts(now))); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		inFlight := ts(now.Add(40 * time.Second))
		_, err := tx.ExecContext(ctx, qInsertAttempt, attemptID, p.orderID, p.key, "pm_ok", orderCurrency, orderMinor,
			ts(now), ts(now), inFlight, inFlight)
		return err
	})
}

// settle is payd's second transaction: the attempt succeeded, the order paid.
func (f *floor) settle(ctx context.Context, p floorPay, attemptID string, now time.Time) error {
	return inTx(ctx, f.db, func(tx *sql.Tx) error {
		if err := exactlyOne(tx.ExecContext(ctx, qFinishAttempt, "succeeded", "ch_"+attemptID, nil, ts(now),
			attemptID, "started", "unknown")); err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		if err := exactlyOne(tx.ExecContext(ctx, qInsertLedger, ledgerArgs(p, attemptID, now)...)); err != nil {
			return fmt.Errorf("book charge: %w", err)
		}
		if err := exactlyOne(tx.ExecContext(ctx, qMarkPaid, ts(now), ts(now), p.orderID, p.key)); err != nil {
			return fmt.Errorf("mark paid: %w", err)
		}
		return nil
	})
}

// claimBatched is claim in one round trip.
func (f *floor) claimBatched(ctx context.Context, p floorPay, attemptID string, now time.Time) error {
	inFlight := ts(now.Add(40 * time.Second))
	return f.batch(ctx, "START TRANSACTION;"+qClaim+";"+qInsertAttemptIfClaimed+";COMMIT",
		p.key, ts(now), p.orderID, ts(now),
		attemptID, p.orderID, p.key, "pm_ok", orderCurrency, orderMinor, ts(now), ts(now), inFlight, inFlight)
}

// settleBatched is settle in one round trip.
func (f *floor) settleBatched(ctx context.Context, p floorPay, attemptID string, now time.Time) error {
	args := []any{"succeeded", "ch_" + attemptID, nil, ts(now), attemptID, "started", "unknown"}
	args = append(args, ledgerArgs(p, attemptID, now)...)
	args = append(args, ts(now), ts(now), p.orderID, p.key)
	return f.batch(ctx, "START TRANSACTION;"+qFinishAttempt+";"+qInsertLedgerIfSettled+";"+qMarkPaid+" AND ROW_COUNT() = 1;COMMIT", args...)
}

// qInsertLedgerIfSettled is qInsertLedger acting only if the statement
// before it matched one row, as payd's batch guards it.
const qInsertLedgerIfSettled = `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency,
	amount_minor, source, actor, note, created_at)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`

// ledgerArgs are the arguments of the charge's ledger entry.
func ledgerArgs(p floorPay, attemptID string, now time.Time) []any {
	chargeID := "ch_" + attemptID
	return []any{uuid.Must(uuid.NewV7()).String(), p.orderID, "charge", "charge:" + chargeID, chargeID, orderCurrency,
		orderMinor, "pay_reply", "", "", ts(now)}
}

// qInsertAttemptIfClaimed is qInsertAttempt acting only if the statement
// before it matched one row, guarded as payd's batch guards its insert
// (payd's takes the amount and currency from the order's row; the floor's
// are the values it knows).
const qInsertAttemptIfClaimed = `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method,
		provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until)
		SELECT ?, ?, ?, 'started', ?, NULL, NULL, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`

// batch sends query (START TRANSACTION, two statements, COMMIT) on one
// connection and checks that both statements matched one row each.
func (f *floor) batch(ctx context.Context, query string, args ...any) error {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		ex := dc.(driver.ExecerContext)
		named := make([]driver.NamedValue, len(args))
		for i, a := range args {
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return err
			}
			named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
		}
		res, err := ex.ExecContext(ctx, query, named)
		if err != nil {
			if _, rerr := ex.ExecContext(context.WithoutCancel(ctx), "ROLLBACK", nil); rerr != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			return err
		}
		n := res.(mysql.Result).AllRowsAffected() // START TRANSACTION, the statements, COMMIT
		if len(n) < 4 {
			return fmt.Errorf("batch matched %v rows, want one per statement", n)
		}
		for _, rows := range n[1 : len(n)-1] {
			if rows != 1 {
				return fmt.Errorf("batch matched %v rows, want one per statement", n)
			}
		}
		return nil
	})
}

// replay is a repeated pay: authenticate, read the stored record.
func (f *floor) replay(ctx context.Context, p floorPay) error {
	if err := f.auth(ctx, p.tokenHash); err != nil {
		return err
	}
	var scope, key, method, path, fp, status string
	var code int
	var body []byte
	var sealed bool
	var orderID, completedBy sql.NullString
	var locked, created, updated, expires any
	err := f.read.QueryRowContext(ctx, qFindRecord, "customer:"+p.customerID, p.key).Scan(&scope, &key, &method, &path, &fp,
		&status, &code, &body, &sealed, &orderID, &completedBy, &locked, &created, &updated, &expires)
	if err != nil {
		return fmt.Errorf("find record: %w", err)
	}
	if status != "succeeded" || len(body) == 0 {
		return fmt.Errorf("record %s is %s, want succeeded with a body", key, status)
	}
	return nil
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// exactlyOne checks that a guarded statement matched its row.
func exactlyOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("matched %d rows, want 1 (%v)", n, err)
	}
	return nil
}

// fingerprint is the request fingerprint payd stores (service.Call.Fingerprint).
func fingerprint(path string) string {
	h := sha256.Sum256([]byte("POST\n" + path + "\n" + payBody))
	return hex.EncodeToString(h[:])
}
