package repository_test

import (
	"sync"
	"testing"

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

// TestMigrateReplicas: replicas starting together all migrate without error.
func TestMigrateReplicas(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		url := dbtest.NewURL(t, d)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
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
	})
}
