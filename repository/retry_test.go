package repository_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// errDeadlock is MySQL's deadlock, which Galera also reports for a
// transaction that lost certification, at COMMIT.
var errDeadlock = &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}

// sqliteError stands in for the SQLite driver's error, which reports its
// result code through Code.
type sqliteError int

func (e sqliteError) Error() string { return fmt.Sprintf("sqlite error (%d)", int(e)) }
func (e sqliteError) Code() int     { return int(e) }

// failFirst returns a fault hook that fails the first n steps at point
// with err, and the count of steps it saw there.
func failFirst(point string, n int, err error) (func(string) error, *atomic.Int32) {
	var seen atomic.Int32
	return func(p string) error {
		if p != point {
			return nil
		}
		if int(seen.Add(1)) <= n {
			return err
		}
		return nil
	}, &seen
}

// countRetries counts the retries db reports, by reason.
func countRetries(db *repository.DB) func(reason domain.RetryReason) int {
	var mu sync.Mutex
	n := map[domain.RetryReason]int{}
	db.OnRetry(func(_ context.Context, reason domain.RetryReason, _ int, _ error) {
		mu.Lock()
		n[reason]++
		mu.Unlock()
	})
	return func(reason domain.RetryReason) int {
		mu.Lock()
		defer mu.Unlock()
		return n[reason]
	}
}

// TestInTxRetriesDeadlock has two transactions lock two orders in opposite
// order on MariaDB: one of them is chosen as the deadlock's victim (1213)
// and rolled back, InTx runs it again, and both commit — each order is
// updated exactly twice.
func TestInTxRetriesDeadlock(t *testing.T) {
	db := dbtest.Open(t, migrations.MySQL)
	retries := countRetries(db)
	tx := repository.NewTransactor(db)
	a, b := newOrder(t, db), newOrder(t, db)
	bump := `UPDATE orders SET version = version + 1 WHERE id = ?`

	var runs [2]atomic.Int32
	locked := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	lockBoth := func(i int, first, second string) error {
		return tx.InTx(t.Context(), func(ctx context.Context) error {
			run := runs[i].Add(1)
			if _, err := db.Exec(ctx, bump, first); err != nil {
				return err
			}
			if run == 1 { // both hold their first row before either asks for its second
				close(locked[i])
				<-locked[1-i]
			}
			_, err := db.Exec(ctx, bump, second)
			return err
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, ids := range [][2]string{{a.ID, b.ID}, {b.ID, a.ID}} {
		wg.Go(func() { errs[i] = lockBoth(i, ids[0], ids[1]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("InTx(transaction %d) = %v, want nil", i, err)
		}
	}
	if total := runs[0].Load() + runs[1].Load(); total < 3 {
		t.Errorf("transactions ran %d times in all, want at least 3 (one deadlock victim run again)", total)
	}
	if got := retries("deadlock"); got < 1 {
		t.Errorf("deadlock retries = %d, want at least 1", got)
	}
	for _, o := range []domain.Order{a, b} {
		if got := findOrder(t, db, o.ID).Version; got != o.Version+2 {
			t.Errorf("order %s version = %d, want %d (each transaction committed once)", o.ID, got, o.Version+2)
		}
	}
}

// TestInTxRetriesFailedCommit fails the first COMMIT, as Galera fails a
// transaction that lost certification after its UPDATE matched: the whole
// transaction runs again and commits once.
func TestInTxRetriesFailedCommit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		hook, commits := failFirst("commit", 1, errDeadlock)
		db.FailAt(hook)
		retries := countRetries(db)
		orders := repository.NewOrderStore(db)

		runs := 0
		var claimed bool
		err := repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
			runs++
			var err error
			claimed, err = orders.Claim(ctx, o.ID, "req-1", o.Version, t0)
			return err
		})
		if err != nil || !claimed {
			t.Fatalf("InTx(claim) = %v, claimed %v; want nil, true", err, claimed)
		}
		if runs != 2 || commits.Load() != 2 || retries("deadlock") != 1 {
			t.Errorf("runs %d, commits %d, retries %d; want 2, 2, 1", runs, commits.Load(), retries("deadlock"))
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusProcessing || got.Version != o.Version+1 {
			t.Errorf("order = %s version %d, want processing version %d", got.Status, got.Version, o.Version+1)
		}
	})
}

// TestGuardedRetries fails a guarded UPDATE outside any transaction with a
// conflict once: it runs again and matches its row.
func TestGuardedRetries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		for _, conflict := range []error{errDeadlock, &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, sqliteError(5)} {
			hook, stmts := failFirst("statement", 1, conflict)
			db.FailAt(hook)
			claimed, err := repository.NewOrderStore(db).Claim(t.Context(), o.ID, "req-1", domain.AnyVersion, t0)
			if err != nil || !claimed {
				t.Fatalf("Claim() under %v = %v, %v; want true, nil", conflict, claimed, err)
			}
			if stmts.Load() != 2 {
				t.Errorf("Claim() under %v ran %d statements, want 2", conflict, stmts.Load())
			}
			if _, err := repository.NewOrderStore(db).Release(t.Context(), o.ID, "req-1", testCause, t0); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestInsertRetrySeesWinner: an INSERT that lost a race across Galera nodes
// fails with 1213, not 1062; run again it meets the winner's row and
// resolves as on one server (the key is in use).
func TestInsertRetrySeesWinner(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		records := repository.NewRecordStore(db)
		r := newRecord("k-" + newID())
		insertRecord(t, records, r)
		hook, _ := failFirst("statement", 1, errDeadlock)
		db.FailAt(hook)
		if err := records.Insert(t.Context(), r); !errors.Is(err, domain.ErrKeyInUse) {
			t.Errorf("Insert(%q) after a conflict = %v, want %v", r.Key, err, domain.ErrKeyInUse)
		}
	})
}

// TestRetriesExhausted: a conflict that outlasts the policy is
// domain.ErrUnavailable (503), and the transaction left nothing behind.
func TestRetriesExhausted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		orders := repository.NewOrderStore(db)

		hook, stmts := failFirst("statement", 1000, errDeadlock)
		db.FailAt(hook)
		if _, err := orders.Claim(t.Context(), o.ID, "req-1", o.Version, t0); !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, errDeadlock) {
			t.Errorf("Claim() under endless conflicts = %v, want %v wrapping %v", err, domain.ErrUnavailable, errDeadlock)
		}
		if stmts.Load() != 8 {
			t.Errorf("Claim() ran %d times, want 8", stmts.Load())
		}

		hook, commits := failFirst("commit", 1000, errDeadlock)
		db.FailAt(hook)
		err := repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
			_, err := orders.Claim(ctx, o.ID, "req-1", o.Version, t0)
			return err
		})
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("InTx() under endless conflicts = %v, want %v", err, domain.ErrUnavailable)
		}
		if commits.Load() != 8 {
			t.Errorf("InTx() tried to commit %d times, want 8", commits.Load())
		}
		db.FailAt(nil)
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPending || got.Version != o.Version {
			t.Errorf("order = %s version %d, want pending version %d (nothing committed)", got.Status, got.Version, o.Version)
		}
	})
}

// TestRetryStopsWithContext: a request whose context ends stops waiting to
// retry at once.
func TestRetryStopsWithContext(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	o := newOrder(t, db)
	db.SetRetry(5, time.Hour, time.Hour)
	hook, _ := failFirst("statement", 1000, errDeadlock)
	db.FailAt(hook)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := repository.NewOrderStore(db).Claim(ctx, o.ID, "req-1", o.Version, t0)
	if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Claim() = %v, want %v and %v", err, domain.ErrUnavailable, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Claim() took %v after its context ended", d)
	}
}

// TestSQLiteBusyRetried: another process holds SQLite's write lock for a
// moment; with SQLite's own busy wait off, payd's statements and
// transactions meet SQLITE_BUSY, retry, and succeed — no BUSY reaches the
// caller.
func TestSQLiteBusyRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payd.db")
	db, err := repository.OpenSQLiteNoWait(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := repository.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	other, err := repository.OpenSQLiteNoWait(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	db.SetRetry(100, time.Millisecond, 5*time.Millisecond)
	retries := countRetries(db)
	orders := repository.NewOrderStore(db)
	o := newOrder(t, db)

	// holdLock takes the write lock in other and gives it up after d.
	holdLock := func(d time.Duration) <-chan error {
		held, done := make(chan struct{}), make(chan error, 1)
		go func() {
			done <- repository.NewTransactor(other).InTx(context.Background(), func(ctx context.Context) error {
				close(held)
				time.Sleep(d)
				return nil
			})
		}()
		<-held
		return done
	}

	done := holdLock(50 * time.Millisecond)
	claimed, err := orders.Claim(t.Context(), o.ID, "req-1", o.Version, t0)
	if err != nil || !claimed {
		t.Errorf("Claim() while another process writes = %v, %v; want true, nil", claimed, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	done = holdLock(50 * time.Millisecond)
	err = repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
		_, err := orders.Release(ctx, o.ID, "req-1", testCause, t0)
		return err
	})
	if err != nil {
		t.Errorf("InTx(release) while another process writes = %v, want nil", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := retries("sqlite_busy"); got < 2 {
		t.Errorf("sqlite_busy retries = %d, want at least 2 (one per call)", got)
	}
}

// TestClassify: conflicts are retried; a database that went away, is
// shutting down or is a Galera node out of its cluster is unavailable
// (503); everything else is neither.
func TestClassify(t *testing.T) {
	tests := []struct {
		err         error
		retry       domain.RetryReason
		unavailable bool
	}{
		{errDeadlock, "deadlock", false},
		{fmt.Errorf("claim order o1: %w", errDeadlock), "deadlock", false},
		{&mysql.MySQLError{Number: 1205}, "lock_wait_timeout", false},
		{sqliteError(5), "sqlite_busy", false},
		{sqliteError(517), "sqlite_busy", false}, // SQLITE_BUSY_SNAPSHOT
		{sqliteError(6), "sqlite_busy", false},   // SQLITE_LOCKED
		{sqliteError(2067), "", false},           // a unique violation
		{&mysql.MySQLError{Number: 1062}, "", false},
		{&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, "", true},
		{&mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}, "", true},
		{&mysql.MySQLError{Number: 1927, Message: "Connection was killed"}, "", true},
		{&mysql.MySQLError{Number: 2013, Message: "Lost connection to server during query"}, "", true},
		{&mysql.MySQLError{Number: 2006, Message: "Server has gone away"}, "", true},
		{mysql.ErrInvalidConn, "", true},
		{driver.ErrBadConn, "", true},
		{io.ErrUnexpectedEOF, "", true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "", true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "", true},
		{errors.New("boom"), "", false},
		{context.Canceled, "", false},
	}
	for _, tt := range tests {
		if got := repository.RetryReason(tt.err); got != tt.retry {
			t.Errorf("RetryReason(%v) = %q, want %q", tt.err, got, tt.retry)
		}
		got := repository.Classify(tt.err)
		if errors.Is(got, domain.ErrUnavailable) != tt.unavailable {
			t.Errorf("Classify(%v) = %v, unavailable %v; want %v", tt.err, got, !tt.unavailable, tt.unavailable)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("Classify(%v) = %v, lost the cause", tt.err, got)
		}
	}
}

// TestGalera: the machine's MariaDB is no Galera node.
func TestGalera(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		if db := dbtest.Open(t, d); db.Galera() {
			t.Errorf("Galera() = true on a single %s server", d)
		}
	})
}

// TestServerGoneIsUnavailable: payd's connections go through a proxy that
// then dies, as a database node does: a store call fails with
// domain.ErrUnavailable (503), not an unknown error (500).
func TestServerGoneIsUnavailable(t *testing.T) {
	server := dbtest.NewURL(t, migrations.MySQL) // fresh database on the test server
	target := strings.TrimPrefix(server, "mysql://root:@")
	target = target[:strings.Index(target, "/")]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	db, err := repository.Open(t.Context(), strings.Replace(server, target, ln.Addr().String(), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := repository.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	orders := repository.NewOrderStore(db)
	if _, err := orders.FindByID(t.Context(), "o1"); !errors.Is(err, domain.ErrOrderNotFound) {
		t.Fatalf("FindByID() through the proxy = %v, want %v", err, domain.ErrOrderNotFound)
	}

	ln.Close() // the node dies: no new connection, and the open ones drop
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	_, err = orders.FindByID(t.Context(), "o1")
	if !errors.Is(err, domain.ErrUnavailable) {
		t.Errorf("FindByID() with the server gone = %v, want %v", err, domain.ErrUnavailable)
	}
	_, err = orders.Claim(t.Context(), "o1", "req-1", domain.AnyVersion, t0)
	if !errors.Is(err, domain.ErrUnavailable) {
		t.Errorf("Claim() with the server gone = %v, want %v", err, domain.ErrUnavailable)
	}
	err = repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error { return nil })
	if !errors.Is(err, domain.ErrUnavailable) {
		t.Errorf("InTx() with the server gone = %v, want %v", err, domain.ErrUnavailable)
	}
}
