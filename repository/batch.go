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

// PayBatch runs the pay path's two transactions — the claim, and the
// settlement of a successful charge with its ledger entry — in one round
// trip each on MySQL instead of four and six: START TRANSACTION, the
// transaction's statements and COMMIT go in one multi-statement packet.
// See docs/adr/0034-pay-path-performance.md (each pay transaction one
// packet, where it once took two round trips) and ADR 0033 for the packets'
// statements.
//
// The statements are the stores' own, and every one is guarded; each
// statement after the first runs only if the one before it matched
// exactly one row (on MySQL, the statement's own guard ROW_COUNT() = 1),
// and the transaction commits what ran. So a claim either takes the order
// and records its attempt, or changes nothing; a settlement either
// settles the attempt, records the charge, pays the order and writes its
// event (ADR 53), settles the attempt alone (the order was moved
// meanwhile, as InTx would have committed it), or changes nothing (a statement that fails, such as the
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
		statement{insertAttempt, insertAttemptIfClaimed, row.args()},
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
// from processing to paid for a.RequestID (OrderStore.MarkPaid) and writes
// the order's order.paid event, caused by c, in one transaction. settled: the attempt moved (it is this call's success) and
// its charge is booked; paid: the order moved too. Not settled: nothing
// was written — the attempt was settled or moved meanwhile, or entry's
// reference is taken (the charge is booked already, and the whole
// transaction rolled back) — and the caller settles step by step, whose
// Append takes a repeat in its stride. Settled but not paid: the order was
// no longer processing for a.RequestID (or, unless version is
// domain.AnyVersion, no longer at version: something was recorded about it
// since its caller read it, such as an outside refund of this charge, ADR
// 0030), and the attempt's success and its charge are committed alone, as
// Checkout.succeed's transaction commits them: the money moved whether or
// not the order can take it, and the caller pays the order step by step.
func (b *PayBatch) SucceedAndPay(ctx context.Context, a domain.Attempt, chargeID string, entry domain.LedgerEntry, version int64, c domain.Cause, now time.Time) (settled, paid bool, err error) {
	ledger, err := ledgerFromDomain(entry)
	if err != nil {
		return false, false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	var paying statement
	if version == domain.AnyVersion {
		paying = statement{markPaid, markPaidIfBooked, []any{ts(now), ts(now), a.OrderID, a.RequestID}}
	} else {
		paying = statement{markPaidAt, markPaidAtIfBooked, []any{ts(now), ts(now), a.OrderID, a.RequestID, version}}
	}
	var told statement
	if firstPayment(a, ledger, version) {
		told, err = firstPaidEvent(a, ledger, version, c, now)
	} else {
		told, err = eventStatement(a.OrderID, domain.NotifyOrderPaid, c, now)
	}
	if err != nil {
		return false, false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	matched, err := b.db.batch(ctx,
		statement{succeedAttempt, "", []any{nullString(chargeID), nullString(""), ts(now), a.ID}},
		statement{insertLedgerEntry, insertLedgerEntryIfSettled, ledger.args()},
		paying,
		told,
	)
	if violatesIndex(err, "ledger_entries", "reference") {
		return false, false, nil // rolled back whole: nothing was written
	}
	if err != nil {
		return false, false, fmt.Errorf("mark order %s paid: %w", a.OrderID, err)
	}
	switch matched {
	case 1:
		// An INSERT that ran inserts its row or fails: never here.
		return false, false, fmt.Errorf("mark order %s paid: attempt %s settled but its ledger entry %s not recorded", a.OrderID, a.ID, entry.Reference)
	case 3:
		// The order's row was just matched: the event's INSERT writes its
		// row or fails.
		return false, false, fmt.Errorf("mark order %s paid: the order was paid but its event was not written", a.OrderID)
	}
	return matched >= 2, matched == 4, nil
}

// statement is one statement of a batch and its arguments. query is the statement as its store
// sends it. ifPrevious is the same statement written out to act only if
// the statement before it matched exactly one row, for the MySQL packet:
// every statement of a batch but its first has one.
type statement struct {
	query, ifPrevious string
	args              []any
}

// The statements PayBatch's packets send after their first, each its
// store's statement with "ROW_COUNT() = 1" added to its condition: the
// number of rows the statement before it matched (clientFoundRows), which
// keeps its value while this one runs. An INSERT's VALUES become a SELECT
// of the same values FROM DUAL, so that it can have a WHERE.
// TestPacketStatements holds each to its store's statement.
const (
	// insertAttemptIfClaimed is insertAttempt, after the claim.
	insertAttemptIfClaimed = `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method,
	provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until, capture_method)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`

	// insertLedgerEntryIfSettled is insertLedgerEntry, after the
	// attempt's success.
	insertLedgerEntryIfSettled = `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency,
	amount_minor, source, actor, note, created_at)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`
)

var (
	// markPaidIfBooked is markPaid, after the charge's ledger entry.
	markPaidIfBooked = `UPDATE orders
		SET status = ` + orderPay.to + `, paid_at = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderPay.from + ` AND pay_request_id = ? AND ROW_COUNT() = 1`

	// markPaidAtIfBooked is markPaidAt, after the charge's ledger entry.
	markPaidAtIfBooked = `UPDATE orders
		SET status = ` + orderPay.to + `, paid_at = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderPay.from + ` AND pay_request_id = ? AND version = ? AND ROW_COUNT() = 1`
)

// batch runs stmts in one transaction of its own. Each statement after
// the first runs only if the one before it matched exactly one row; the
// transaction commits what ran. It reports how many statements, from the
// first, matched one row each.
//
// On MySQL it takes one round trip (batchMySQL); on SQLite the statements
// run one by one in inTx: SQLite is in-process, so a round trip costs a
// function call. On a Galera node they run one by one in inTx too: a
// transaction the cluster aborts for a conflicting node's write while a
// multi-statement packet runs is rolled back, yet the packet's COMMIT may
// answer OK, with every statement's count as if it had committed
// (TestGaleraPayBatchClaimRace) — two nodes would both win one claim and
// charge the order twice. A COMMIT of its own reports the abort (1213).
// A conflict the database undid is retried from the start, as inTx does.
// It refuses to run inside a caller's transaction, whose commit would not
// be its own to make.
func (db *DB) batch(ctx context.Context, stmts ...statement) (int, error) {
	if inTx(ctx, db) {
		return 0, errors.New("a batch runs in a transaction of its own, not inside another")
	}
	var matched int
	if db.dialect != migrations.MySQL || db.galera {
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

// appendArgs appends args to named, numbered on from named's, as the
// driver takes a packet's arguments: converted as database/sql converts
// the executor's (a Valuer's Value, NULL for a nil pointer to one,
// pointers dereferenced, basic kinds to int64, float64, bool, string).
func appendArgs(named []driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	for _, arg := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(arg)
		if err != nil {
			return nil, err
		}
		named = append(named, driver.NamedValue{Ordinal: len(named) + 1, Value: v})
	}
	return named, nil
}

// batchMySQL sends START TRANSACTION, stmts (the first's query, then each
// other's ifPrevious) and COMMIT as one multi-statement packet on one
// connection, and reads how many rows each statement matched.
//
// A statement that fails stops the packet there, before COMMIT; the
// transaction is then rolled back (the server already did for a
// deadlock), as it is after a COMMIT that fails (Galera's certification
// failure; a deadlock or Galera conflict undid it already). A connection
// whose ROLLBACK fails is discarded, never returned to the pool inside a
// transaction: closing it makes the server roll back.
func (db *DB) batchMySQL(ctx context.Context, stmts []statement) (int, error) {
	// Sized once: a packet's text and arguments are built without growing.
	size, n := len("START TRANSACTION;\nCOMMIT"), 0
	for i, s := range stmts {
		size += len(";\n") + len(s.query)
		if i > 0 {
			size += len(s.ifPrevious) - len(s.query)
		}
		n += len(s.args)
	}
	var sqlText strings.Builder
	sqlText.Grow(size)
	sqlText.WriteString("START TRANSACTION")
	args := make([]driver.NamedValue, 0, n)
	for i, s := range stmts {
		query := s.query
		if i > 0 {
			query = s.ifPrevious
		}
		if query == "" {
			return 0, fmt.Errorf("batch: statement %d has no form for the packet", i+1)
		}
		sqlText.WriteString(";\n")
		sqlText.WriteString(query)
		var err error
		if args, err = appendArgs(args, s.args); err != nil {
			return 0, fmt.Errorf("batch: statement %d: %w", i+1, err)
		}
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
