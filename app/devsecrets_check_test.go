package app

import (
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
	msg := wrongSecretKey(cfg, "").Error()
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
