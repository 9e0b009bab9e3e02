package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
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
	}
	return nil
}

// keepDevSecrets replaces the secrets check made up for this run with those
// kept in the development secrets file, and adds to the file those it does
// not hold yet. Secrets given by the environment or a flag were not made
// up: they win, and the file is not touched for them.
func (c *Config) keepDevSecrets() error {
	if c.Env != "development" || len(c.generated) == 0 {
		return nil
	}
	path := secretsFileFor(c.DatabaseURL)
	if path == "" {
		return nil
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	for range 2 { // a second pass when another payd created the file first
		kept, existed, err := readSecretsFile(path)
		if err != nil {
			return err
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
				return err
			}
		}
		c.secretsFile = path
		for _, s := range webhookSecrets(c.WebhookSecret) {
			if !strings.HasPrefix(s, "whsec_") {
				return fmt.Errorf("%s: PAYD_WEBHOOK_SECRET must be one or more whsec_... secrets", path)
			}
		}
		return nil
	}
	return fmt.Errorf("%s: created and changed by another process while payd started; start again", path)
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
			return nil, false, fmt.Errorf("development secrets file %s, line %d: want PAYD_ADMIN_TOKEN, PAYD_WEBHOOK_SECRET or PAYD_SECRET_KEY=value", path, n)
		}
		kept[name] = val
	}
	return kept, true, nil
}

const secretsFileHeader = `# payd development secrets, made up by payd at its first start and reused at
# every start after, so stored answers and customer tokens stay valid. Only
# PAYD_ENV=development reads this file; a variable or flag set wins over it.
# Delete the file to make new secrets (stored registrations then answer 410).
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
