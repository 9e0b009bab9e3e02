package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// appliedInLog is the migrations a JSON log says were applied, as
// "VERSION NAME", in the order logged.
func appliedInLog(t *testing.T, log string) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(log, "\n") {
		var m struct {
			Msg     string `json:"msg"`
			Version int64  `json:"version"`
			Name    string `json:"name"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "migration applied" {
			got = append(got, strconv.FormatInt(m.Version, 10)+" "+m.Name)
		}
	}
	return got
}

// everyMigration is every migration file of dialect d, as appliedInLog
// writes them, oldest first.
func everyMigration(t *testing.T, d migrations.Dialect) []string {
	t.Helper()
	fsys, err := migrations.FS(d)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations of %s: %v %v", d, files, err)
	}
	var want []string
	for _, f := range files {
		v := strings.TrimLeft(strings.SplitN(f, "_", 2)[0], "0")
		want = append(want, v+" "+f)
	}
	return want // the names are zero-padded: Glob's order is the versions'
}

// TestServeLogsMigrations: `payd serve` on a new database logs each
// migration it applies, one line per version with its file's name; started
// again on the same database it logs none. `payd migrate up` logs the same
// way, and says when nothing was pending.
func TestServeLogsMigrations(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		dbURL := dbtest.NewURL(t, migrations.Dialect(dialect))
		want := everyMigration(t, migrations.Dialect(dialect))
		e := env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL,
			"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db"),
			"PAYD_ADMIN_TOKEN":          testAdminToken, "PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": testSecretKey}

		first := start(t, asConfigured(e))
		first.stop()
		if got := appliedInLog(t, first.logs.String()); !slices.Equal(got, want) {
			t.Errorf("serve on a new database logged migrations\n%q\nwant\n%q", got, want)
		}
		second := start(t, asConfigured(e))
		second.stop()
		if got := appliedInLog(t, second.logs.String()); len(got) != 0 {
			t.Errorf("serve on a migrated database logged migrations %q, want none", got)
		}

		var out bytes.Buffer
		fresh := dbtest.NewURL(t, migrations.Dialect(dialect))
		if err := run(context.Background(), []string{"migrate", "up", "-database-url", fresh}, env{}.get, &out, &out); err != nil {
			t.Fatalf("migrate up = %v\n%s", err, out.String())
		}
		if got := appliedInLog(t, out.String()); !slices.Equal(got, want) {
			t.Errorf("migrate up on a new database logged\n%q\nwant\n%q", got, want)
		}
		out.Reset()
		if err := run(context.Background(), []string{"migrate", "up", "-database-url", fresh}, env{}.get, &out, &out); err != nil {
			t.Fatalf("migrate up again = %v", err)
		}
		if got := appliedInLog(t, out.String()); len(got) != 0 || !strings.Contains(out.String(), "no migrations pending") {
			t.Errorf("migrate up on a migrated database wrote %q, want no migration logged and \"no migrations pending\"", out.String())
		}
	})
}
