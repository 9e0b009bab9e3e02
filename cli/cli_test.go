package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/payd/payd/app"
)

// runArgs runs payd's command line with args and no PAYD_* settings,
// returning what it printed and its error.
func runArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Main(context.Background(), args, func(string) string { return "" }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestHelpShowsNoSecret: with every secret setting in the environment,
// the help of serve and sandbox says a secret is set and never shows it.
// payd help COMMAND shows what payd COMMAND -h shows.
func TestHelpShowsNoSecret(t *testing.T) {
	env := map[string]string{}
	for _, name := range app.SecretSettings() {
		env[name] = "s3cr3t-" + strings.ToLower(name)
	}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{{"serve", "-h"}, {"serve", "--help"}, {"help", "serve"}, {"sandbox", "-h"}, {"help", "sandbox"}} {
		var out, errOut bytes.Buffer
		if err := Main(context.Background(), args, getenv, &out, &errOut); err != nil {
			t.Fatalf("payd %s = %v", strings.Join(args, " "), err)
		}
		if strings.Contains(out.String()+errOut.String(), "s3cr3t") {
			t.Errorf("payd %s printed a secret:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "(default set in PAYD_WEBHOOK_SECRET, not shown)") {
			t.Errorf("payd %s does not say a secret is set:\n%s", strings.Join(args, " "), out.String())
		}
	}
}

// TestHelpDescribesEachSubcommand: -h, --help, help and help SUBCOMMAND
// succeed and describe that subcommand with its own flags only; the
// test-only fault switch is in no help of a build without the paydfault tag.
func TestHelpDescribesEachSubcommand(t *testing.T) {
	tests := []struct {
		args          []string
		want, notWant []string
	}{
		{[]string{"-h"}, []string{"serve", "migrate", "sandbox", "demo", "healthcheck", "version", "help"}, nil},
		{[]string{"--help"}, []string{"serve", "migrate", "sandbox", "demo", "version"}, nil},
		{[]string{"help"}, []string{"serve", "migrate", "sandbox", "demo", "version"}, nil},
		{[]string{"help", "serve"}, []string{"payd serve", "-admin-token", "-lease", "PAYD_LEASE", "\n  -pprof string", "PAYD_PPROF_ADDR", "OTEL_* variables alone"}, []string{"\n  -url ", "-otlp-endpoint"}},
		{[]string{"serve", "-h"}, []string{"payd serve", "-admin-token"}, nil},
		{[]string{"serve", "--help"}, []string{"payd serve", "-admin-token"}, nil},
		{[]string{"sandbox", "-h"}, []string{"payd sandbox", "-sandbox-addr", "-webhook-secret"}, []string{"-admin-token", "-secret-key", "-lease", "-provider-url"}},
		{[]string{"help", "sandbox"}, []string{"payd sandbox", "-sandbox-addr"}, []string{"-admin-token"}},
		{[]string{"migrate", "-h"}, []string{"payd migrate up|status", "-database-url"}, []string{"-admin-token", "-sandbox-addr"}},
		{[]string{"migrate", "up", "-h"}, []string{"payd migrate up|status", "-database-url"}, []string{"-admin-token"}},
		{[]string{"help", "migrate"}, []string{"payd migrate", "-database-url"}, []string{"-admin-token"}},
		{[]string{"demo", "-h"}, []string{"payd demo", "-url", "http://127.0.0.1:8080"}, []string{"-admin-token", "-database-url"}},
		{[]string{"help", "demo"}, []string{"payd demo", "-url"}, nil},
		{[]string{"help", "healthcheck"}, []string{"payd healthcheck", "-url", "-timeout", "/healthz", "PAYD_ADDR"}, []string{"-admin-token"}},
		{[]string{"healthcheck", "-h"}, []string{"payd healthcheck", "-url"}, nil},
		{[]string{"help", "version"}, []string{"payd version"}, []string{"-admin-token"}},
		{[]string{"version", "-h"}, []string{"payd version"}, nil},
		{[]string{"help", "help"}, []string{"payd help"}, nil},
	}
	for _, tt := range tests {
		out, errOut, err := runArgs(t, tt.args...)
		if err != nil {
			t.Errorf("payd %s = %v, want success (exit 0)", strings.Join(tt.args, " "), err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("payd %s printed no %q:\n%s%s", strings.Join(tt.args, " "), w, out, errOut)
			}
		}
		notWant := tt.notWant
		if !faultBuild { // a shipped payd has no test flags to show
			notWant = append(notWant, "test-fault", "PAYD_TEST_FAULT")
		}
		for _, w := range notWant {
			if strings.Contains(out+errOut, w) {
				t.Errorf("payd %s printed %q:\n%s", strings.Join(tt.args, " "), w, out)
			}
		}
	}
}

// TestCLIRefusals: an unknown subcommand, an unknown help topic and a flag
// of another subcommand fail, and say where help is.
func TestCLIRefusals(t *testing.T) {
	refused := [][]string{{"bogus"}, {"help", "bogus"}, {"sandbox", "-admin-token", "x"}, {"migrate", "down"}}
	if !faultBuild { // a test build has the flag, and would serve
		refused = append(refused, []string{"serve", "-test-fault", "after_claim"})
	}
	for _, args := range refused {
		_, _, err := runArgs(t, args...)
		if err == nil || !strings.Contains(err.Error(), "payd help") {
			t.Errorf("payd %s = %v, want an error pointing at payd help", strings.Join(args, " "), err)
		}
	}
}

// TestVersionPrintsBuildInfo: payd version names the module and Go.
func TestVersionPrintsBuildInfo(t *testing.T) {
	out, _, err := runArgs(t, "version")
	if err != nil || !strings.Contains(out, "github.com/payd/payd") || !strings.Contains(out, "go1.") {
		t.Errorf("payd version = %v %q, want the module path and the Go version", err, out)
	}
}

// TestSQLiteMissingFolder: a SQLite URL in a folder that does not exist is
// refused with that reason, not the driver's "out of memory (14)".
func TestSQLiteMissingFolder(t *testing.T) {
	for _, args := range [][]string{{"migrate", "up", "-database-url", "sqlite:///no/such/dir/x.db"},
		{"serve", "-addr", "127.0.0.1:0", "-database-url", "sqlite:///no/such/dir/x.db"}} {
		_, _, err := runArgs(t, args...)
		if err == nil || !strings.Contains(err.Error(), "/no/such/dir") || !strings.Contains(err.Error(), "does not exist") ||
			strings.Contains(err.Error(), "out of memory") {
			t.Errorf("payd %s = %v, want: the folder /no/such/dir does not exist", strings.Join(args, " "), err)
		}
	}
}
