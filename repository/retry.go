package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// retryPolicy bounds how often a conflicting write is run again and how
// long payd waits between runs: full jitter over an exponential ceiling
// (base, 2·base, ... up to max), so writers that collided do not collide
// again in step. See docs/adr/0015-retry-policy.md.
type retryPolicy struct {
	attempts  int // runs in all, the first included
	base, max time.Duration
}

// defaultRetry: eight runs, waits of at most 5, 10, 20, 40, 80, 160 and
// 320 ms (400 ms cap): about 0.6 s of waiting at worst. A Galera cluster
// that loses or regains a node certifies conflicts for a few hundred
// milliseconds; a shorter budget turned those into 503s on the nodes that
// stayed up. It is still well inside a request's budget.
var defaultRetry = retryPolicy{attempts: 8, base: 5 * time.Millisecond, max: 400 * time.Millisecond}

// wait is the pause before run attempt+1 (attempt counts from 1).
func (p retryPolicy) wait(attempt int) time.Duration {
	ceiling := p.base << (attempt - 1)
	if ceiling > p.max || ceiling <= 0 {
		ceiling = p.max
	}
	return rand.N(ceiling + 1)
}

// MySQL and MariaDB error numbers payd classifies.
const (
	mysqlLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock        = 1213 // ER_LOCK_DEADLOCK; also Galera's certification failure
	mysqlUnknownCommand  = 1047 // Galera: "WSREP has not yet prepared node for application use"
	mysqlServerShutdown  = 1053 // ER_SERVER_SHUTDOWN
	mysqlTooManyConns    = 1040 // ER_CON_COUNT_ERROR
	mysqlConnKilled      = 1927 // ER_CONNECTION_KILLED (MariaDB)
	mysqlServerGone      = 2006 // CR_SERVER_GONE_ERROR
	mysqlServerLost      = 2013 // CR_SERVER_LOST
)

// SQLite primary result codes (the low byte of an extended code).
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// retryReason says why err is worth running the whole statement or
// transaction again, or "" when it is not. Each of these errors means the
// database undid the work: MySQL rolls the transaction back on a deadlock,
// Galera fails the losing
// transaction's COMMIT, SQLite refuses the statement. A lock wait timeout
// undoes only the statement, but payd returns every error out of a
// transaction, which then rolls back whole.
func retryReason(err error) domain.RetryReason {
	if err == nil {
		return ""
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case mysqlDeadlock:
			return domain.RetryDeadlock
		case mysqlLockWaitTimeout:
			return domain.RetryLockTimeout
		}
		return ""
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return domain.RetrySQLiteBusy
		}
	}
	return ""
}

// unavailable reports whether err says the database cannot serve right
// now — the connection was refused or lost, the server is shutting down,
// a Galera node is not (or no longer) part of the cluster — rather than
// that payd asked something wrong.
func unavailable(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case mysqlUnknownCommand, mysqlServerShutdown, mysqlTooManyConns, mysqlConnKilled, mysqlServerGone, mysqlServerLost:
			return true
		}
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)
}

// classify marks an error that says the database is unavailable with
// domain.ErrUnavailable (the caller answers 503 and may retry); others pass.
func classify(err error) error {
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
}

// classifyCallbacks runs after every GORM statement, so an unavailable
// database is domain.ErrUnavailable whichever store method met it.
func classifyCallbacks(g *gorm.DB) error {
	mark := func(tx *gorm.DB) { tx.Error = classify(tx.Error) }
	cb := g.Callback()
	return errors.Join(
		cb.Create().After("gorm:create").Register("payd:classify", mark),
		cb.Query().After("gorm:query").Register("payd:classify", mark),
		cb.Update().After("gorm:update").Register("payd:classify", mark),
		cb.Delete().After("gorm:delete").Register("payd:classify", mark),
		cb.Row().After("gorm:row").Register("payd:classify", mark),
		cb.Raw().After("gorm:raw").Register("payd:classify", mark),
	)
}

// RetryFunc is told of every retry payd takes: why (deadlock,
// lock_wait_timeout, sqlite_busy), which run failed (1 for the first) and
// the error. It must be quick and safe for concurrent use.
type RetryFunc func(ctx context.Context, reason domain.RetryReason, attempt int, err error)

// OnRetry sets the function told of every retry (for the
// payd_db_retries_total metric and a debug log). Set it before serving.
func (db *DB) OnRetry(fn RetryFunc) { db.onRetry.Store(&fn) }

// retrying runs fn — a whole transaction, or one statement outside any —
// and runs it again while it fails with a conflict the database undid
// (retryReason), waiting as db's policy says, at most the policy's
// attempts in all. Inside a transaction fn runs once: the statement's
// failure undid the transaction, so the outermost retrying, the one that
// began it, re-runs all of it. A conflict that outlasts the policy, or the
// request's context, is domain.ErrUnavailable: the caller answers 503 and
// may send the request again.
func (db *DB) retrying(ctx context.Context, fn func() error) error {
	if inTx(ctx, db) {
		return fn()
	}
	for attempt := 1; ; attempt++ {
		err := fn()
		reason := retryReason(err)
		if reason == "" {
			return classify(err)
		}
		if attempt >= db.retry.attempts {
			return fmt.Errorf("%w: gave up after %d attempts: %w", domain.ErrUnavailable, attempt, err)
		}
		if f := db.onRetry.Load(); f != nil {
			(*f)(ctx, reason, attempt, err)
		}
		t := time.NewTimer(db.retry.wait(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w (while waiting to retry: %w)", domain.ErrUnavailable, err, ctx.Err())
		case <-t.C:
		}
	}
}

// create inserts value (a row struct, or a slice of them) through GORM,
// under the retry policy.
func (db *DB) create(ctx context.Context, value any) error {
	return db.retrying(ctx, func() error {
		if err := db.injected("statement"); err != nil {
			return err
		}
		return db.conn(ctx).Create(value).Error
	})
}

// injected is the error a test made the next statement or commit fail
// with (export_test.go); nil in payd.
func (db *DB) injected(point string) error {
	if f := db.fault.Load(); f != nil {
		return (*f)(point)
	}
	return nil
}
