package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/migrations"
)

// PayBatch runs the pay path's two transactions — the claim and the
// settlement of a successful charge — in two round trips each on MySQL
// instead of four: BEGIN and the transaction's statements go in one
// multi-statement packet, COMMIT (or ROLLBACK) in a second. See
// docs/adr/0024-pay-transactions-in-two-round-trips.md.
//
// The statements are the stores' own, word for word, and every one is
// guarded: the transaction commits only if each matched exactly one row,
// and otherwise rolls back, having changed nothing. The caller then learns
// why as it did before (a fresh read, or the one-statement-at-a-time path),
// so no outcome differs from running the same statements in InTx.
type PayBatch struct{ db *DB }

// NewPayBatch returns a PayBatch on db.
func NewPayBatch(db *DB) *PayBatch { return &PayBatch{db: db} }

// Claim moves a's order from pending to processing for a.RequestID
// (OrderStore.Claim) and records a (AttemptStore.Create), in one
// transaction. False: the order was not pending or past its expires_at;
// nothing was written.
func (b *PayBatch) Claim(ctx context.Context, a domain.Attempt, now time.Time) (bool, error) {
	row, err := attemptFromDomain(a)
	if err != nil {
		return false, fmt.Errorf("claim order %s: %w", a.OrderID, err)
	}
	ev := domain.EventClaim
	ok, err := b.db.batch(ctx, nil,
		statement{claimOrder, []any{string(ev.To()), a.RequestID, ts(now), a.OrderID, names(ev.From()), ts(now)}},
		statement{insertAttempt, []any{row.ID, row.OrderID, row.RequestID, row.Status, row.PaymentMethod,
			row.ProviderChargeID, row.FailureCode, row.Currency, row.AmountMinor, row.CreatedAt, row.UpdatedAt,
			row.LeasedUntil, row.InFlightUntil}},
	)
	if err != nil {
		return false, fmt.Errorf("claim order %s: %w", a.OrderID, err)
	}
	return ok, nil
}

// SucceedAndPay moves attempt a to succeeded with chargeID
// (AttemptStore.Succeed) and its order from processing to paid for
// a.RequestID (OrderStore.MarkPaid), in one transaction, if both guards
// hold. False: one did not (the attempt or the order was settled or moved
// meanwhile); nothing was written, and the caller settles step by step.
// beforeCommit, if set, runs after both statements matched and before
// COMMIT.
func (b *PayBatch) SucceedAndPay(ctx context.Context, a domain.Attempt, chargeID string, now time.Time, beforeCommit func()) (bool, error) {
	succeed, paid := domain.AttemptCharged, domain.EventSucceed
	ok, err := b.db.batch(ctx, beforeCommit,
		statement{settleAttempt, []any{string(succeed.To()), nullString(chargeID), nullString(""), ts(now), a.ID, names(succeed.From())}},
		statement{markPaid, []any{string(paid.To()), ts(now), ts(now), a.OrderID, names(paid.From()), a.RequestID}},
	)
	if err != nil {
		return false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	return ok, nil
}

// statement is one SQL statement and its arguments, as the stores pass
// them (a []string argument stands for an IN list).
type statement struct {
	query string
	args  []any
}

// errUnmatched rolls back a batch whose guard did not hold.
var errUnmatched = errors.New("a guarded statement matched no row")

// batch runs stmts in one transaction of their own and commits it only if
// each matched exactly one row; otherwise it rolls back and reports false.
// On MySQL it takes two round trips (batchMySQL); on SQLite the statements
// run one by one in inTx: SQLite is in-process, so a round trip costs a
// function call. A conflict the database undid is retried from the start,
// as inTx does. It refuses to run inside a caller's transaction, where a
// rollback would not be its own to make.
func (db *DB) batch(ctx context.Context, beforeCommit func(), stmts ...statement) (bool, error) {
	if inTx(ctx, db) {
		return false, errors.New("a batch runs in a transaction of its own, not inside another")
	}
	if db.dialect != migrations.MySQL {
		err := db.inTx(ctx, func(ctx context.Context) error {
			for _, s := range stmts {
				n, err := db.exec(ctx, s.query, s.args...)
				if err != nil {
					return err
				}
				if n != 1 {
					return errUnmatched
				}
			}
			if beforeCommit != nil {
				beforeCommit()
			}
			return nil
		})
		if errors.Is(err, errUnmatched) {
			return false, nil
		}
		return err == nil, err
	}
	var committed bool
	err := db.retrying(ctx, func() error {
		var err error
		committed, err = db.batchMySQL(ctx, beforeCommit, stmts)
		return err
	})
	return committed, err
}

// batchMySQL sends START TRANSACTION and stmts as one multi-statement
// packet on one connection, reads how many rows each matched
// (clientFoundRows), and sends COMMIT if each matched one, else ROLLBACK.
// A statement that fails stops the packet there; the transaction is then
// rolled back (the server already did for a deadlock). A connection whose
// ROLLBACK fails is discarded, never returned to the pool inside a
// transaction: closing it makes the server roll back.
func (db *DB) batchMySQL(ctx context.Context, beforeCommit func(), stmts []statement) (bool, error) {
	var sqlText strings.Builder
	sqlText.WriteString("START TRANSACTION")
	var args []driver.NamedValue
	for _, s := range stmts {
		q, a, err := expandArgs(s.query, s.args, len(args))
		if err != nil {
			return false, err
		}
		sqlText.WriteString(";\n")
		sqlText.WriteString(q)
		args = append(args, a...)
	}
	ctx = detached(ctx)
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	committed := false
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("mysql connection %T cannot execute", dc)
		}
		rollback := func(cause error) error {
			if _, err := ex.ExecContext(context.WithoutCancel(ctx), "ROLLBACK", nil); err != nil {
				return errors.Join(cause, fmt.Errorf("rollback: %w", err), driver.ErrBadConn)
			}
			return cause
		}
		if err := db.injected("statement"); err != nil {
			return err
		}
		res, err := ex.ExecContext(ctx, sqlText.String(), args)
		if err != nil {
			return rollback(err)
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			return rollback(fmt.Errorf("mysql result %T has no per-statement counts", res))
		}
		counts := mr.AllRowsAffected()
		if len(counts) != len(stmts)+1 {
			return rollback(fmt.Errorf("batch of %d statements answered %d results", len(stmts)+1, len(counts)))
		}
		for _, n := range counts[1:] {
			if n != 1 {
				return rollback(nil)
			}
		}
		if beforeCommit != nil {
			beforeCommit()
		}
		if err := db.injected("commit"); err != nil {
			return rollback(err)
		}
		if _, err := ex.ExecContext(ctx, "COMMIT", nil); err != nil {
			// A deadlock or Galera's certification failure at COMMIT
			// rolled the transaction back already; after any other
			// failure the ROLLBACK ends it, or the connection goes.
			return rollback(err)
		}
		committed = true
		return nil
	})
	return committed, err
}

// expandArgs numbers query's arguments from offset for the driver and
// spreads each []string argument into an IN list: "IN ?" with two values
// becomes "IN (?, ?)", as GORM writes it. Store queries hold no '?' but
// their placeholders.
func expandArgs(query string, args []any, offset int) (string, []driver.NamedValue, error) {
	var b strings.Builder
	out := make([]driver.NamedValue, 0, len(args))
	next := 0
	add := func(v any) error {
		if p, ok := v.(*utcTime); ok && p == nil {
			v = nil // SQL NULL; a nil pointer's Value would panic
		}
		if valuer, ok := v.(driver.Valuer); ok {
			var err error
			if v, err = valuer.Value(); err != nil {
				return err
			}
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(v)
		if err != nil {
			return err
		}
		out = append(out, driver.NamedValue{Ordinal: offset + len(out) + 1, Value: v})
		return nil
	}
	for _, r := range query {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		if next >= len(args) {
			return "", nil, fmt.Errorf("batch: more placeholders than arguments in %q", query)
		}
		arg := args[next]
		next++
		list, ok := arg.([]string)
		if !ok {
			b.WriteByte('?')
			if err := add(arg); err != nil {
				return "", nil, err
			}
			continue
		}
		b.WriteByte('(')
		for i, v := range list {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			if err := add(v); err != nil {
				return "", nil, err
			}
		}
		b.WriteByte(')')
	}
	if next != len(args) {
		return "", nil, fmt.Errorf("batch: %d arguments for %d placeholders in %q", len(args), next, query)
	}
	return b.String(), out, nil
}
