package dbtest_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestEachRunsEveryDialect(t *testing.T) {
	var ran []string
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		ran = append(ran, string(d))
		if !strings.HasSuffix(t.Name(), "/"+string(d)) {
			t.Errorf("subtest %q is not named after dialect %q", t.Name(), d)
		}
	})
	if len(ran) == 0 {
		t.Errorf("Each ran no dialect")
	}
}

// TestNewURLIsFresh: each call is a new, empty database that migrates.
func TestNewURLIsFresh(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		a, b := dbtest.NewURL(t, d), dbtest.NewURL(t, d)
		if a == b {
			t.Fatalf("NewURL twice = %q both times, want two databases", a)
		}
		for _, u := range []string{a, b} {
			db := dbtest.OpenURL(t, u)
			var n int64
			if err := db.Gorm().Raw("SELECT COUNT(*) FROM orders").Scan(&n).Error; err != nil || n != 0 {
				t.Errorf("orders in %s = %d, %v, want an empty table", d, n, err)
			}
		}
	})
}

// TestMySQLDatabaseDropped: the database NewURL made is gone once its test ends.
func TestMySQLDatabaseDropped(t *testing.T) {
	var name string
	t.Run("make", func(t *testing.T) {
		u, err := url.Parse(dbtest.NewURL(t, migrations.MySQL))
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(u.Path, "/")
	})
	if name == "" {
		t.Skip("no MySQL database was made")
	}
	server := dbtest.Open(t, migrations.MySQL)
	var n int64
	err := server.Gorm().Raw("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n).Error
	if err != nil || n != 0 {
		t.Errorf("database %s after its test: %d found, %v; want dropped", name, n, err)
	}
}

func TestCountStatements(t *testing.T) {
	db := dbtest.Open(t, migrations.SQLite)
	c := dbtest.CountStatements(db)
	db.Gorm().Exec("DELETE FROM orders")
	var n int64
	db.Gorm().Raw("SELECT COUNT(*) FROM orders").Scan(&n)
	db.Gorm().Table("orders").Count(&n)
	if got := c.Load(); got != 3 {
		t.Errorf("Load() = %d after 3 statements, want 3", got)
	}
	c.Reset()
	if got := c.Load(); got != 0 {
		t.Errorf("Load() after Reset = %d, want 0", got)
	}
	second := dbtest.CountStatements(db) // several counters may watch one handle
	db.Gorm().Exec("DELETE FROM orders")
	if c.Load() != 1 || second.Load() != 1 {
		t.Errorf("two counters saw %d and %d statements, want 1 and 1", c.Load(), second.Load())
	}
	// A read the stores send outside GORM counts as well.
	_, _ = repository.NewRecordStore(db).Find(t.Context(), "customer:c1", "k")
	if c.Load() != 2 || second.Load() != 2 {
		t.Errorf("after a direct read, the counters saw %d and %d statements, want 2 and 2", c.Load(), second.Load())
	}
}
