package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// readmeRegister is the README's registration, word for word.
var readmeRegister = request{method: "POST", path: "/v1/customers", key: "demo-register-1",
	body: `{"email":"ada@example.com","name":"Ada"}`}

// TestDevSecretsSurviveRestart: payd in development with no secrets set,
// stopped and started again in the same folder, replays the README's
// registration: the same customer and token, because the secrets it made up
// were kept in a file (mode 0600) beside the database and reused. A secret
// key given in the environment wins over the file; the stored reply it
// cannot open answers 410 stored_response_unreadable, not 500.
func TestDevSecretsSurviveRestart(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		_, dbURL, secretsFile, e := devFolder(t, dialect)

		first := start(t, asConfigured(e))
		r1 := first.do(readmeRegister)
		if r1.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", r1.Status, r1.Body)
		}
		first.stop()
		if !strings.Contains(first.stdout.String(), secretsFile) {
			t.Errorf("banner does not name the secrets file %s:\n%s", secretsFile, first.stdout.String())
		}
		fi, err := os.Stat(secretsFile)
		if err != nil {
			t.Fatalf("development secrets file: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", secretsFile, fi.Mode().Perm())
		}
		kept, _ := os.ReadFile(secretsFile)

		second := start(t, asConfigured(e))
		r2 := second.do(readmeRegister)
		if r2.Status != http.StatusCreated || r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay after restart = %d (Idempotent-Replayed %q) %s, want 201 replayed", r2.Status, r2.Header.Get("Idempotent-Replayed"), r2.Body)
		}
		m1, m2 := r1.json(t), r2.json(t)
		if m1["token"] != m2["token"] || m1["customer"].(map[string]any)["id"] != m2["customer"].(map[string]any)["id"] {
			t.Errorf("replay after restart = %s, want the first answer %s", r2.Body, r1.Body)
		}
		if r := second.do(request{method: "GET", path: "/v1/orders", token: m2["token"].(string)}); r.Status != http.StatusOK {
			t.Errorf("the token after restart: GET /v1/orders = %d %s, want 200", r.Status, r.Body)
		}
		second.stop()

		// A key from the environment wins over the file, and the file is
		// left alone: a key that is not the database's is refused at
		// start, naming the variable and the file that holds the right one.
		e["PAYD_SECRET_KEY"] = "another-secret-key-0123456789abcdef"
		err = refusedStart(t, e)
		if !strings.Contains(err.Error(), "PAYD_SECRET_KEY") || !strings.Contains(err.Error(), secretsFile) {
			t.Errorf("start under another secret key = %v, want a refusal naming PAYD_SECRET_KEY and %s", err, secretsFile)
		}
		if now, _ := os.ReadFile(secretsFile); string(now) != string(kept) {
			t.Errorf("the secrets file changed while the environment gave the key:\nbefore %s\nafter %s", kept, now)
		}

		// A database made before payd kept its key's check value records
		// the key of its first start; a reply sealed with another key
		// then answers 410 stored_response_unreadable, not 500.
		if err := openDB(t, dbURL).Gorm().Exec("DELETE FROM secret_key_check").Error; err != nil {
			t.Fatal(err)
		}
		third := start(t, asConfigured(e))
		r3 := third.do(readmeRegister)
		if r3.Status != http.StatusGone || r3.code(t) != "stored_response_unreadable" {
			t.Errorf("replay under another secret key = %d %s, want 410 stored_response_unreadable", r3.Status, r3.Body)
		}
		third.stop()
	})
}

// TestProductionNeverTouchesSecretsFile: production requires its secrets
// from the environment; it neither reads a development secrets file nor
// writes one.
func TestProductionNeverTouchesSecretsFile(t *testing.T) {
	dir := t.TempDir()
	e := env{"PAYD_ENV": "production", "PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": "sqlite://" + filepath.Join(dir, "payd.db")}
	if err := os.WriteFile(filepath.Join(dir, "payd.secrets"), []byte("PAYD_ADMIN_TOKEN=adm_9f8e7d6c5b4a39281716151413121110\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), nil, e.get, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PAYD_ADMIN_TOKEN") {
		t.Errorf("production without secrets = %v, want a refusal naming PAYD_ADMIN_TOKEN (the file is not read)", err)
	}
	os.Remove(filepath.Join(dir, "payd.secrets"))
	_ = run(context.Background(), nil, e.get, io.Discard, io.Discard)
	if _, err := os.Stat(filepath.Join(dir, "payd.secrets")); !os.IsNotExist(err) {
		t.Errorf("production wrote a secrets file (stat: %v)", err)
	}
}

// TestNoSecretsFileWithoutDatabase: a development payd that cannot reach
// its database stops before it makes up secrets, so it leaves no secrets
// file behind (for a MySQL URL the file would land in the working folder).
func TestNoSecretsFileWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	e := env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": "mysql://root:@127.0.0.1:1/nothing_here"}
	if err := run(context.Background(), nil, e.get, io.Discard, io.Discard); err == nil {
		t.Fatal("run with an unreachable database = nil, want an error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left in the working folder: %v, want none", entries)
	}
}

// devFolder is a folder for payd in development with no secrets set: its
// database (SQLite in the folder, or a fresh MySQL database, the secrets
// file then kept in the working directory, which becomes the folder), where
// the made-up secrets are kept, and the environment that starts payd there.
func devFolder(t *testing.T, dialect string) (dir, dbURL, secretsFile string, e env) {
	t.Helper()
	dir = t.TempDir()
	dbURL = "sqlite://" + filepath.Join(dir, "payd.db")
	secretsFile = filepath.Join(dir, "payd.secrets")
	if dialect == "mysql" {
		dbURL = dbtest.NewURL(t, migrations.MySQL)
		t.Chdir(dir) // with MySQL the file is kept in the working directory
	}
	e = env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL,
		"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(dir, "sandbox.db")}
	return dir, dbURL, secretsFile, e
}
