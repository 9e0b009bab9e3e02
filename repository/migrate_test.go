package repository_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, err := repository.Open(t.Context(), dbtest.NewURL(t, d))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()

		if pending, err := repository.Pending(t.Context(), db); !pending || err != nil {
			t.Errorf("Pending(empty database) = %v, %v, want true", pending, err)
		}
		states, err := repository.MigrationStatus(t.Context(), db)
		if err != nil || len(states) == 0 || states[0].Applied || states[0].Name != "00001_core.sql" {
			t.Errorf("MigrationStatus(empty database) = %+v, %v, want 00001_core.sql pending", states, err)
		}

		for range 2 { // the second run finds nothing to do
			if err := repository.Migrate(t.Context(), db); err != nil {
				t.Fatalf("Migrate = %v", err)
			}
		}
		if pending, err := repository.Pending(t.Context(), db); pending || err != nil {
			t.Errorf("Pending(migrated) = %v, %v, want false", pending, err)
		}
		states, err = repository.MigrationStatus(t.Context(), db)
		if err != nil {
			t.Fatalf("MigrationStatus = %v", err)
		}
		for _, s := range states {
			if !s.Applied || s.AppliedAt.IsZero() {
				t.Errorf("MigrationStatus: %+v, want applied with a time", s)
			}
		}
	})
}

// TestMigrateReplicas: replicas starting together, or one while another
// is halfway, all migrate without error, each migration is applied once,
// and the schema is the one a lone migration builds. (Two SQLite replicas
// once both applied 00015, which builds orders again: the second rebuild,
// after the first replica had gone on to 00020, dropped the column 00020
// had added.)
func TestMigrateReplicas(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		alone := dbtest.Open(t, d)
		want := columnsOf(t, alone, d)
		for round := range 3 {
			url := dbtest.NewURL(t, d)
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					time.Sleep(time.Duration(i*round) * 15 * time.Millisecond) // some start while others are halfway
					db, err := repository.Open(t.Context(), url)
					if err != nil {
						t.Errorf("Open = %v", err)
						return
					}
					defer db.Close()
					if err := repository.Migrate(t.Context(), db); err != nil {
						t.Errorf("Migrate = %v", err)
					}
				})
			}
			wg.Wait()

			db := dbtest.OpenURL(t, url)
			var twice []int64
			if err := db.Gorm().Raw(`SELECT version_id FROM goose_db_version GROUP BY version_id HAVING COUNT(*) > 1`).Scan(&twice).Error; err != nil {
				t.Fatal(err)
			}
			if len(twice) > 0 {
				t.Errorf("round %d: migrations applied more than once: %v", round, twice)
			}
			got := columnsOf(t, db, d)
			for _, c := range want {
				if !slices.Contains(got, c) {
					t.Errorf("round %d: column %s missing after replicas migrated together", round, c)
				}
			}
			if len(got) != len(want) {
				t.Errorf("round %d: %d columns after replicas migrated together, want %d as after a lone migration", round, len(got), len(want))
			}
		}
	})
}

// columnsOf lists every column of every table, as table.column.
func columnsOf(t *testing.T, db *repository.DB, d migrations.Dialect) (out []string) {
	t.Helper()
	q := `SELECT m.name || '.' || p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' ORDER BY 1`
	if d == migrations.MySQL {
		q = `SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME) FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1`
	}
	if err := db.Gorm().Raw(q).Scan(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrateWaitsForTheLock: while another process holds a SQLite
// database's migration lock, Migrate applies nothing; once it is released,
// Migrate goes on.
func TestMigrateWaitsForTheLock(t *testing.T) {
	url := dbtest.NewURL(t, migrations.SQLite)
	db, err := repository.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	holder := flock.New(strings.TrimPrefix(url, "sqlite://") + ".migrate-lock")
	if ok, err := holder.TryLock(); !ok || err != nil {
		t.Fatalf("take the lock = %v, %v", ok, err)
	}

	done := make(chan error, 1)
	go func() { done <- repository.Migrate(t.Context(), db) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate returned %v while another held the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	// Asked as another replica would: goose holds its database's one
	// SQLite writer connection while it waits for the lock.
	other, err := repository.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if states, err := repository.MigrationStatus(t.Context(), other); err != nil || len(states) == 0 || states[0].Applied {
		t.Fatalf("MigrationStatus while the lock is held = %+v, %v, want nothing applied", states, err)
	}
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Migrate after the lock was released = %v", err)
	}
	if pending, err := repository.Pending(t.Context(), db); pending || err != nil {
		t.Errorf("Pending = %v, %v, want every migration applied", pending, err)
	}
}
