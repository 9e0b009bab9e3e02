package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite" // registers the SQLite driver payd uses
	"github.com/go-sql-driver/mysql"
)

// sqlitePragmas are the connection settings payd's repository applies to
// SQLite (busy timeout, foreign keys, synchronous=FULL under WAL, BEGIN
// IMMEDIATE), so the floor runs under the same locking and syncing as
// payd; sqliteReadPragmas are its readers'.
const (
	sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(FULL)&_txlock=immediate"
	sqliteReadPragmas = "_pragma=busy_timeout(10000)&_pragma=query_only(1)"
)

// database is the fresh database one benchmark run uses.
type database struct {
	Dialect string // "sqlite" or "mysql"
	URL     string // payd's PAYD_DATABASE_URL for it
	path    string // SQLite: the file
	mysql   *mysql.Config
	admin   *sql.DB // MySQL: a connection to the server, for status counters and the drop
	kept    bool    // a preload kept for later runs: never dropped
}

// newDatabase makes a fresh database: a SQLite file in dir when dbURL is
// empty, else a new database on the MySQL/MariaDB server of dbURL (its
// user, password, host and parameters; the database named there is left
// alone), dropped by Drop. With keep, it is the database of that name (a
// file of that name in the user's cache folder on SQLite), made if
// missing and never dropped: a preload kept for later runs.
func newDatabase(ctx context.Context, dbURL, dir, keep string) (*database, error) {
	if dbURL == "" {
		path := filepath.Join(dir, "payd.db")
		if keep != "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(filepath.Join(cache, "paydbench"), 0o755); err != nil {
				return nil, err
			}
			path = filepath.Join(cache, "paydbench", keep+".db")
		}
		return &database{Dialect: "sqlite", URL: "sqlite://" + path, path: path, kept: keep != ""}, nil
	}
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme != "mysql" {
		return nil, errors.New("-db must be a mysql://USER:PASS@HOST:PORT/DB URL")
	}
	cfg := mysqlConfig(u)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(1)
	create := "CREATE DATABASE "
	cfg.DBName = "paydbench_" + randomHex()[:12]
	if keep != "" {
		cfg.DBName, create = keep, "CREATE DATABASE IF NOT EXISTS "
	}
	if _, err := admin.ExecContext(ctx, create+cfg.DBName); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database: %w", err)
	}
	u.Path = "/" + cfg.DBName
	return &database{Dialect: "mysql", URL: u.String(), mysql: cfg, admin: admin, kept: keep != ""}, nil
}

// mysqlConfig is the driver configuration for the server of u, without a
// database, with the settings payd forces (repository.mysqlConfig): matched
// rows as RowsAffected, one round trip per statement, strict mode.
func mysqlConfig(u *url.URL) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.ClientFoundRows, cfg.InterpolateParams = true, true
	cfg.Params = map[string]string{"sql_mode": "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')"}
	for k, v := range u.Query() {
		cfg.Params[k] = v[0]
	}
	return cfg
}

// Drop removes a MySQL database made by newDatabase (a SQLite file goes
// with its temporary folder).
func (d *database) Drop(ctx context.Context) error {
	if d.admin == nil {
		return nil
	}
	defer d.admin.Close()
	if d.kept {
		return nil
	}
	_, err := d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.mysql.DBName)
	return err
}

// open connects the raw-SQL floor to the database with the pools payd
// uses: on SQLite one connection for every write and transaction and four
// for reads; on MySQL one pool for both, its session at READ COMMITTED,
// payd's isolation, set once per connection in the DSN rather than before
// each transaction.
func (d *database) open(ctx context.Context) (write, read *sql.DB, err error) {
	if d.Dialect == "sqlite" {
		if write, err = sql.Open(sqlite.DriverName, d.path+"?"+sqlitePragmas); err != nil {
			return nil, nil, err
		}
		write.SetMaxOpenConns(1)
		if read, err = sql.Open(sqlite.DriverName, d.path+"?"+sqliteReadPragmas); err != nil {
			write.Close()
			return nil, nil, err
		}
		read.SetMaxOpenConns(4)
		read.SetMaxIdleConns(4)
		if err = errors.Join(write.PingContext(ctx), read.PingContext(ctx)); err != nil {
			write.Close()
			read.Close()
			return nil, nil, err
		}
		return write, read, nil
	}
	db, err := d.openMySQL(ctx, false)
	return db, db, err
}

// openMySQL opens the floor's MySQL pool; multi allows several statements
// in one packet, as payd's pool does.
func (d *database) openMySQL(ctx context.Context, multi bool) (*sql.DB, error) {
	var err error
	// MariaDB (and MySQL before 8.0) name it tx_isolation; MySQL 8, transaction_isolation.
	for _, v := range []string{"tx_isolation", "transaction_isolation"} {
		cfg := d.mysql.Clone()
		cfg.Params[v] = "'READ-COMMITTED'"
		cfg.MultiStatements = multi
		var db *sql.DB
		if db, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		if err = db.PingContext(ctx); err == nil {
			return db, nil
		}
		db.Close()
	}
	return nil, fmt.Errorf("open floor connection: %w", err)
}

// counted are the server counters a phase reports per request: every
// statement the server received (Questions) and the kinds payd sends.
var counted = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_begin", "Com_commit", "Com_set_option"}

// counters reads the server-wide statement counters (MySQL only; nil on
// SQLite, which keeps none). They count every client of the server.
func (d *database) counters(ctx context.Context) (map[string]int64, error) {
	if d.admin == nil {
		return nil, nil
	}
	rows, err := d.admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(counted, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("read statement counters: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, rows.Err()
}

// timeLayout is how payd writes timestamps (repository.timeLayout): UTC,
// fixed width, microseconds.
const timeLayout = "2006-01-02 15:04:05.000000"

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }
