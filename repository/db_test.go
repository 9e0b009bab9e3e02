package repository_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, url := range []string{
		"",
		"payd.db",
		"postgres://u:p@localhost/payd",
		"sqlite://",
		"sqlite://payd.db?mode=ro",
		"mysql://root:s3cret@%zz/payd",
		// Escaping values in the driver is safe in utf8mb4, not in every
		// multi-byte charset; payd refuses the others before connecting.
		"mysql://root:s3cret@127.0.0.1:1/payd?charset=gbk",
		"mysql://root:s3cret@127.0.0.1:1/payd?collation=sjis_japanese_ci",
	} {
		db, err := repository.Open(t.Context(), url)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) = nil error, want an error", url)
			continue
		}
		if strings.Contains(url, "charset") || strings.Contains(url, "collation") {
			if !strings.Contains(err.Error(), "utf8mb4") {
				t.Errorf("Open(%q) = %v, want a refusal of the charset (port 1 listens to nobody)", url, err)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: the error shows the password", url, err)
		}
	}
}

// TestOpenMySQLErrorHidesPassword: a connection failure names no secret.
func TestOpenMySQLErrorHidesPassword(t *testing.T) {
	_, err := repository.Open(t.Context(), "mysql://payd:s3cret@127.0.0.1:1/payd")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open(unreachable MySQL) = %v, want an error without the password", err)
	}
}

func TestOpenSQLiteRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	db, err := repository.Open(t.Context(), "sqlite://payd.db")
	if err != nil {
		t.Fatalf("Open(sqlite://payd.db) = %v", err)
	}
	defer db.Close()
	if db.Dialect() != migrations.SQLite {
		t.Errorf("Dialect() = %q, want %q", db.Dialect(), migrations.SQLite)
	}
	if _, err := os.Stat(filepath.Join(".", "payd.db")); err != nil {
		t.Errorf("Open(sqlite://payd.db) made no ./payd.db: %v", err)
	}
}

func TestOpenSQLiteMemory(t *testing.T) {
	db, err := repository.Open(t.Context(), "sqlite://:memory:")
	if err != nil {
		t.Fatalf("Open(sqlite://:memory:) = %v", err)
	}
	defer db.Close()
	if err := repository.Migrate(t.Context(), db); err != nil {
		t.Fatalf("Migrate(:memory:) = %v", err)
	}
	newOrder(t, db) // the one connection keeps the schema
}

// TestSQLitePragmas: the writer connection enforces foreign keys, runs in
// WAL mode, waits for locks and syncs every commit (synchronous=FULL, 2:
// a committed payment survives a power loss); the readers (a SELECT
// outside a transaction) run in WAL mode, wait for locks and cannot write.
func TestSQLitePragmas(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	for pragma, want := range map[string]string{
		"foreign_keys": "1", "journal_mode": "wal", "busy_timeout": "10000", "synchronous": "2",
	} {
		var got string
		if err := db.Gorm().Raw("PRAGMA " + pragma).Scan(&got).Error; err != nil || got != want {
			t.Errorf("PRAGMA %s = %q, %v, want %q", pragma, got, err, want)
		}
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "busy_timeout": "10000", "query_only": "1"} {
		var got string
		if err := db.Gorm().Raw("SELECT * FROM pragma_" + pragma + "()").Scan(&got).Error; err != nil || got != want {
			t.Errorf("reader: pragma_%s() = %q, %v, want %q", pragma, got, err, want)
		}
	}
}

// TestFoundRows: an UPDATE that matches a row but changes nothing counts
// that row on both databases (clientFoundRows on MySQL). Guarded
// transitions rely on RowsAffected meaning "the guard matched".
func TestFoundRows(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		res := db.Gorm().Exec("UPDATE orders SET status = status WHERE id = ?", o.ID)
		if res.Error != nil || res.RowsAffected != 1 {
			t.Errorf("no-op UPDATE: RowsAffected = %d, %v, want 1", res.RowsAffected, res.Error)
		}
	})
}

// TestMySQLStrictMode: a value too long for its column is an error, never
// silently cut, even on a server configured without strict mode.
func TestMySQLStrictMode(t *testing.T) {
	db := dbtest.Open(t, migrations.MySQL)
	var mode string
	if err := db.Gorm().Raw("SELECT @@SESSION.sql_mode").Scan(&mode).Error; err != nil || !strings.Contains(mode, "STRICT_ALL_TABLES") {
		t.Errorf("sql_mode = %q, %v, want it to contain STRICT_ALL_TABLES", mode, err)
	}
}

// TestMySQLReadCommitted: every connection runs at READ COMMITTED from the
// start, so a transaction needs no SET before its BEGIN (one round trip
// less per transaction).
func TestMySQLReadCommitted(t *testing.T) {
	db := dbtest.Open(t, migrations.MySQL)
	pool, err := db.Gorm().DB()
	if err != nil {
		t.Fatal(err)
	}
	pool.SetMaxOpenConns(1) // the session counters below are the transaction's
	var name, level string
	err = db.Gorm().Raw("SHOW SESSION VARIABLES WHERE Variable_name IN ('tx_isolation', 'transaction_isolation')").
		Row().Scan(&name, &level)
	if err != nil || level != "READ-COMMITTED" {
		t.Errorf("session isolation = %q, %v, want READ-COMMITTED", level, err)
	}
	sets := func() int {
		var name string
		var n int
		if err := db.Gorm().Raw("SHOW SESSION STATUS LIKE 'Com_set_option'").Row().Scan(&name, &n); err != nil {
			t.Fatalf("read Com_set_option: %v", err)
		}
		return n
	}
	before := sets()
	o := newOrder(t, db)
	err = repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
		_, err := repository.NewOrderStore(db).Claim(ctx, o.ID, "r", domain.AnyVersion, t0)
		return err
	})
	if err != nil {
		t.Fatalf("InTx(claim) = %v", err)
	}
	if n := sets() - before; n != 0 {
		t.Errorf("a transaction sent %d SET statements, want 0", n)
	}
}

// TestMySQLStatementLimit: the server stops a statement when payd stops
// waiting for it (the URL's readTimeout), rather than running it on with
// nobody to read its rows, and a URL's own limit is kept.
func TestMySQLStatementLimit(t *testing.T) {
	url := dbtest.NewURL(t, migrations.MySQL)
	db := dbtest.OpenURL(t, url+"?readTimeout=1s")
	var limit float64
	if err := db.Gorm().Raw("SELECT @@max_statement_time").Row().Scan(&limit); err != nil {
		t.Skipf("the server has no max_statement_time (MySQL, not MariaDB): %v", err)
	}
	if limit != 1 {
		t.Errorf("max_statement_time = %v, want 1 (seconds, the read timeout)", limit)
	}
	start := time.Now()
	var slept int
	err := db.Gorm().Raw("SELECT SLEEP(20)").Row().Scan(&slept)
	if took := time.Since(start); err == nil && slept == 0 || took > 15*time.Second {
		t.Fatalf("SELECT SLEEP(20) = %d, %v after %v, want it stopped", slept, err, took)
	}
	// No session of the server still runs it.
	var running int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := db.Gorm().Raw("SELECT COUNT(*) FROM information_schema.processlist WHERE info = 'SELECT SLEEP(20)'").Row().Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if running != 0 {
		t.Errorf("%d sessions still run the statement payd gave up on", running)
	}

	own := dbtest.OpenURL(t, url+"?max_statement_time=7")
	if err := own.Gorm().Raw("SELECT @@max_statement_time").Row().Scan(&limit); err != nil || limit != 7 {
		t.Errorf("max_statement_time with the URL's own = %v, %v, want 7", limit, err)
	}
}
