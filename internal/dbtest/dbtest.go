// Package dbtest gives every package's tests real, fresh payd databases:
// one per call, on SQLite always and on MySQL/MariaDB when a server is
// configured, migrated with the same files production uses, and removed
// when the test ends.
//
// The MySQL server comes from PAYD_TEST_MYSQL_DSN, a payd database URL such
// as mysql://root:@127.0.0.1:3306/test (its database part is ignored: each
// test gets a new database payd_t_<random>). Without it the mysql subtests
// skip, unless PAYD_TEST_REQUIRE_MYSQL=1, as in CI, makes that a failure.
package dbtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// Environment variables that configure the MySQL side of the tests.
const (
	EnvMySQL        = "PAYD_TEST_MYSQL_DSN"
	EnvRequireMySQL = "PAYD_TEST_REQUIRE_MYSQL"
)

// Dialects lists the dialects every store test runs on.
func Dialects() []migrations.Dialect {
	return []migrations.Dialect{migrations.SQLite, migrations.MySQL}
}

// Each runs fn as one subtest per dialect, named "sqlite" and "mysql".
// The mysql subtest skips (or fails, see the package doc) when no server is
// configured.
func Each(t *testing.T, fn func(t *testing.T, d migrations.Dialect)) {
	t.Helper()
	for _, d := range Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Helper()
			if d == migrations.MySQL {
				requireMySQL(t)
			}
			fn(t, d)
		})
	}
}

// NewURL creates a fresh, empty database of dialect d and returns its payd
// database URL; the database is removed when the test ends.
func NewURL(t testing.TB, d migrations.Dialect) string {
	t.Helper()
	switch d {
	case migrations.SQLite:
		return "sqlite://" + filepath.Join(t.TempDir(), "payd.db")
	case migrations.MySQL:
		requireMySQL(t)
		return newMySQLDatabase(t, os.Getenv(EnvMySQL))
	}
	t.Fatalf("dbtest: unknown dialect %q", d)
	return ""
}

// Open returns a fresh database of dialect d, opened and migrated, closed
// when the test ends.
func Open(t testing.TB, d migrations.Dialect) *repository.DB {
	t.Helper()
	return OpenURL(t, NewURL(t, d))
}

// OpenURL opens and migrates the database at url, closing it when the test
// ends. Several OpenURL calls on one URL act like several payd replicas.
func OpenURL(t testing.TB, url string) *repository.DB {
	t.Helper()
	ctx := context.Background()
	db, err := repository.Open(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := repository.Migrate(ctx, db); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return db
}

// requireMySQL skips t, or fails it in CI, when no MySQL server is configured.
func requireMySQL(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvMySQL) != "" {
		return
	}
	if os.Getenv(EnvRequireMySQL) == "1" {
		t.Fatalf("dbtest: %s=1 but %s is not set (e.g. mysql://root:@127.0.0.1:3306/test)", EnvRequireMySQL, EnvMySQL)
	}
	testdeps.Skip(t, testdeps.MySQL, "dbtest: "+EnvMySQL+" is not set; skipping MySQL (set it to e.g. mysql://root:@127.0.0.1:3306/test)")
}
