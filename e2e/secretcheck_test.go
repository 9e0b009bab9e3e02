package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// refusedStart runs `payd serve` with e and returns its error. A payd that
// starts listening instead fails the test: it would serve answers it
// cannot give.
func refusedStart(t *testing.T, e env) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, logs := newListenWatch(), &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, undelayed(e).get, stdout, logs) }()
	select {
	case addr := <-stdout.found:
		cancel()
		<-done
		t.Fatalf("payd started on %s, want it refused; logs:\n%s", addr, logs.String())
	case err := <-done:
		if err == nil {
			t.Fatalf("payd ended without an error, want a refusal; logs:\n%s", logs.String())
		}
		return err
	}
	return nil
}

// mysqlName is the database a mysql:// URL names.
func mysqlName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestDeletedSecretsRefuseToStart: the README's first steps (register,
// order, pay) in development with the secrets payd made up, then
// payd.secrets deleted and payd started again. payd refuses to start with
// one message naming both files and how to go on; it never listens, so it
// never answers 410 to the replay nor 401 to the token it could not hand
// back. The refusal leaves no new secrets file behind, so the next start
// says the same; restoring the file brings everything back, and (SQLite)
// deleting both starts over cleanly, as the message says.
func TestDeletedSecretsRefuseToStart(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		dir, dbURL, secretsFile, e := devFolder(t, dialect)

		first := start(t, asConfigured(e))
		first.merchantKey = madeUpSecret(t, secretsFile, "PAYD_MERCHANT_KEY")
		r1 := first.do(readmeRegister)
		if r1.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", r1.Status, r1.Body)
		}
		token := r1.json(t)["token"].(string)
		order := first.order(token, "9.90")
		if r := first.pay(token, order, "pay-"+order, "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
		}
		first.stop()
		kept, err := os.ReadFile(secretsFile)
		if err != nil {
			t.Fatal(err)
		}

		if err := os.Remove(secretsFile); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the refusal changes nothing: the second start says the same
			err := refusedStart(t, e)
			msg := err.Error()
			want := []string{"payd.secrets", "PAYD_SECRET_KEY"}
			if dialect == "sqlite" {
				want = []string{secretsFile, filepath.Join(dir, "payd.db"), "restore", "delete both", filepath.Join(dir, "sandbox.db")}
			} else {
				want = append(want, "database "+mysqlName(t, dbURL)+" on 127.0.0.1:", filepath.Join(dir, "payd.secrets"))
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("start without payd.secrets = %q, want it to name %q", msg, w)
				}
			}
			if _, err := os.Stat(secretsFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused start left a secrets file (stat: %v), want none", err)
			}
		}

		// Restored, the file brings the answers and the token back.
		if err := os.WriteFile(secretsFile, kept, 0o600); err != nil {
			t.Fatal(err)
		}
		second := start(t, asConfigured(e))
		if r := second.do(readmeRegister); r.Status != http.StatusCreated || r.json(t)["token"] != token {
			t.Errorf("replay with payd.secrets restored = %d %s, want 201 with the first token", r.Status, r.Body)
		}
		if r := second.do(request{method: "GET", path: "/v1/orders/" + order, token: token}); r.Status != http.StatusOK {
			t.Errorf("GET the paid order with payd.secrets restored = %d %s, want 200", r.Status, r.Body)
		}
		second.stop()
		if dialect != "sqlite" {
			return
		}

		// Both files (and the sandbox's) deleted: a clean start over.
		for _, f := range []string{"payd.db", "payd.db-wal", "payd.db-shm", "payd.secrets", "sandbox.db", "sandbox.db-wal", "sandbox.db-shm"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		third := start(t, asConfigured(e))
		r3 := third.do(readmeRegister)
		if r3.Status != http.StatusCreated || r3.Header.Get("Idempotent-Replayed") == "true" {
			t.Fatalf("register after starting over = %d (replayed %q) %s, want a new 201", r3.Status, r3.Header.Get("Idempotent-Replayed"), r3.Body)
		}
		if r := third.do(request{method: "GET", path: "/v1/orders", token: r3.json(t)["token"].(string)}); r.Status != http.StatusOK {
			t.Errorf("the new token: GET /v1/orders = %d %s, want 200", r.Status, r.Body)
		}
	})
}

// TestDeletedSecretsOfAnOlderDatabaseRefuseToStart: a database made
// before payd kept its secret key's check value (migration 00017) holds
// no check value, only answers sealed with the key. With payd.secrets
// deleted, payd tries its new key on a sealed answer and refuses, rather
// than recording the new key and answering 410 to every replay.
func TestDeletedSecretsOfAnOlderDatabaseRefuseToStart(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		dir, dbURL, secretsFile, e := devFolder(t, dialect)
		first := start(t, asConfigured(e))
		if r := first.do(readmeRegister); r.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", r.Status, r.Body)
		}
		first.stop()
		if err := openDB(t, dbURL).Gorm().Exec("DELETE FROM secret_key_check").Error; err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(secretsFile); err != nil {
			t.Fatal(err)
		}
		err := refusedStart(t, e)
		want := []string{"database " + mysqlName(t, dbURL) + " on 127.0.0.1:", secretsFile, "PAYD_SECRET_KEY"}
		if dialect == "sqlite" {
			want = []string{secretsFile, filepath.Join(dir, "payd.db"), "restore", "delete both"}
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("start of an older database without payd.secrets = %q, want it to name %q", err, w)
			}
		}
		if n := countRows(t, openDB(t, dbURL), "secret_key_check"); n != 0 {
			t.Errorf("the refused start recorded %d check values, want none", n)
		}
	})
}

// TestMySQLSecretsOfAnotherFolder: with a MySQL URL the development
// secrets file is the working folder's. Another folder against the same
// database would make up new secrets; payd refuses instead, naming the
// database, the folder's file and the variables, and leaves no file in
// that folder. With the first folder's secrets in the environment it
// starts there and replays the first answer.
func TestMySQLSecretsOfAnotherFolder(t *testing.T) {
	dbURL := dbtest.NewURL(t, migrations.MySQL)
	name := mysqlName(t, dbURL)
	one, two := t.TempDir(), t.TempDir()
	e := env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL,
		"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(one, "sandbox.db")}

	t.Chdir(one)
	first := start(t, asConfigured(e))
	r1 := first.do(readmeRegister)
	if r1.Status != http.StatusCreated {
		t.Fatalf("register = %d %s, want 201", r1.Status, r1.Body)
	}
	first.stop()
	kept, err := os.ReadFile(filepath.Join(one, "payd.secrets"))
	if err != nil {
		t.Fatal(err)
	}

	t.Chdir(two)
	err = refusedStart(t, e)
	for _, w := range []string{"database " + name + " on 127.0.0.1:", "PAYD_SECRET_KEY", "there was no " + filepath.Join(two, "payd.secrets"),
		"run payd from the folder whose payd.secrets", "not from " + two} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("start from another folder = %q, want it to name %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "holds that database's "+filepath.Join(two, "payd.secrets")) {
		t.Errorf("start from another folder = %q, which says this folder holds the database's secrets", err)
	}
	if entries, _ := os.ReadDir(two); len(entries) != 0 {
		t.Errorf("the refused start left %v in the other folder, want nothing", entries)
	}

	for _, line := range strings.Split(string(kept), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			e[k] = v
		}
	}
	second := start(t, asConfigured(e))
	if r := second.do(readmeRegister); r.Status != http.StatusCreated || r.json(t)["token"] != r1.json(t)["token"] {
		t.Errorf("replay from another folder with the secrets set = %d %s, want 201 with the first token", r.Status, r.Body)
	}
	second.stop()
	if entries, _ := os.ReadDir(two); len(entries) != 0 {
		t.Errorf("with every secret set payd wrote %v in the folder, want nothing", entries)
	}
}

// TestProductionRefusesAnotherSecretKey: in production a PAYD_SECRET_KEY
// that is not the database's is refused, naming the variable and how to
// change the key on purpose; after that deliberate step the new key starts.
func TestProductionRefusesAnotherSecretKey(t *testing.T) {
	dir := t.TempDir()
	dbURL := "sqlite://" + filepath.Join(dir, "payd.db")
	e := env{"PAYD_ENV": "production", "PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL,
		"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(dir, "sandbox.db"),
		"PAYD_ADMIN_TOKEN":          "adm_7f3a91c04e6b2d58a3f0c7e19b4d62a8", "PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c"}
	start(t, asConfigured(e)).stop()

	e["PAYD_SECRET_KEY"] = "k-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	err := refusedStart(t, e)
	for _, w := range []string{"PAYD_SECRET_KEY", filepath.Join(dir, "payd.db"), "DELETE FROM secret_key_check"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("production start under another key = %q, want it to name %q", err, w)
		}
	}
	if err := openDB(t, dbURL).Gorm().Exec("DELETE FROM secret_key_check").Error; err != nil {
		t.Fatal(err)
	}
	start(t, asConfigured(e)).stop()
}

// TestFailedStartLeavesNoFiles: a start that fails (a bad address, a port
// in use, for payd, its sandbox or its metrics) leaves the folder as it
// found it: no payd.db, payd.secrets or sandbox.db. A failed start in a
// folder that already holds them leaves them as they were.
func TestFailedStartLeavesNoFiles(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	cases := []struct {
		name string
		args []string // the command line after "payd"; nil: serve
		e    env
	}{
		{"bad address", nil, env{"PAYD_ADDR": "not an address"}},
		{"port in use", nil, env{"PAYD_ADDR": inUse}},
		{"sandbox port in use", nil, env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_SANDBOX_ADDR": inUse}},
		// Once the databases and the secrets file were made:
		{"metrics port in use", nil, env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_METRICS_ADDR": inUse}},
		{"payd sandbox, port in use", []string{"sandbox"}, env{"PAYD_SANDBOX_ADDR": inUse}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir) // the defaults: sqlite://payd.db, sqlite://sandbox.db, payd.secrets
			if err := run(context.Background(), tc.args, undelayed(tc.e).get, io.Discard, io.Discard); err == nil {
				t.Fatal("run = nil, want an error")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				names := []string{}
				for _, f := range entries {
					names = append(names, f.Name())
				}
				t.Errorf("the failed start left %v, want nothing", names)
			}
		})
	}

	t.Run("files already there", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		s := start(t, asConfigured(env{"PAYD_ADDR": "127.0.0.1:0"}))
		s.do(readmeRegister)
		s.stop()
		before := map[string][]byte{}
		for _, f := range []string{"payd.db", "payd.secrets", "sandbox.db"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatalf("after a start: %v", err)
			}
			before[f] = b
		}
		for _, tc := range cases {
			if err := run(context.Background(), tc.args, undelayed(tc.e).get, io.Discard, io.Discard); err == nil {
				t.Fatalf("%s: run = nil, want an error", tc.name)
			}
		}
		for f, b := range before {
			now, err := os.ReadFile(f)
			if err != nil {
				t.Errorf("%s after failed starts: %v, want it kept", f, err)
			} else if f == "payd.secrets" && !slices.Equal(now, b) {
				t.Errorf("payd.secrets changed by failed starts")
			}
		}
		start(t, asConfigured(env{"PAYD_ADDR": "127.0.0.1:0"})).stop() // and the folder still starts
	})
}

// madeUpSecret is the value of name in a development secrets file.
func madeUpSecret(t *testing.T, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	t.Fatalf("%s holds no %s", file, name)
	return ""
}
