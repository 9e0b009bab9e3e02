package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/repository"
)

// Development secrets are made up once and kept in a file (ADR 12): the
// secret key seals stored registrations and derives customer tokens, so a
// key made up again at each start would turn every replay of a stored
// registration into an error after a restart. Production never reads or
// writes the file: its secrets come from the environment only.

// secretsFileFor names the file that keeps the development secrets of the
// database at databaseURL: beside a SQLite file (payd.db → payd.secrets),
// else payd.secrets in the working directory. An in-memory database lives
// one run, and so do its secrets: "".
func secretsFileFor(databaseURL string) string {
	scheme, path, _ := strings.Cut(databaseURL, "://")
	if scheme != "sqlite" {
		return "payd.secrets"
	}
	if path == "" || strings.Contains(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return ""
	}
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".secrets"
}

// secretField is where config holds the secret called name.
func (c *Config) secretField(name string) *string {
	switch name {
	case "PAYD_ADMIN_TOKEN":
		return &c.AdminToken
	case "PAYD_WEBHOOK_SECRET":
		return &c.WebhookSecret
	case "PAYD_SECRET_KEY":
		return &c.SecretKey
	case "PAYD_MERCHANT_KEY":
		return &c.MerchantKey
	}
	return nil
}

// keepDevSecrets replaces the secrets made up for this run with those
// kept in the development secrets file, and adds to the file those it does
// not hold yet. Secrets given by the environment or a flag were not made
// up: they win, and the file is not touched for them. made is the file's
// path when this call created it (there was none), else "".
func (c *Config) keepDevSecrets() (made string, err error) {
	if c.Env != "development" || len(c.generated) == 0 {
		return "", nil
	}
	path := secretsFileFor(c.DatabaseURL)
	if path == "" {
		return "", nil
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	for range 2 { // a second pass when another payd created the file first
		kept, existed, err := readSecretsFile(path)
		if err != nil {
			return "", err
		}
		added := false
		for _, name := range c.generated {
			if v, ok := kept[name]; ok {
				*c.secretField(name) = v
			} else {
				kept[name], added = *c.secretField(name), true
			}
		}
		if added {
			if err := writeSecretsFile(path, kept, existed); errors.Is(err, fs.ErrExist) {
				continue
			} else if err != nil {
				return "", err
			}
			if !existed {
				made = path
			}
		}
		c.secretsFile = path
		for _, s := range webhookSecrets(c.WebhookSecret) {
			if !strings.HasPrefix(s, "whsec_") {
				return made, fmt.Errorf("%s: PAYD_WEBHOOK_SECRET must be one or more whsec_... secrets", path)
			}
		}
		return made, nil
	}
	return "", fmt.Errorf("%s: created and changed by another process while payd started; start again", path)
}

// readSecretsFile reads NAME=value lines; a missing file holds nothing.
func readSecretsFile(path string) (map[string]string, bool, error) {
	kept := map[string]string{}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return kept, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("development secrets: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("development secrets file %s may be read by other users (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok || (&Config{}).secretField(name) == nil || val == "" {
			return nil, false, fmt.Errorf("development secrets file %s, line %d: want PAYD_ADMIN_TOKEN, PAYD_WEBHOOK_SECRET, PAYD_SECRET_KEY or PAYD_MERCHANT_KEY=value", path, n)
		}
		kept[name] = val
	}
	return kept, true, nil
}

const secretsFileHeader = `# payd development secrets, made up by payd at its first start and reused at
# every start after, so stored answers and customer tokens stay valid. Only
# PAYD_ENV=development reads this file; a variable or flag set wins over it.
# It belongs to its database: payd refuses to start on that database with
# other secrets. To start over, delete both (and sandbox.db).
`

// writeSecretsFile writes kept to path with mode 0600. A new file is linked
// into place only if none exists yet (fs.ErrExist: another payd was first),
// so two payds starting together agree on one set of secrets.
func writeSecretsFile(path string, kept map[string]string, replace bool) error {
	names := make([]string, 0, len(kept))
	for name := range kept {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(secretsFileHeader)
	for _, name := range names {
		fmt.Fprintf(&b, "%s=%s\n", name, kept[name])
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("development secrets: folder %s does not exist", dir)
	}
	tmp, err := os.CreateTemp(dir, ".payd-secrets-*")
	if err != nil {
		return fmt.Errorf("development secrets: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("development secrets: %w", err)
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("development secrets: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("development secrets: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("development secrets: %w", err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("development secrets: %w", err)
	}
	return err
}

// secretCheckLabel is what the secret key's check value is made over.
const secretCheckLabel = "payd secrets check v1"

// secretCheck is the value the database keeps to recognise its secret key:
// an HMAC over a label of its own, from which the key cannot be recovered,
// and unlike the keys derived for sealing and tokens (other labels).
func secretCheck(key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(secretCheckLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// checkSecretKey holds the configured PAYD_SECRET_KEY to the one db was
// made with (ADR 0042): the first start on a database records its key's
// check value, every later start compares, and a start with another key
// is refused, not left to answer 410 to every replay of a stored answer.
// A database made before the check value existed (migration 00017) has
// none; if payd made its key up (development, no PAYD_SECRET_KEY set:
// the secrets file was deleted, or is another folder's) and the database
// holds a sealed answer, the key must open it before it is recorded. A
// key that was given (the environment, a flag, production) is recorded
// as given: deleting the check value and starting with a new key is how
// an operator changes the key on purpose. madeSecrets is the secrets
// file this start created ("": none).
func checkSecretKey(ctx context.Context, cfg Config, db *repository.DB, madeSecrets string) error {
	fits, err := databaseKey(ctx, db, slices.Contains(cfg.generated, "PAYD_SECRET_KEY"))
	if err != nil {
		return err
	}
	if fits != nil && !fits(cfg.SecretKey) {
		return wrongSecretKey(cfg, madeSecrets, fits)
	}
	want := secretCheck(cfg.SecretKey)
	got, err := repository.RecordSecretCheck(ctx, db, want)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
		return nil
	}
	return wrongSecretKey(cfg, madeSecrets, checkFits(got))
}

// databaseKey tells whether a key is the one db was made with: by its
// recorded check value, else (tryAnswers) by opening a sealed stored
// answer; nil when it cannot tell (a new database: any key is its own).
func databaseKey(ctx context.Context, db *repository.DB, tryAnswers bool) (func(key string) bool, error) {
	stored, err := repository.SecretCheck(ctx, db)
	if err != nil || stored != "" || !tryAnswers {
		if stored == "" {
			return nil, err
		}
		return checkFits(stored), err
	}
	sealed, found, err := repository.SealedResponse(ctx, db)
	if err != nil || !found {
		return nil, err
	}
	return func(key string) bool {
		s, err := idempotency.NewSealer(key)
		if err != nil {
			return false
		}
		_, err = s.Open(sealed)
		return err == nil
	}, nil
}

// checkFits tells whether a key has the check value stored.
func checkFits(stored string) func(key string) bool {
	return func(key string) bool {
		return subtle.ConstantTimeCompare([]byte(secretCheck(key)), []byte(stored)) == 1
	}
}

// wrongSecretKey says why a start was refused and what to do, naming the
// files in development and the database and the variable otherwise. fits
// tells the database's key (nil: unknown), to say whether the secrets file
// holds it.
func wrongSecretKey(cfg Config, madeSecrets string, fits func(key string) bool) error {
	where := describeDatabase(cfg.DatabaseURL)
	generated := slices.Contains(cfg.generated, "PAYD_SECRET_KEY")
	secrets := secretsFileFor(cfg.DatabaseURL) // beside a SQLite file, as its path was given
	if sqliteFile(cfg.DatabaseURL) == "" && secrets != "" {
		// The working folder's: which folder is what matters.
		if abs, err := filepath.Abs(secrets); err == nil {
			secrets = abs
		}
	}
	switch {
	case cfg.Env == "production":
		return fmt.Errorf("PAYD_SECRET_KEY is not the key %s was made with: set PAYD_SECRET_KEY to that key "+
			"(the answers stored under idempotency keys are sealed with it). To change the key on purpose "+
			"(answers stored with the old one then answer 410 stored_response_unreadable until PAYD_IDEMPOTENCY_TTL has passed; "+
			"customer tokens already issued keep working), run DELETE FROM secret_key_check on that database "+
			"and start payd with the new key (docs/adr/0042-secrets-bound-to-the-database.md)", where)
	case !generated && secrets != "":
		return fmt.Errorf("PAYD_SECRET_KEY (set by the environment or -secret-key) is not the key %s was made with: %s",
			where, keptKeyAdvice(secrets, madeSecrets, fits))
	case !generated:
		return fmt.Errorf("PAYD_SECRET_KEY (set by the environment or -secret-key) is not the key %s was made with: "+
			"set it to the key the database was made with", where)
	case sqliteFile(cfg.DatabaseURL) != "":
		db := sqliteFile(cfg.DatabaseURL)
		over := "delete both " + db + " and " + secrets
		if sb := sandboxFile(cfg); sb != "" {
			over += " (and " + sb + ")"
		}
		if madeSecrets != "" {
			return fmt.Errorf("%s is missing, and %s was made with the secrets it held: restore %s, or %s to start over",
				secrets, db, secrets, over)
		}
		return fmt.Errorf("%s does not hold the secrets %s was made with: restore %s, or %s to start over",
			secrets, db, secrets, over)
	default: // a MySQL database: the file is the working folder's, and this folder's is not the database's
		held := secrets + " holds other secrets"
		if madeSecrets != "" {
			held = "there was no " + secrets + " (payd made up new secrets, and kept none)"
		}
		return fmt.Errorf("%s was made with another PAYD_SECRET_KEY, and %s: run payd from the folder whose payd.secrets "+
			"that database was made with, not from %s, or set PAYD_SECRET_KEY (and PAYD_ADMIN_TOKEN, PAYD_WEBHOOK_SECRET) to the secrets it was made with",
			where, held, filepath.Dir(secrets))
	}
}

// keptKeyAdvice is what to do about a PAYD_SECRET_KEY set wrong in
// development: unset it only if the secrets file holds the database's
// key (or, the key being unknown, holds one at all); else set it right.
func keptKeyAdvice(secrets, madeSecrets string, fits func(key string) bool) string {
	kept, existed, err := readSecretsFile(secrets)
	key := kept["PAYD_SECRET_KEY"]
	switch {
	case err != nil || !existed || madeSecrets != "":
		return "set it to the key the database was made with (there is no " + secrets + " holding it to fall back on)"
	case key == "" || (fits != nil && !fits(key)):
		return "set it to the key the database was made with (" + secrets + " does not hold it either)"
	}
	return "unset it to use the development secrets kept in " + secrets + ", or set it to the key the database was made with"
}

// describeDatabase names a database in a message, never with its password:
// the SQLite file, or "database NAME on HOST:PORT".
func describeDatabase(databaseURL string) string {
	if path := sqliteFile(databaseURL); path != "" {
		return path
	}
	u, err := url.Parse(databaseURL)
	if err != nil || u.Scheme != "mysql" {
		return "the database"
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	return fmt.Sprintf("database %s on %s", strings.TrimPrefix(u.Path, "/"), host)
}

// sandboxFile is the in-process sandbox's SQLite file, "" when payd starts
// no sandbox or the sandbox's database is not a file.
func sandboxFile(cfg Config) string {
	if cfg.Stripe.Provider == "stripe" || cfg.ProviderURL != "" {
		return ""
	}
	return sqliteFile(cfg.SandboxDatabaseURL)
}
