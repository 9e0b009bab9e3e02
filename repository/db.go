// Package repository is payd's storage adapter: stores for customers,
// orders, payment attempts, idempotency records, the webhook inbox, refunds,
// discrepancies, disputes, the ledger, reconciliation runs and the audit
// log on MySQL/MariaDB or on SQLite, the transactor that lets the service
// group their calls, and the migration runner. Every statement a store
// writes out goes on one executor, the pool or the caller's transaction;
// GORM builds the rest from the row models (docs/adr/0033-one-way-to-sql.md).
// It hides GORM and the drivers: callers see domain types and domain
// errors only.
package repository

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/payd/payd/migrations"
)

// sqlitePragmas are applied to every SQLite connection.
//   - busy_timeout first, so the others wait for a lock instead of failing.
//     Within one payd the writer pool has a single connection (see
//     sqlitePools), so this wait is only for other processes on the file
//     (replicas, `payd migrate`);
//   - foreign_keys is off by default in SQLite;
//   - synchronous=FULL: in WAL mode every commit is synced to disk before
//     COMMIT returns, so a payment payd has answered survives a power loss
//     (NORMAL would sync only at checkpoints: a power cut could roll back
//     committed payments). See docs/adr/0014-sqlite-one-writer.md;
//   - _txlock=immediate makes BEGIN take the write lock at once: a deferred
//     transaction that reads and then writes cannot upgrade its lock while
//     another connection writes, and fails with SQLITE_BUSY without waiting.
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)" +
	"&_pragma=synchronous(FULL)&_txlock=immediate"

// sqliteReadPragmas are the reader connections': they never write.
const sqliteReadPragmas = "_pragma=busy_timeout(10000)&_pragma=query_only(1)"

// sqliteReaders bounds the SQLite reader pool. Readers run in parallel
// under WAL, beside the one writer connection.
const sqliteReaders = 4

// DB is an open payd database: a connection pool, the dialect it speaks,
// the executor the stores send the statements they write out on, and the
// GORM handle for the statements GORM builds (docs/adr/0033).
type DB struct {
	gorm    *gorm.DB
	pool    executor // outside a transaction: sql, or sqlitePools over sql and read
	sql     *sql.DB  // every write; on SQLite, one connection
	read    *sql.DB  // SQLite: the reader pool; nil when sql serves reads too
	dialect migrations.Dialect
	file    string // SQLite: the database file; "" in memory
	galera  bool   // a MariaDB Galera node (wsrep_on): reads wait for the cluster (wsrep_sync_wait)

	retry   retryPolicy
	onRetry atomic.Pointer[RetryFunc]
	direct  atomic.Pointer[[]func()]                 // told of each statement sent outside GORM (OnDirectStatement)
	fault   atomic.Pointer[func(point string) error] // tests only (export_test.go)
}

// Open connects to the database named by a payd database URL,
// sqlite://PATH (relative or absolute; sqlite://:memory: for a private
// in-memory database) or mysql://USER:PASS@HOST:PORT/DB?params, and checks
// that it answers. Errors never repeat the URL: it may carry a password.
func Open(ctx context.Context, rawURL string, opts ...Option) (*DB, error) {
	var oc openConfig
	for _, o := range opts {
		o(&oc)
	}
	scheme, rest, _ := strings.Cut(rawURL, "://")
	switch scheme {
	case "sqlite":
		return openSQLite(ctx, rest, oc)
	case "mysql":
		return openMySQL(ctx, rawURL, oc)
	}
	return nil, fmt.Errorf("open database: unsupported URL scheme %q (want sqlite:// or mysql://)", scheme)
}

// Option changes how Open opens a database.
type Option func(*openConfig)

// PoolOpener opens a database/sql pool on a connector, as sql.OpenDB does.
// The Pool says what the connector reaches, for whoever wraps it (tracing:
// telemetry.Tracing.DatabaseOptions).
type PoolOpener func(c driver.Connector, p Pool) *sql.DB

// Pool is what a pool's connector reaches.
type Pool struct {
	System    string // "sqlite" or "mysql"
	Namespace string // the MySQL database, or the SQLite file
	// Address and Port are the server's, as the URL names it: a host and
	// a TCP port, or a Unix socket's path and no port. Empty for SQLite,
	// which has no server.
	Address string
	Port    int
}

// WithPoolOpener has Open open every pool with open instead of
// database/sql's own. Without it the pools are database/sql's, unwrapped.
func WithPoolOpener(open PoolOpener) Option {
	return func(oc *openConfig) { oc.pools = open }
}

// openConfig is Open's options.
type openConfig struct {
	pools     PoolOpener    // nil: sql.Open, sql.OpenDB
	statement time.Duration // how long a MySQL statement may take, when the URL does not say (readTimeout); 0: 30 s
}

// LongStatements lets each statement on MySQL/MariaDB run for up to d
// unless the URL's readTimeout says otherwise: for `payd migrate`, whose
// index builds on a grown table take minutes, where a request's statement
// takes milliseconds.
func LongStatements(d time.Duration) Option {
	return func(oc *openConfig) { oc.statement = d }
}

// open is sql.Open(driverName, dsn), or the PoolOpener's pool on the
// same driver and name.
func (oc openConfig) open(driverName, dsn string, p Pool) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil || oc.pools == nil {
		return db, err
	}
	drv := db.Driver()
	_ = db.Close() // no connection opened yet: it only named the driver
	return oc.pools(dsnConnector{drv: drv, dsn: dsn}, p), nil
}

// openDB is sql.OpenDB(c), or the PoolOpener's pool on c.
func (oc openConfig) openDB(c driver.Connector, p Pool) *sql.DB {
	if oc.pools == nil {
		return sql.OpenDB(c)
	}
	return oc.pools(c, p)
}

// dsnConnector is a driver and a name as a driver.Connector, as sql.Open
// makes one for a driver without a connector of its own.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

func openSQLite(ctx context.Context, path string, oc openConfig) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: sqlite URL has no path")
	}
	if strings.ContainsRune(path, '?') {
		return nil, errors.New("open database: sqlite URL takes no parameters")
	}
	if err := checkSQLiteFolder(path); err != nil {
		return nil, err
	}
	return openSQLiteWith(ctx, path, sqlitePragmas, sqliteReadPragmas, oc)
}

// openSQLiteWith opens path with the writer's and the readers' connection
// settings (tests vary them).
func openSQLiteWith(ctx context.Context, path, writePragmas, readPragmas string, oc openConfig) (*DB, error) {
	write, err := oc.open(sqlite.DriverName, path+"?"+writePragmas, Pool{System: "sqlite", Namespace: path})
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	var pool gorm.ConnPool = write
	var read *sql.DB
	if path != ":memory:" { // every connection would open its own empty database
		read, err = oc.open(sqlite.DriverName, path+"?"+readPragmas, Pool{System: "sqlite", Namespace: path})
		if err != nil {
			write.Close()
			return nil, fmt.Errorf("open sqlite database %s: %w", path, err)
		}
		read.SetMaxOpenConns(sqliteReaders)
		read.SetMaxIdleConns(sqliteReaders)
		pool = sqlitePools{write: write, read: read}
	}
	db, err := finishOpen(ctx, write, pool, &sqlite.Dialector{Conn: pool}, migrations.SQLite)
	if err != nil {
		if read != nil {
			read.Close()
		}
		return nil, err
	}
	db.read = read
	db.file = sqliteFile(path)
	if err := db.useWAL(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// sqliteFile is the file a SQLite path names (a file: URI's path too),
// or "" for an in-memory database.
func sqliteFile(path string) string {
	path = strings.TrimPrefix(path, "file:")
	if path == ":memory:" || path == "" {
		return ""
	}
	return path
}

// checkSQLiteFolder reports a database file whose folder is missing or is
// not a folder: SQLite would say only "out of memory (14)". SQLite creates
// the file, never its folder.
func checkSQLiteFolder(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("open sqlite database %s: the folder %s does not exist (create it, or choose another path)", path, dir)
	case err != nil:
		return fmt.Errorf("open sqlite database %s: folder %s: %w", path, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("open sqlite database %s: %s is not a folder", path, dir)
	}
	return nil
}

// useWAL puts the database file in WAL mode, so readers run beside the one
// writer. The mode is stored in the file, so every later connection (of any
// process) has it. Switching needs the file to itself and SQLite reports
// "busy" at once instead of waiting, so when several processes open a new
// database together, the losers try again until it is switched.
func (db *DB) useWAL(ctx context.Context) error {
	var mode string
	var err error
	for range 100 {
		err = db.queryRow(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil && (mode == "wal" || mode == "memory") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("open sqlite database: cannot switch to WAL mode (mode %q, error %v)", mode, err)
}

func openMySQL(ctx context.Context, rawURL string, oc openConfig) (*DB, error) {
	cfg, err := mysqlConfig(rawURL, cmp.Or(oc.statement, 30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("open mysql database: %w", err)
	}
	sqlDB, err := connectMySQL(ctx, cfg, oc)
	if err != nil {
		return nil, err
	}
	galera, err := wsrepOn(ctx, sqlDB)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	if _, set := cfg.Params["wsrep_sync_wait"]; galera && !set {
		// Reconnect with the cluster-wide read wait in every session.
		sqlDB.Close()
		cfg.Params["wsrep_sync_wait"] = "1"
		if sqlDB, err = connectMySQL(ctx, cfg, oc); err != nil {
			return nil, err
		}
	}
	sqlDB.SetMaxOpenConns(32)
	sqlDB.SetMaxIdleConns(32)
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	// Below any sensible server wait_timeout, so the pool drops idle
	// connections before the server does.
	sqlDB.SetConnMaxIdleTime(time.Minute)
	db, err := finishOpen(ctx, sqlDB, sqlDB, gormmysql.New(gormmysql.Config{Conn: sqlDB}), migrations.MySQL)
	if err != nil {
		return nil, err
	}
	db.galera = galera
	return db, nil
}

// wsrepOn reports whether the server is a Galera cluster node with
// replication on. Plain MariaDB answers OFF; MySQL does not know the
// variable.
//
// On a Galera node payd sets wsrep_sync_wait=1 in every session (unless the
// URL sets it): a read, and the BEGIN of each transaction, first waits
// until this node has applied every write the cluster committed before
// it. Without that wait a replay, GET /v1/requests/{key} or an order read
// on one node could miss a payment another node's payd just committed —
// a node applies other nodes' writes asynchronously after certifying
// them. The wait costs each read about one cluster round trip
// (BenchmarkGaleraRead; docs/performance.md); across data centres, the
// network's round trip. Writes need no wait: a conflict with another node's write
// fails certification (1213) and is retried (retrying).
func wsrepOn(ctx context.Context, sqlDB *sql.DB) (bool, error) {
	var on sql.NullString
	err := sqlDB.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errUnknownVariable {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open mysql database: read wsrep_on: %w", err)
	}
	return on.String == "1" || strings.EqualFold(on.String, "ON"), nil
}

// isolationVars name the session's isolation level on the servers payd
// supports: MySQL (5.7.20 on) and MariaDB 11.1 on know
// transaction_isolation; MariaDB before 11.1 knows only tx_isolation.
var isolationVars = []string{"transaction_isolation", "tx_isolation"}

// errUnknownVariable is the server's error for a SET of a variable it does
// not know (ER_UNKNOWN_SYSTEM_VARIABLE).
const errUnknownVariable = 1193

// mysqlPool is what cfg reaches: its database, and its server's host and
// port, or its socket's path.
func mysqlPool(cfg *mysql.Config) Pool {
	p := Pool{System: "mysql", Namespace: cfg.DBName, Address: cfg.Addr}
	if cfg.Net != "unix" {
		if host, port, err := net.SplitHostPort(cfg.Addr); err == nil {
			p.Address = host
			p.Port, _ = strconv.Atoi(port)
		}
	}
	return p
}

// connectMySQL opens a pool whose connections all run at READ COMMITTED,
// set once per connection with the other session settings (the driver's
// one SET at connect) rather than by a SET before every transaction: that
// SET was a round trip per transaction, two per pay. The first name of
// isolationVars the server knows is used.
//
// READ COMMITTED, not InnoDB's REPEATABLE READ: every statement in a
// transaction sees the latest committed rows, so re-reading an order after
// a guarded UPDATE matched nothing shows why (a REPEATABLE READ snapshot
// could still show it pending), and range reads take no gap locks, a
// common source of deadlocks.
//
// Each session also has the server give up a statement when payd does
// (statementLimits): without it, a read payd stopped waiting for at the
// read timeout runs on in the server, holding a thread and its locks,
// until it tries to send its rows.
func connectMySQL(ctx context.Context, cfg *mysql.Config, oc openConfig) (*sql.DB, error) {
	var err error
	for _, name := range isolationVars {
		for _, limit := range statementLimits(cfg) {
			c := cfg.Clone()
			for _, v := range isolationVars {
				delete(c.Params, v) // payd's level, whatever the URL says
			}
			c.Params[name] = "'READ-COMMITTED'"
			maps.Copy(c.Params, limit)
			connector, cerr := mysql.NewConnector(c)
			if cerr != nil {
				return nil, fmt.Errorf("open mysql database: %w", cerr)
			}
			sqlDB := oc.openDB(connector, mysqlPool(cfg))
			if err = sqlDB.PingContext(ctx); err == nil {
				return sqlDB, nil
			}
			sqlDB.Close()
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != errUnknownVariable {
				return nil, connectError(cfg, err)
			}
		}
	}
	return nil, connectError(cfg, err)
}

// statementLimits are the session settings, most wanted first, that stop
// a statement in the server once the driver has stopped waiting for it
// (the URL's readTimeout, 30 s by default): MariaDB's max_statement_time
// (seconds, every statement), MySQL's max_execution_time (milliseconds,
// SELECTs), or none on a server that knows neither. A URL that sets
// either keeps its own.
func statementLimits(cfg *mysql.Config) []map[string]string {
	_, mariadbSet := cfg.Params["max_statement_time"]
	_, mysqlSet := cfg.Params["max_execution_time"]
	if mariadbSet || mysqlSet {
		return []map[string]string{nil}
	}
	return []map[string]string{
		{"max_statement_time": strconv.FormatFloat(cfg.ReadTimeout.Seconds(), 'f', -1, 64)},
		{"max_execution_time": strconv.FormatInt(cfg.ReadTimeout.Milliseconds(), 10)},
		nil,
	}
}

// connectError says why connecting to cfg's database failed.
func connectError(cfg *mysql.Config, err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errUnknownDatabase {
		// payd never creates its database: the user it connects as should
		// not need the right to, and a typo in the URL would make one.
		return fmt.Errorf("open mysql database: database %s does not exist on %s: create it with CREATE DATABASE %s (payd creates the tables, not the database)",
			cfg.DBName, cfg.Addr, cfg.DBName)
	}
	return fmt.Errorf("ping mysql database: %w", err)
}

// errUnknownDatabase is the server's error for a connection to a database
// that does not exist (ER_BAD_DB_ERROR).
const errUnknownDatabase = 1049

// mysqlConfig turns a mysql:// URL into a driver configuration. Query
// parameters are passed to the driver (e.g. tls=true); the settings payd
// relies on are forced:
//   - clientFoundRows: RowsAffected counts matched rows, as SQLite does, so a
//     guarded UPDATE that matches its row reports 1 on both databases;
//   - parseTime and loc=UTC: DATETIME columns scan as UTC time.Time;
//   - interpolateParams: one round trip per statement instead of
//     prepare/execute/close (safe: the connection charset is utf8mb4);
//   - multiStatements: PayBatch sends a transaction, COMMIT included, in
//     one packet (ADR 0034). Every statement payd sends is a constant with
//     placeholders and every value is escaped by interpolateParams, so no
//     input can become a second statement;
//   - STRICT_ALL_TABLES: a too-long value is an error, never silently cut;
//   - READ COMMITTED isolation, added by connectMySQL.
//
// statement is the read and write timeout, unless the URL names its own.
func mysqlConfig(rawURL string, statement time.Duration) (*mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("malformed database URL") // url errors quote the password
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	dsn := "tcp(" + host + ")/" + url.PathEscape(strings.TrimPrefix(u.Path, "/"))
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	q := u.Query()
	if cs := q.Get("charset"); cs != "" && cs != "utf8mb4" {
		return nil, fmt.Errorf("database URL: charset=%s: payd talks utf8mb4 only (its escaping of values relies on it)", cs)
	}
	if co := q.Get("collation"); co != "" && !strings.HasPrefix(co, "utf8mb4_") {
		return nil, fmt.Errorf("database URL: collation=%s: payd talks utf8mb4 only (its escaping of values relies on it)", co)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams, cfg.MultiStatements = true, true, true, true
	cfg.Loc = time.UTC
	setDefault(&cfg.Timeout, 5*time.Second)
	setDefault(&cfg.ReadTimeout, statement)
	setDefault(&cfg.WriteTimeout, statement)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["sql_mode"]; !ok {
		cfg.Params["sql_mode"] = "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')"
	}
	return cfg, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d == 0 {
		*d = v
	}
}

// finishOpen wraps the pool in GORM (d, built on pool) and checks the
// connection. sqlDB is the writers' pool.
func finishOpen(ctx context.Context, sqlDB *sql.DB, pool executor, d gorm.Dialector, dialect migrations.Dialect) (*DB, error) {
	g, err := gorm.Open(d, &gorm.Config{
		// Each store method is one statement or runs in an explicit InTx:
		// no hidden BEGIN/COMMIT around single statements.
		SkipDefaultTransaction: true,
		// Never log SQL: arguments may hold token hashes and stored responses.
		Logger:  logger.Discard,
		NowFunc: func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	if err := classifyCallbacks(g); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	db := &DB{gorm: g, pool: pool, sql: sqlDB, dialect: dialect, retry: defaultRetry}
	if err := db.Ping(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Dialect says which SQL dialect the database speaks.
func (db *DB) Dialect() migrations.Dialect { return db.dialect }

// Galera reports whether the database is a MariaDB Galera cluster node
// with replication on; its sessions then run with wsrep_sync_wait (see
// wsrepOn).
func (db *DB) Galera() bool { return db.galera }

// Gorm returns the underlying GORM handle, for tests and statement counting.
func (db *DB) Gorm() *gorm.DB { return db.gorm }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.sql.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s database: %w", db.dialect, err)
	}
	if db.read != nil {
		if err := db.read.PingContext(ctx); err != nil {
			return fmt.Errorf("ping %s database: %w", db.dialect, err)
		}
	}
	return nil
}

// Pools names payd's connection pools, for their statistics: "payd" on
// MySQL and for an in-memory SQLite database, else "write" and "read".
func (db *DB) Pools() map[string]*sql.DB {
	if db.read == nil {
		return map[string]*sql.DB{"payd": db.sql}
	}
	return map[string]*sql.DB{"write": db.sql, "read": db.read}
}

// Close closes the connection pools.
func (db *DB) Close() error {
	var err error
	if db.read != nil {
		err = db.read.Close()
	}
	return errors.Join(db.sql.Close(), err)
}

// LogDriverTo sends the MySQL driver's own messages (e.g. "closing bad idle
// connection" while the server restarts) to log as structured lines,
// instead of plain text on standard error.
// The driver's logger is one global of the driver's, written without a
// lock: it is set once, to a logger that forwards to the one LogDriverTo
// named last (an atomic pointer), so payds built at once in one process
// (the tests') never write it concurrently.
func LogDriverTo(log *slog.Logger) {
	driverLog.Store(log)
	driverLogOnce.Do(func() { _ = mysql.SetLogger(driverLogger{}) })
}

var (
	driverLog     atomic.Pointer[slog.Logger]
	driverLogOnce sync.Once
)

type driverLogger struct{}

func (driverLogger) Print(v ...any) {
	if log := driverLog.Load(); log != nil {
		log.Warn("mysql driver", "msg", fmt.Sprint(v...))
	}
}
