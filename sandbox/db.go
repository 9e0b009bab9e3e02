package sandbox

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// migrationTable keeps the sandbox's schema history apart from payd's, in
// case both are ever pointed at one database.
const migrationTable = "sandbox_goose_db_version"

// openDB opens and migrates the sandbox database named by rawURL. It is
// deliberately self-contained: the sandbox stands in for a foreign service
// and shares no code with payd's repository.
func openDB(ctx context.Context, rawURL string) (*gorm.DB, error) {
	var (
		dialector gorm.Dialector
		dialect   schemaDialect
		maxConns  = 10
	)
	switch {
	case strings.HasPrefix(rawURL, "sqlite://"):
		path := strings.TrimPrefix(rawURL, "sqlite://")
		if path == "" || strings.ContainsRune(path, '?') {
			return nil, fmt.Errorf("sandbox: database URL must be sqlite://PATH (no query)")
		}
		dialector, dialect = sqlite.Open(sqliteDSN(path)), schemaSQLite
		// Writers queue in Go's pool rather than spin in SQLite's busy
		// handler; an in-memory database exists once per connection.
		maxConns = 4
		if path == ":memory:" {
			maxConns = 1
		}
	case strings.HasPrefix(rawURL, "mysql://"):
		cfg, err := mysqlConfig(rawURL)
		if err != nil {
			return nil, err
		}
		dialector, dialect = mysql.New(mysql.Config{DSNConfig: cfg}), schemaMySQL
	default:
		return nil, fmt.Errorf("sandbox: database URL must start with sqlite:// or mysql://")
	}

	db, err := gorm.Open(dialector, &gorm.Config{
		Logger:                 logger.Discard, // errors are returned; SQL text carries payment data
		TranslateError:         true,           // duplicate keys surface as gorm.ErrDuplicatedKey on both dialects
		SkipDefaultTransaction: true,           // every multi-statement write opens its own transaction
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: open %s database: %w", dialect, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("sandbox: open %s database: %w", dialect, err)
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	if err := migrate(ctx, db, dialect); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// sqliteDSN turns on WAL (readers never block the writer), waits for a
// busy database instead of failing, and begins every transaction
// IMMEDIATE so two writers never deadlock upgrading read locks.
func sqliteDSN(path string) string {
	return path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
}

// mysqlConfig reads mysql://USER:PASS@HOST:PORT/DB. clientFoundRows makes
// RowsAffected count matched rows, as SQLite does, so guarded UPDATEs read
// the same on both; times are parsed and kept in UTC.
func mysqlConfig(rawURL string) (*gomysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("sandbox: database URL must be mysql://USER:PASS@HOST:PORT/DB (no query)")
	}
	cfg := gomysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.DBName = strings.Trim(u.Path, "/")
	cfg.ParseTime, cfg.ClientFoundRows, cfg.Loc = true, true, time.UTC
	return cfg, nil
}

// migrate applies the embedded sandbox schema with goose, without touching
// goose's global state.
func migrate(ctx context.Context, db *gorm.DB, d schemaDialect) error {
	fsys, err := migrationFS(d)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	gd := goose.DialectSQLite3
	if d == schemaMySQL {
		gd = goose.DialectMySQL
	}
	p, err := goose.NewProvider(gd, sqlDB, fsys, goose.WithTableName(migrationTable))
	if err != nil {
		return fmt.Errorf("sandbox: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sandbox: migrate: %w", err)
	}
	return nil
}

// timeLayout is fixed-width, so in SQLite's TEXT columns comparing as text
// is comparing in time; MySQL reads the same text into DATETIME(6).
const timeLayout = "2006-01-02 15:04:05.000000"

// dbTime is a UTC instant as the sandbox stores it, with microsecond
// precision in both dialects. The zero value is stored as NULL.
type dbTime struct{ time.Time }

// at wraps t for the database, dropping what DATETIME(6) cannot hold.
func at(t time.Time) dbTime { return dbTime{t.UTC().Truncate(time.Microsecond)} }

// Value writes the fixed-width text form (NULL for the zero time).
func (t dbTime) Value() (driver.Value, error) {
	if t.IsZero() {
		return nil, nil
	}
	return t.UTC().Format(timeLayout), nil
}

// Scan reads a time.Time (MySQL with parseTime) or the text form (SQLite).
func (t *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		t.Time = time.Time{}
		return nil
	case time.Time:
		t.Time = x.UTC()
		return nil
	case string:
		return t.parse(x)
	case []byte:
		return t.parse(string(x))
	}
	return fmt.Errorf("sandbox: cannot scan %T into a time", v)
}

func (t *dbTime) parse(s string) error {
	p, err := time.ParseInLocation(timeLayout, s, time.UTC)
	if err != nil {
		return fmt.Errorf("sandbox: stored time %q: %w", s, err)
	}
	t.Time = p
	return nil
}

// isRetryable reports a transaction that lost a lock race (an InnoDB
// deadlock or lock-wait timeout) and may simply run again.
func isRetryable(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
