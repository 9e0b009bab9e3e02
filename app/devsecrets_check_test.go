package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDescribeDatabase: a refusal names the database as a person finds it
// (the SQLite file; the MySQL database and server), never its password.
func TestDescribeDatabase(t *testing.T) {
	for url, want := range map[string]string{
		"sqlite://payd.db":                         "payd.db",
		"sqlite:///var/lib/payd/payd.db":           "/var/lib/payd/payd.db",
		"mysql://payd:hunter2@db.internal/payd":    "database payd on db.internal:3306",
		"mysql://root:@127.0.0.1:3307/shop?tls=on": "database shop on 127.0.0.1:3307",
	} {
		if got := describeDatabase(url); got != want {
			t.Errorf("describeDatabase(%q) = %q, want %q", url, got, want)
		}
	}
}

// TestWrongSecretKeyProduction: in production the refusal names the
// database and PAYD_SECRET_KEY, says how to change the key on purpose, and
// never shows the URL's password.
func TestWrongSecretKeyProduction(t *testing.T) {
	cfg := Config{Env: "production", DatabaseURL: "mysql://payd:hunter2@db.internal:3306/payd"}
	msg := wrongSecretKey(cfg, "", nil).Error()
	for _, w := range []string{"PAYD_SECRET_KEY", "database payd on db.internal:3306", "DELETE FROM secret_key_check"} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal %q does not name %q", msg, w)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("refusal %q shows the database password", msg)
	}
}

// TestSecretCheckIsNotTheKey: the value kept in the database is neither
// the key nor a value that stays the same for another key.
func TestSecretCheckIsNotTheKey(t *testing.T) {
	key := "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a"
	v := secretCheck(key)
	if len(v) != 64 || strings.Contains(v, key) || v == secretCheck(key+"x") || v != secretCheck(key) {
		t.Errorf("secretCheck(%q) = %q, want a stable 64-hex HMAC unlike another key's", key, v)
	}
}

// TestWrongSecretKeyFromTheEnvironment: a PAYD_SECRET_KEY set wrong in
// development is told to unset it only when the secrets file is there
// and holds the database's key; otherwise unsetting would not help.
func TestWrongSecretKeyFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Env: "development", DatabaseURL: "sqlite://" + filepath.Join(dir, "payd.db"), SecretKey: strings.Repeat("a", 64)}
	secrets := filepath.Join(dir, "payd.secrets")
	dbKey := "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a"
	fits := func(k string) bool { return k == dbKey }

	msg := wrongSecretKey(cfg, "", fits).Error()
	if strings.Contains(msg, "unset it") || !strings.Contains(msg, "there is no "+secrets) {
		t.Errorf("wrong key, no secrets file: %q, want it to say %s is missing and not to unset the variable", msg, secrets)
	}
	if err := os.WriteFile(secrets, []byte("PAYD_SECRET_KEY=k-0a1b2c3d4e5f60718293a4b5c6d7e8f9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := wrongSecretKey(cfg, "", fits).Error(); strings.Contains(msg, "unset it") || !strings.Contains(msg, "does not hold") {
		t.Errorf("wrong key, secrets file with another key: %q, want it to say the file does not hold the key", msg)
	}
	if err := os.WriteFile(secrets, []byte("PAYD_SECRET_KEY="+dbKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := wrongSecretKey(cfg, "", fits).Error(); !strings.Contains(msg, "unset it to use the development secrets kept in "+secrets) {
		t.Errorf("wrong key, secrets file with the database's key: %q, want it to say to unset the variable", msg)
	}
}

// TestWrongSecretKeyOfAnotherFolder: with a MySQL database the refusal
// names this folder's payd.secrets as the one that is missing or does not
// fit, never as the one that holds the database's secrets.
func TestWrongSecretKeyOfAnotherFolder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := Config{Env: "development", DatabaseURL: "mysql://root:@127.0.0.1:3306/shop", SecretKey: strings.Repeat("a", 64),
		generated: []string{"PAYD_SECRET_KEY"}}
	here := filepath.Join(dir, "payd.secrets")
	for made, want := range map[string]string{here: "there was no " + here, "": here + " holds other secrets"} {
		msg := wrongSecretKey(cfg, made, nil).Error()
		for _, w := range []string{want, "run payd from the folder whose payd.secrets", "not from " + dir} {
			if !strings.Contains(msg, w) {
				t.Errorf("wrongSecretKey(made %q) = %q, want it to say %q", made, msg, w)
			}
		}
		if strings.Contains(msg, "holds that database's "+here) {
			t.Errorf("wrongSecretKey(made %q) = %q, which says this folder holds the database's secrets", made, msg)
		}
	}
}
