package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/payd/payd/repository"
)

// newMySQLDatabase creates database payd_t_<random> on the server named by
// serverURL and returns the URL of that database; a cleanup drops it.
func newMySQLDatabase(t testing.TB, serverURL string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "mysql" {
		t.Fatalf("dbtest: %s must be a mysql:// URL", EnvMySQL)
	}
	name := "payd_t_" + randomHex(8)
	ctx := context.Background()
	// Connect without a default database: the one in the URL need not exist.
	u.Path = "/"
	server, err := repository.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("dbtest: connect to MySQL server: %v", err)
	}
	defer server.Close()
	create := "CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	if err := server.Gorm().WithContext(ctx).Exec(create).Error; err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { dropMySQLDatabase(t, u.String(), name) })
	u.Path = "/" + name
	return u.String()
}

// dropMySQLDatabase removes a test database. It runs in a cleanup, after
// the test's own connections have closed.
func dropMySQLDatabase(t testing.TB, serverURL, name string) {
	ctx := context.Background()
	server, err := repository.Open(ctx, serverURL)
	if err != nil {
		t.Errorf("dbtest: drop %s: %v", name, err)
		return
	}
	defer server.Close()
	if err := server.Gorm().WithContext(ctx).Exec("DROP DATABASE IF EXISTS " + name).Error; err != nil {
		t.Errorf("dbtest: drop %s: %v", name, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
