package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-sql-driver/mysql"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/migrations"
)

// PayBatch runs the pay path's two transactions — the claim, and the
// settlement of a successful charge with its ledger entry — in one round
// trip each on MySQL instead of four and five: START TRANSACTION, the
// transaction's statements and COMMIT go in one multi-statement packet.
// See docs/adr/0026-pay-transactions-in-one-round-trip.md (which takes
// over from ADR 0024's two).
//
// The statements are the stores' own, and every one is guarded; each
// statement after the first runs only if the one before it matched
// exactly one row (on MySQL, the statement's own guard ROW_COUNT() = 1),
// and the transaction commits what ran. So a claim either takes the order
// and records its attempt, or changes nothing; a settlement either
// settles the attempt, pays the order and records the charge, settles the
// attempt alone (the order was moved meanwhile, as InTx would have
// committed it), or changes nothing (a statement that fails, such as the
// ledger's INSERT finding the charge recorded, rolls back all of it). The
// caller then learns why as it did before (a fresh read, or the
// one-statement-at-a-time path), so no outcome differs from running the
// same statements in InTx.
type PayBatch struct{ db *DB }

// NewPayBatch returns a PayBatch on db.
func NewPayBatch(db *DB) *PayBatch { return &PayBatch{db: db} }

// Claim moves a's order from pending to processing for a.RequestID
// (OrderStore.Claim) and records a (AttemptStore.Create), in one
// transaction, if the order is still at version (unless that is
// domain.AnyVersion). False: the order was not pending at version, or past
// its expires_at; nothing was written.
func (b *PayBatch) Claim(ctx context.Context, a domain.Attempt, version int64, now time.Time) (bool, error) {
	row, err := attemptFromDomain(a)
	if err != nil {
		return false, fmt.Errorf("claim order %s: %w", a.OrderID, err)
	}
	matched, err := b.db.batch(ctx,
		claimStatement(a.OrderID, a.RequestID, version, now),
		statement{insertAttempt, []any{row.ID, row.OrderID, row.RequestID, row.Status, row.PaymentMethod,
			row.ProviderChargeID, row.FailureCode, row.Currency, row.AmountMinor, row.CreatedAt, row.UpdatedAt,
			row.LeasedUntil, row.InFlightUntil}},
	)
	if err != nil {
		return false, fmt.Errorf("claim order %s: %w", a.OrderID, err)
	}
	if matched == 1 {
		// An INSERT that ran inserts its row or fails: never here.
		return false, fmt.Errorf("claim order %s: the order was claimed but attempt %s not recorded", a.OrderID, a.ID)
	}
	return matched == 2, nil
}

// SucceedAndPay moves attempt a from started or unknown to succeeded with
// chargeID (AttemptStore.Succeed), only if that matched records the
// charge's ledger entry (LedgerStore.Append), and then moves its order
// from processing to paid for a.RequestID (OrderStore.MarkPaid), in one
// transaction. settled: the attempt moved (it is this call's success) and
// its charge is booked; paid: the order moved too. Not settled: nothing
// was written — the attempt was settled or moved meanwhile, or entry's
// reference is taken (the charge is booked already, and the whole
// transaction rolled back) — and the caller settles step by step, whose
// Append takes a repeat in its stride. Settled but not paid: the order was
// no longer processing for a.RequestID, and the attempt's success and its
// charge are committed alone, as Checkout.succeed's transaction commits
// them: the money moved whether or not the order can take it.
func (b *PayBatch) SucceedAndPay(ctx context.Context, a domain.Attempt, chargeID string, entry domain.LedgerEntry, now time.Time) (settled, paid bool, err error) {
	ledger, err := ledgerFromDomain(entry)
	if err != nil {
		return false, false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	succeed, pay := domain.AttemptCharged, domain.EventSucceed
	matched, err := b.db.batch(ctx,
		statement{settleAttempt, []any{string(succeed.To()), nullString(chargeID), nullString(""), ts(now), a.ID, names(succeed.From())}},
		statement{insertLedgerEntry, ledger.args()},
		statement{markPaid, []any{string(pay.To()), ts(now), ts(now), a.OrderID, names(pay.From()), a.RequestID}},
	)
	if violatesIndex(err, "ledger_entries", "reference") {
		return false, false, nil // rolled back whole: nothing was written
	}
	if err != nil {
		return false, false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	if matched == 1 {
		// An INSERT that ran inserts its row or fails: never here.
		return false, false, fmt.Errorf("mark order %s paid: attempt %s settled but its ledger entry %s not recorded", a.OrderID, a.ID, entry.Reference)
	}
	return matched >= 2, matched == 3, nil
}

// statement is one SQL statement and its arguments, as the stores pass
// them (a []string argument stands for an IN list).
type statement struct {
	query string
	args  []any
}

// batch runs stmts in one transaction of its own. Each statement after
// the first runs only if the one before it matched exactly one row; the
// transaction commits what ran. It reports how many statements, from the
// first, matched one row each.
//
// On MySQL it takes one round trip (batchMySQL); on SQLite the statements
// run one by one in inTx: SQLite is in-process, so a round trip costs a
// function call. A conflict the database undid is retried from the start,
// as inTx does. It refuses to run inside a caller's transaction, whose
// commit would not be its own to make.
func (db *DB) batch(ctx context.Context, stmts ...statement) (int, error) {
	if inTx(ctx, db) {
		return 0, errors.New("a batch runs in a transaction of its own, not inside another")
	}
	var matched int
	if db.dialect != migrations.MySQL {
		err := db.inTx(ctx, func(ctx context.Context) error {
			matched = 0 // inTx may run this again after a conflict: start clean
			for _, s := range stmts {
				n, err := db.exec(ctx, s.query, s.args...)
				if err != nil {
					return err
				}
				if n != 1 {
					return nil
				}
				matched++
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return matched, nil
	}
	err := db.retrying(ctx, func() error {
		var err error
		matched, err = db.batchMySQL(ctx, stmts)
		return err
	})
	if err != nil {
		return 0, err
	}
	return matched, nil
}

// rowCountGuard is what batchMySQL adds to each statement after the first:
// ROW_COUNT() is the number of rows the statement before it matched
// (clientFoundRows), so the statement does nothing unless that was one.
const rowCountGuard = "ROW_COUNT() = 1"

// guarded holds guardedByPrevious's answers: the batches send a few
// constant statements, and each is rewritten once.
var guarded sync.Map // query → its guarded text

// guardedOnce is guardedByPrevious, remembered.
func guardedOnce(query string) (string, error) {
	if g, ok := guarded.Load(query); ok {
		return g.(string), nil
	}
	g, err := guardedByPrevious(query)
	if err != nil {
		return "", err
	}
	guarded.Store(query, g)
	return g, nil
}

// guardedByPrevious returns query so that it acts only if the statement
// before it matched exactly one row. An UPDATE, or an INSERT ... SELECT,
// whose query ends with its one WHERE clause (no subquery, ORDER BY or
// LIMIT) gets its condition bracketed and "AND ROW_COUNT() = 1" after it;
// an INSERT ... VALUES (...) becomes INSERT ... SELECT ... FROM DUAL WHERE
// ROW_COUNT() = 1, the same columns and values. Anything else is refused:
// a guard that might not bind is worse than none.
func guardedByPrevious(query string) (string, error) {
	q := strings.TrimSpace(query)
	u := strings.ToUpper(q)
	refuse := fmt.Errorf("batch: cannot guard %q by the statement before it", query)
	if strings.Contains(u, "ON DUPLICATE") || strings.Contains(u, "ORDER BY") || strings.Contains(u, "LIMIT") {
		return "", refuse
	}
	if strings.HasPrefix(u, "INSERT INTO ") && strings.HasSuffix(q, ")") && !strings.Contains(u, "SELECT") {
		i := strings.LastIndex(u, "VALUES (")
		if i < 0 {
			return "", refuse
		}
		return q[:i] + "SELECT " + q[i+len("VALUES ("):len(q)-1] + " FROM DUAL WHERE " + rowCountGuard, nil
	}
	w := strings.LastIndex(u, "WHERE ")
	if w <= 0 || !unicode.IsSpace(rune(q[w-1])) {
		return "", refuse
	}
	head, cond := u[:w], strings.TrimSpace(q[w+len("WHERE "):])
	selects := strings.Count(head, "SELECT")
	switch {
	case strings.HasPrefix(u, "UPDATE ") && selects == 0:
	case strings.HasPrefix(u, "INSERT INTO ") && selects == 1 && !strings.Contains(head, "VALUES"):
	default:
		return "", refuse
	}
	if strings.Contains(strings.ToUpper(cond), "SELECT") || strings.Count(cond, "(") != strings.Count(cond, ")") {
		return "", refuse
	}
	return q[:w] + "WHERE (" + cond + ") AND " + rowCountGuard, nil
}

// batchMySQL sends START TRANSACTION, stmts (each after the first guarded
// by guardedByPrevious) and COMMIT as one multi-statement packet on one
// connection, and reads how many rows each statement matched.
//
// A statement that fails stops the packet there, before COMMIT; the
// transaction is then rolled back (the server already did for a
// deadlock), as it is after a COMMIT that fails (Galera's certification
// failure; a deadlock or Galera conflict undid it already). A connection
// whose ROLLBACK fails is discarded, never returned to the pool inside a
// transaction: closing it makes the server roll back.
func (db *DB) batchMySQL(ctx context.Context, stmts []statement) (int, error) {
	var sqlText strings.Builder
	sqlText.WriteString("START TRANSACTION")
	var args []driver.NamedValue
	for i, s := range stmts {
		query := s.query
		if i > 0 {
			var err error
			if query, err = guardedOnce(query); err != nil {
				return 0, err
			}
		}
		q, a, err := expandArgs(query, s.args, len(args))
		if err != nil {
			return 0, err
		}
		sqlText.WriteString(";\n")
		sqlText.WriteString(q)
		args = append(args, a...)
	}
	if err := db.injected("statement"); err != nil {
		return 0, err
	}
	// A test's stand-in for a failed COMMIT: the packet goes without it,
	// and the failure is handled as a failed COMMIT's.
	commitErr := db.injected("commit")
	if commitErr == nil {
		sqlText.WriteString(";\nCOMMIT")
	}
	ctx = detached(ctx)
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	matched := 0
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
		res, err := ex.ExecContext(ctx, sqlText.String(), args)
		if err != nil {
			return rollback(err)
		}
		if commitErr != nil {
			return rollback(commitErr)
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			// Committed, but how much matched is unknown: an error, and
			// the caller's fresh read decides.
			return fmt.Errorf("mysql result %T has no per-statement counts", res)
		}
		counts := mr.AllRowsAffected()
		if len(counts) != len(stmts)+2 {
			return fmt.Errorf("batch of %d statements answered %d results", len(stmts)+2, len(counts))
		}
		for _, n := range counts[1 : len(stmts)+1] {
			if n != 1 {
				break
			}
			matched++
		}
		for _, n := range counts[min(matched+2, len(stmts)+1) : len(stmts)+1] {
			if n != 0 {
				return fmt.Errorf("batch: a statement after one that matched no row changed %d rows", n)
			}
		}
		return nil
	})
	return matched, err
}

// expandArgs numbers query's arguments from offset for the driver and
// spreads each []string argument into an IN list: "IN ?" with two values
// becomes "IN (?, ?)", and with none "IN (NULL)", as GORM writes them.
// Other arguments are converted as database/sql converts them; a slice
// other than []string or []byte is not a list here and fails. Store
// queries hold no '?' but their placeholders. Batches and exec use it.
func expandArgs(query string, args []any, offset int) (string, []driver.NamedValue, error) {
	var b strings.Builder
	out := make([]driver.NamedValue, 0, len(args))
	next := 0
	add := func(v any) error {
		// The driver's default conversion, as database/sql applies it:
		// a Valuer's Value (NULL for a nil pointer to one), pointers
		// dereferenced, basic kinds to int64, float64, bool, string.
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
			return "", nil, fmt.Errorf("more placeholders than arguments in %q", query)
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
		if len(list) == 0 {
			b.WriteString("(NULL)") // as GORM writes an empty list: matches nothing
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
		return "", nil, fmt.Errorf("%d arguments for %d placeholders in %q", len(args), next, query)
	}
	return b.String(), out, nil
}
