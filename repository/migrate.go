package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/gofrs/flock"
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
// start together may all call it: they take turns, each reading what is
// applied only once it holds the lock (docs/adr/0056). On MySQL the lock
// is goose's lock row (goose_lock); on SQLite it is a file lock beside the
// database.
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
	results, err := p.Up(ctx)
	if partial := (*goose.PartialError)(nil); errors.As(err, &partial) {
		results = partial.Applied // those before the one that failed
	}
	var applied []MigrationState
	for _, r := range results {
		if r != nil && r.Error == nil && r.Source != nil {
			applied = append(applied, MigrationState{Version: r.Source.Version, Name: path.Base(r.Source.Path), Applied: true})
		}
	}
	return applied, upErr(db, err)
}

// upErr wraps a migration failure; nil stays nil.
func upErr(db *DB, err error) error {
	if err != nil {
		return fmt.Errorf("migrate %s database: %w", db.dialect, err)
	}
	return nil
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
	if db.dialect == migrations.SQLite && db.file != "" && locked {
		opts = append(opts, goose.WithLocker(fileLocker{flock.New(db.file + MigrationLockSuffix)}))
	}
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

// MigrationLockSuffix names a SQLite database's migration lock file: the
// database's path with this added (payd.db.migrate-lock).
const MigrationLockSuffix = ".migrate-lock"

// fileLocker makes the replicas of one SQLite database take turns at
// migrating, as goose's lock row does on MySQL. Without it two replicas
// could both apply a migration that builds a table again (00015, 00016):
// the second rebuild, after the first replica had gone on, dropped the
// columns the later migrations had added. The lock is the OS's, on a file
// beside the database, so a replica killed halfway holds it no longer: the
// next one takes it at once and goes on from the last migration committed.
// goose takes a connection before the lock: while a replica waits, its own
// single SQLite writer connection is taken, and nothing else in it can
// write (nothing does: payd listens only once migrated).
type fileLocker struct{ f *flock.Flock }

func (l fileLocker) Lock(ctx context.Context, _ *sql.DB) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // as long as the MySQL lock waits
	defer cancel()
	if _, err := l.f.TryLockContext(ctx, 50*time.Millisecond); err != nil {
		return fmt.Errorf("migration lock %s: %w", l.f.Path(), err)
	}
	return nil
}

func (l fileLocker) Unlock(context.Context, *sql.DB) error {
	if err := l.f.Unlock(); err != nil {
		return fmt.Errorf("migration lock %s: %w", l.f.Path(), err)
	}
	return nil
}
