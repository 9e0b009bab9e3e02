package repository_test

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestSecretCheckOneValue: replicas starting together on a new database,
// each with its own value, all read back one value, one of theirs; a
// database with a value keeps it.
func TestSecretCheckOneValue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		url := dbtest.NewURL(t, d)
		first := dbtest.OpenURL(t, url)
		if v, err := repository.SecretCheck(t.Context(), first); v != "" || err != nil {
			t.Fatalf("SecretCheck(new database) = %q, %v, want none", v, err)
		}
		const n = 8
		got := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				db, err := repository.Open(t.Context(), url)
				if err != nil {
					t.Error(err)
					return
				}
				defer db.Close()
				got[i], err = repository.RecordSecretCheck(t.Context(), db, fmt.Sprintf("%064d", i))
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if !strings.HasPrefix(got[0], "0000") {
			t.Fatalf("RecordSecretCheck = %q, want one of the values offered", got[0])
		}
		for i, v := range got {
			if v != got[0] {
				t.Errorf("replica %d read back %q, replica 0 %q: want one value", i, v, got[0])
			}
		}
		again, err := repository.RecordSecretCheck(t.Context(), first, strings.Repeat("f", 64))
		if err != nil || again != got[0] {
			t.Errorf("RecordSecretCheck over a recorded value = %q, %v, want the recorded %q", again, err, got[0])
		}
		if v, err := repository.SecretCheck(t.Context(), first); v != got[0] || err != nil {
			t.Errorf("SecretCheck = %q, %v, want %q", v, err, got[0])
		}
	})
}

// TestOpenMySQLMissingDatabase: a URL naming a database the server does
// not have says so, and how to create it; payd does not create it.
func TestOpenMySQLMissingDatabase(t *testing.T) {
	server := os.Getenv(dbtest.EnvMySQL)
	if server == "" {
		dbtest.NewURL(t, migrations.MySQL) // skips, or fails when MySQL is required
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/payd_missing_database"
	_, err = repository.Open(t.Context(), u.String())
	want := "database payd_missing_database does not exist on " + u.Host + ": create it with CREATE DATABASE payd_missing_database"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(missing database) = %v, want %q", err, want)
	}
}

// TestMigrateUpReports: MigrateUp returns each migration it applied, oldest
// first, and none once the database is up to date.
func TestMigrateUpReports(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, err := repository.Open(t.Context(), dbtest.NewURL(t, d))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		states, err := repository.MigrationStatus(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := repository.MigrateUp(t.Context(), db)
		if err != nil || len(applied) != len(states) {
			t.Fatalf("MigrateUp(new database) = %d migrations, %v, want all %d", len(applied), err, len(states))
		}
		for i, m := range applied {
			if m.Version != states[i].Version || m.Name != states[i].Name {
				t.Errorf("applied[%d] = %d %s, want %d %s", i, m.Version, m.Name, states[i].Version, states[i].Name)
			}
		}
		if again, err := repository.MigrateUp(t.Context(), db); len(again) != 0 || err != nil {
			t.Errorf("MigrateUp(migrated) = %+v, %v, want none", again, err)
		}
	})
}
