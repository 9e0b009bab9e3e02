// Package sandboxtest runs sandbox providers for tests, on real databases:
// a fresh SQLite file always, and a fresh MariaDB/MySQL database when
// PAYD_TEST_MYSQL_DSN (e.g. mysql://root:@127.0.0.1:3306/test) is set.
// Without it MySQL tests are skipped, unless PAYD_TEST_REQUIRE_MYSQL=1
// makes that a failure (as CI does).
package sandboxtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
)

// ForEachDatabase runs fn as the subtests "sqlite" and "mysql", each with
// the URL of a fresh, empty database of its own.
func ForEachDatabase(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLiteURL(t)) })
	t.Run("mysql", func(t *testing.T) { fn(t, MySQLURL(t)) })
}

// SQLiteURL returns sqlite://PATH of a new file in the test's temp dir.
func SQLiteURL(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db")
}

// MySQLURL creates a database sbx_t_<random> on the PAYD_TEST_MYSQL_DSN
// server, drops it when the test ends, and returns its mysql:// URL.
func MySQLURL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("PAYD_TEST_MYSQL_DSN")
	if dsn == "" {
		if os.Getenv("PAYD_TEST_REQUIRE_MYSQL") == "1" {
			t.Fatal("PAYD_TEST_REQUIRE_MYSQL=1 but PAYD_TEST_MYSQL_DSN is not set")
		}
		testdeps.Skip(t, testdeps.MySQL, "PAYD_TEST_MYSQL_DSN not set (e.g. mysql://root:@127.0.0.1:3306/test): skipping MySQL")
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		t.Fatalf("PAYD_TEST_MYSQL_DSN must look like mysql://USER:PASS@HOST:PORT/DB")
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("mysql connector: %v", err)
	}
	admin := sql.OpenDB(conn)
	name := "sbx_t_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		admin.Close()
		t.Fatalf("create test database: %v", err)
	}
	// Registered first, so it runs after the cleanups that close servers.
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// Secret returns a fresh webhook secret.
func Secret(t testing.TB) string {
	t.Helper()
	s, err := sandbox.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Sandbox is a sandbox server answering on a loopback httptest server.
type Sandbox struct {
	*sandbox.Server
	HTTP   *httptest.Server
	URL    string           // base URL of the API
	Client *provider.Client // a client for URL

	once sync.Once
}

// New starts a sandbox's API for cfg without its background workers (call
// Start, or drive ResolvePending/DeliverDue by hand). A nil cfg.Logger
// discards logs. Everything is shut down when the test ends.
func New(t testing.TB, cfg sandbox.Config) *Sandbox {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := sandbox.New(cfg)
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	sb := &Sandbox{Server: srv, HTTP: ts, URL: ts.URL, Client: provider.NewClient(ts.URL, provider.WithTimeout(10*time.Second))}
	t.Cleanup(sb.Shutdown)
	return sb
}

// Start is New with the background workers running.
func Start(t testing.TB, cfg sandbox.Config) *Sandbox {
	t.Helper()
	sb := New(t, cfg)
	if err := sb.Server.Start(context.Background()); err != nil {
		t.Fatalf("sandbox Start: %v", err)
	}
	return sb
}

// Shutdown stops the HTTP server, the workers and the database, as a
// killed process would leave them: whatever was committed stays. It may be
// called more than once.
func (s *Sandbox) Shutdown() {
	s.once.Do(func() {
		s.HTTP.Close()
		_ = s.Server.Close()
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
