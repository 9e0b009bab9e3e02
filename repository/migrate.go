package repository

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/payd/payd/migrations"
)

// MigrationState is where one migration file stands in a database.
type MigrationState struct {
	Version   int64
	Name      string    // the file name, e.g. 00001_core.sql
	Applied   bool      // false: pending
	AppliedAt time.Time // zero while pending
}

// Migrate applies every pending migration of db's dialect. Replicas that
// start together may all call it: on MySQL a lock row (goose_lock) makes
// them take turns; SQLite has no such lock in goose, so there the loser of
// a race (its migration fails because the winner's tables exist) retries
// for as long as someone else is making progress.
func Migrate(ctx context.Context, db *DB) error {
	_, err := MigrateUp(ctx, db)
	return err
}

// MigrateUp is Migrate, and returns the migrations this call applied,
// oldest first: none when the database was up to date (or another replica
// applied them first).
func MigrateUp(ctx context.Context, db *DB) ([]MigrationState, error) {
	p, err := newMigrator(db, true)
	if err != nil {
		return nil, err
	}
	var applied []MigrationState
	for {
		before := dbVersion(ctx, p)
		results, err := p.Up(ctx)
		if partial := (*goose.PartialError)(nil); errors.As(err, &partial) {
			results = partial.Applied // those before the one that failed
		}
		for _, r := range results {
			if r != nil && r.Error == nil && r.Source != nil {
				applied = append(applied, MigrationState{Version: r.Source.Version, Name: path.Base(r.Source.Path), Applied: true})
			}
		}
		if db.dialect != migrations.SQLite || err == nil || dbVersion(ctx, p) == before {
			return applied, upErr(db, err)
		}
	}
}

// upErr wraps a migration failure; nil stays nil.
func upErr(db *DB, err error) error {
	if err != nil {
		return fmt.Errorf("migrate %s database: %w", db.dialect, err)
	}
	return nil
}

// dbVersion is the database's schema version, -1 before goose's version
// table exists.
func dbVersion(ctx context.Context, p *goose.Provider) int64 {
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return -1
	}
	return v
}

// MigrationStatus lists every known migration, oldest first, with whether
// and when it was applied to db.
func MigrationStatus(ctx context.Context, db *DB) ([]MigrationState, error) {
	p, err := newMigrator(db, false)
	if err != nil {
		return nil, err
	}
	list, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	states := make([]MigrationState, 0, len(list))
	for _, s := range list {
		states = append(states, MigrationState{
			Version:   s.Source.Version,
			Name:      path.Base(s.Source.Path),
			Applied:   s.State == goose.StateApplied,
			AppliedAt: s.AppliedAt,
		})
	}
	return states, nil
}

// Pending reports whether db lacks any migration this binary knows: a
// replica that answers true is not ready to serve.
func Pending(ctx context.Context, db *DB) (bool, error) {
	p, err := newMigrator(db, false)
	if err != nil {
		return false, err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("check pending migrations: %w", err)
	}
	return pending, nil
}

// newMigrator builds a goose provider for db: no global goose state, so
// concurrent tests on different databases do not race. Only Up needs the
// cross-replica lock.
func newMigrator(db *DB, locked bool) (*goose.Provider, error) {
	fsys, err := migrations.FS(db.dialect)
	if err != nil {
		return nil, err
	}
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if db.dialect == migrations.MySQL {
		dialect = goose.DialectMySQL
		if locked {
			// Poll every half second (not goose's 5s) for up to 5 minutes.
			l, err := lock.NewMySQLTableLocker(lock.WithTableLockTimeout(500*time.Millisecond, 600))
			if err != nil {
				return nil, fmt.Errorf("migration lock: %w", err)
			}
			opts = append(opts, goose.WithLocker(l))
		}
	}
	p, err := goose.NewProvider(dialect, db.sql, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", db.dialect, err)
	}
	return p, nil
}
