package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// runEnv runs payd's command line as main does, with the environment env:
// what it wrote on stdout and stderr, its error and the exit status main
// gives that error.
func runEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error, exit int) { //nolint:staticcheck // ST1008: the exit status follows the error it is derived from
	t.Helper()
	var out, errOut bytes.Buffer
	err = Main(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err, ExitStatus(err)
}

// flagHelp is the entry of flag name in help text: from "  -name " to the
// next flag.
func flagHelp(help, name string) string {
	i := strings.Index(help, "\n  -"+name+" ")
	if i < 0 {
		return ""
	}
	entry := help[i+1:]
	if j := strings.Index(entry, "\n  -"); j >= 0 {
		entry = entry[:j]
	}
	return strings.TrimSpace(entry)
}

// TestHelpShowsRealDefaults: the URL settings show their default, or the
// environment's value with its password masked; a secret shows how it is
// made, or that it is set, never its value; Redis unset shows none. The
// same in payd help COMMAND and payd COMMAND -h.
func TestHelpShowsRealDefaults(t *testing.T) {
	const made = "(default made up at start in development, required in production)"
	none := "" // no "(default" at all
	configured := map[string]string{
		"PAYD_DATABASE_URL":         "mysql://payd:hunter2@db:3306/payd",
		"PAYD_SANDBOX_DATABASE_URL": "mysql://sb:hunter3@db:3306/sandbox?tls=true&password=hunter4",
		"PAYD_REDIS_URL":            "redis://:hunter5@cache:6379/0",
		"PAYD_ADMIN_TOKEN":          "adm_hunter6",
		"STRIPE_SECRET_KEY":         "sk_test_hunter7",
	}
	dsn := map[string]string{"PAYD_DATABASE_URL": "payd:hunter8@tcp(db:3306)/payd"} // a driver DSN, not a URL
	// URLs that are no secret settings may still carry a password.
	otherURLs := map[string]string{
		"PAYD_PROVIDER_URL":        "https://u:hunter2@prov.example/",
		"PAYD_SANDBOX_WEBHOOK_URL": "http://u:hunter3@h/x?token=hunter10",
		"STRIPE_API_BASE":          "http://u:hunter4@h",
		"PAYD_URL":                 "http://u:hunter9@h:1",
	}
	tests := []struct {
		name string
		env  map[string]string
		args [][]string
		want map[string]string // flag → its default as help shows it ("" for none)
	}{
		{"nothing set", nil, [][]string{{"help", "serve"}, {"serve", "-h"}}, map[string]string{
			"database-url":         `(default "sqlite://payd.db")`,
			"sandbox-database-url": `(default "sqlite://sandbox.db")`,
			"redis-url":            none,
			"admin-token":          made,
			"webhook-secret":       made,
			"secret-key":           made,
			"admin-tokens":         none,
			"stripe-secret-key":    none,
			"addr":                 `(default "127.0.0.1:8080")`,
			"provider-url":         none,
			"sandbox-webhook-url":  none,
			"stripe-api-base":      none,
		}},
		{"nothing set, demo and admin", nil, [][]string{{"help", "demo"}, {"demo", "-h"}, {"admin", "orders", "search", "-h"}, {"admin", "stats", "-h"}}, map[string]string{
			"url": `(default "http://127.0.0.1:8080")`,
		}},
		{"URLs with passwords", otherURLs, [][]string{{"help", "serve"}, {"serve", "-h"}}, map[string]string{
			"provider-url":        `(default "https://u:xxxxx@prov.example/")`,
			"sandbox-webhook-url": `(default "http://u:xxxxx@h/x?token=xxxxx")`,
			"stripe-api-base":     `(default "http://u:xxxxx@h")`,
		}},
		{"URLs with passwords, sandbox", otherURLs, [][]string{{"help", "sandbox"}, {"sandbox", "-h"}}, map[string]string{
			"sandbox-webhook-url": `(default "http://u:xxxxx@h/x?token=xxxxx")`,
		}},
		{"PAYD_URL with a password", otherURLs, [][]string{{"help", "demo"}, {"demo", "-h"}, {"admin", "orders", "search", "-h"},
			{"admin", "discrepancies", "resolve", "-h"}, {"admin", "stats", "-h"}}, map[string]string{
			"url": `(default "http://u:xxxxx@h:1")`,
		}},
		{"nothing set, migrate", nil, [][]string{{"help", "migrate"}, {"migrate", "-h"}, {"migrate", "up", "-h"}}, map[string]string{
			"database-url": `(default "sqlite://payd.db")`,
		}},
		{"nothing set, sandbox", nil, [][]string{{"help", "sandbox"}, {"sandbox", "-h"}}, map[string]string{
			"sandbox-database-url": `(default "sqlite://sandbox.db")`,
			"webhook-secret":       made,
		}},
		{"configured", configured, [][]string{{"help", "serve"}, {"serve", "-h"}}, map[string]string{
			"database-url":         `(default "mysql://payd:xxxxx@db:3306/payd")`,
			"sandbox-database-url": `(default "mysql://sb:xxxxx@db:3306/sandbox?password=xxxxx&tls=true")`,
			"redis-url":            `(default "redis://:xxxxx@cache:6379/0")`,
			"admin-token":          "(default set in PAYD_ADMIN_TOKEN, not shown)",
			"stripe-secret-key":    "(default set in STRIPE_SECRET_KEY, not shown)",
			"webhook-secret":       made,
		}},
		{"a DSN", dsn, [][]string{{"help", "serve"}, {"migrate", "-h"}}, map[string]string{
			"database-url": "(default set in PAYD_DATABASE_URL, not shown: not a URL)",
		}},
	}
	for _, tt := range tests {
		for _, args := range tt.args {
			out, errOut, err, exit := runEnv(t, tt.env, args...)
			name := tt.name + ": payd " + strings.Join(args, " ")
			if exit != 0 || errOut != "" {
				t.Errorf("%s exit %d (%v), stderr %q; want 0 and help on stdout only", name, exit, err, errOut)
				continue
			}
			for flag, want := range tt.want {
				entry := flagHelp(out, flag)
				switch {
				case entry == "":
					t.Errorf("%s lists no -%s:\n%s", name, flag, out)
				case want == "" && strings.Contains(entry, "(default"):
					t.Errorf("%s: -%s shows a default, want none:\n%s", name, flag, entry)
				case want != "" && !strings.HasSuffix(entry, " "+want):
					t.Errorf("%s: -%s is\n%s\nwant it to end %s", name, flag, entry, want)
				}
			}
			if strings.Contains(out, "hunter") || strings.Contains(out, "(set)") {
				t.Errorf("%s printed a secret or (set):\n%s", name, out)
			}
		}
	}
}

// TestVersionFlags: payd --version and payd -version print what payd
// version prints, on stdout, and exit 0; an argument after them is a
// usage error.
func TestVersionFlags(t *testing.T) {
	want, _, err, _ := runEnv(t, nil, "version")
	if err != nil || !strings.HasPrefix(want, "payd ") {
		t.Fatalf("payd version = %v %q", err, want)
	}
	for _, flag := range []string{"--version", "-version"} {
		out, errOut, err, exit := runEnv(t, nil, flag)
		if exit != 0 || out != want || errOut != "" {
			t.Errorf("payd %s exit %d (%v), stdout %q, stderr %q; want 0 and stdout %q", flag, exit, err, out, errOut, want)
		}
		if _, _, err, exit := runEnv(t, nil, flag, "extra"); exit != 2 {
			t.Errorf("payd %s extra exit %d (%v), want 2", flag, exit, err)
		}
	}
}

// TestExitStatuses: a command line payd cannot take exits 2, a failure
// while running or a wrong setting in the environment 1, success and help
// 0; payd healthcheck exits 0 or 1 only.
func TestExitStatuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	token := map[string]string{"PAYD_ADMIN_TOKEN": "adm_0123456789abcdef0123456789", "PAYD_URL": closed}
	tests := []struct {
		what string
		env  map[string]string
		args []string
		exit int
	}{
		{"help", nil, []string{"help"}, 0},
		{"help of a command", nil, []string{"help", "admin"}, 0},
		{"-h", nil, []string{"migrate", "-h"}, 0},
		{"unknown flag", nil, []string{"serve", "-bogus"}, 2},
		{"unknown flag, no command", nil, []string{"-bogus"}, 2},
		{"unknown flag of migrate", nil, []string{"migrate", "up", "-lease", "1m"}, 2},
		{"unknown flag of an admin verb", token, []string{"admin", "orders", "search", "-x"}, 2},
		{"unknown flag of demo", nil, []string{"demo", "-x"}, 2},
		{"bad flag value", nil, []string{"serve", "-lease", "abc"}, 2},
		{"bad flag value of an admin verb", token, []string{"admin", "orders", "search", "-limit", "many"}, 2},
		{"bad time of an admin verb", token, []string{"admin", "reconcile", "run", "-from", "soon"}, 2},
		{"missing required flag", token, []string{"admin", "reconcile", "run"}, 2},
		{"bad -url of demo", nil, []string{"demo", "-url", "localhost:8080"}, 2},
		{"unknown command", nil, []string{"bogus"}, 2},
		{"unknown help topic", nil, []string{"help", "bogus"}, 2},
		{"unknown migrate command", nil, []string{"migrate", "down"}, 2},
		{"unknown admin command", token, []string{"admin", "orders", "delete"}, 2},
		{"unexpected argument", nil, []string{"serve", "extra"}, 2},
		{"unexpected argument of version", nil, []string{"version", "extra"}, 2},
		{"two help topics", nil, []string{"help", "serve", "migrate"}, 2},
		{"missing migrate command", nil, []string{"migrate"}, 2},
		{"missing admin command", token, []string{"admin"}, 2},
		{"missing admin verb", token, []string{"admin", "orders"}, 2},
		{"missing admin argument", token, []string{"admin", "orders", "show"}, 2},
		{"bad time of a one-word admin verb", token, []string{"admin", "stats", "-from", "soon"}, 2},
		{"argument to a one-word admin verb", token, []string{"admin", "stats", "extra"}, 2},
		{"admin flags before the verb", token, []string{"admin", "-json", "orders", "search"}, 2},
		{"bad setting in the environment", map[string]string{"PAYD_LEASE": "abc"}, []string{"serve"}, 1},
		{"bad PAYD_URL", map[string]string{"PAYD_URL": "localhost:8080"}, []string{"demo"}, 1},
		{"bad PAYD_URL of admin", map[string]string{"PAYD_URL": "localhost:8080", "PAYD_ADMIN_TOKEN": token["PAYD_ADMIN_TOKEN"]}, []string{"admin", "orders", "search"}, 1},
		{"bad -url of admin", token, []string{"admin", "orders", "search", "-url", "localhost:8080"}, 2},
		{"no operator token", map[string]string{"PAYD_URL": closed}, []string{"admin", "orders", "search"}, 1},
		{"payd not running", token, []string{"admin", "orders", "search"}, 1},
		{"demo, payd not running", nil, []string{"demo", "-url", closed}, 1},
		{"database folder missing", nil, []string{"migrate", "up", "-database-url", "sqlite:///no/such/dir/x.db"}, 1},
		{"healthcheck, nothing listening", nil, []string{"healthcheck", "-url", closed + "/healthz"}, 1},
		{"healthcheck, unknown flag", nil, []string{"healthcheck", "-bogus"}, 1},
		{"healthcheck, unexpected argument", nil, []string{"healthcheck", "extra"}, 1},
		{"healthcheck, bad -timeout", nil, []string{"healthcheck", "-timeout", "soon"}, 1},
	}
	for _, tt := range tests {
		_, _, err, exit := runEnv(t, tt.env, tt.args...)
		if exit != tt.exit {
			t.Errorf("%s: payd %s exit %d (%v), want %d", tt.what, strings.Join(tt.args, " "), exit, err, tt.exit)
		}
	}
}

// TestUsageStreams: help asked for goes to stdout and exits 0; a usage
// written because of an error goes to stderr, nothing to stdout, and
// exits 2.
func TestUsageStreams(t *testing.T) {
	tests := []struct {
		args []string
		exit int
		want string // on stdout for 0, on stderr for 2
	}{
		{[]string{"-h"}, 0, "usage: payd [command]"},
		{[]string{"help"}, 0, "usage: payd [command]"},
		{[]string{"help", "admin"}, 0, "usage: payd admin"},
		{[]string{"admin", "-h"}, 0, "usage: payd admin"},
		{[]string{"admin", "help"}, 0, "usage: payd admin"},
		{[]string{"admin", "orders", "-h"}, 0, "usage: payd admin"},
		{[]string{"admin", "orders", "search", "-h"}, 0, "usage: payd admin orders search"},
		{[]string{"migrate", "-h"}, 0, "usage: payd migrate"},
		{[]string{"admin"}, 2, "usage: payd admin"},
		{[]string{"admin", "orders"}, 2, "usage: payd admin"},
		{[]string{"admin", "reconcile", "-json"}, 2, "usage: payd admin"},
		{[]string{"migrate"}, 2, "usage: payd migrate"},
		{[]string{"migrate", "down"}, 2, "usage: payd migrate"},
	}
	for _, tt := range tests {
		out, errOut, err, exit := runEnv(t, nil, tt.args...)
		name := "payd " + strings.Join(tt.args, " ")
		if exit != tt.exit {
			t.Errorf("%s exit %d (%v), want %d", name, exit, err, tt.exit)
		}
		if tt.exit == 0 && (!strings.Contains(out, tt.want) || errOut != "") {
			t.Errorf("%s wrote stdout %q, stderr %q; want %q on stdout only", name, out, errOut, tt.want)
		}
		if tt.exit != 0 && (!strings.Contains(errOut, tt.want) || out != "") {
			t.Errorf("%s wrote stdout %q, stderr %q; want %q on stderr only", name, out, errOut, tt.want)
		}
	}
}

// TestErrorsNameWhatWasUsed: each setting's refusal names its flag when
// the flag gave it (exit 2) and its variable when the environment did
// (exit 1), durations, numbers, decimals, choices, URLs, addresses and
// limits alike; a password in a refused URL is never printed.
func TestErrorsNameWhatWasUsed(t *testing.T) {
	// Every case is refused before payd opens anything; should one start,
	// it finds its context ended and its databases in a temporary folder.
	dir := t.TempDir()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	run := func(env map[string]string, args []string) (error, int) { //nolint:staticcheck // ST1008: as runEnv
		err := Main(ended, args, func(k string) string { return env[k] }, io.Discard, io.Discard)
		return err, ExitStatus(err)
	}
	dbFlags := map[string][]string{
		"serve":   {"-database-url", "sqlite://" + filepath.Join(dir, "payd.db"), "-sandbox-database-url", "sqlite://" + filepath.Join(dir, "sandbox.db")},
		"sandbox": {"-sandbox-database-url", "sqlite://" + filepath.Join(dir, "sandbox.db")},
		"migrate": {"-database-url", "sqlite://" + filepath.Join(dir, "payd.db")},
	}
	tests := []struct {
		sub, env, flag, value string
		want                  string // after the name
	}{
		{"serve", "PAYD_LEASE", "lease", "abc", `: "abc" is not a duration such as 30s`},
		{"serve", "PAYD_IDEMPOTENCY_TTL", "idempotency-ttl", "-1h", `: "-1h" is negative`},
		{"serve", "PAYD_LEASE", "lease", "3s", " (3s) must be longer than PAYD_PROVIDER_TIMEOUT"},
		{"serve", "PAYD_READ_TIMEOUT", "read-timeout", "0s", ", PAYD_WRITE_TIMEOUT and PAYD_IDLE_TIMEOUT must be positive"},
		{"serve", "PAYD_MAX_AMOUNT", "max-amount", "lots", ` must be a positive decimal, not "lots"`},
		{"serve", "PAYD_MAX_STREAMS_PER_CUSTOMER", "max-streams-per-customer", "x", " must be a whole number of at least 1"},
		{"serve", "PAYD_ENV", "env", "staging", ` must be development or production, not "staging"`},
		{"serve", "PAYD_LOG_LEVEL", "log-level", "loud", ` must be debug, info, warn or error, not "loud"`},
		{"serve", "PAYD_PROVIDER", "provider", "paypal", ` must be sandbox or stripe, not "paypal"`},
		{"serve", "PAYD_PROVIDER_URL", "provider-url", "ftp://x", " must be an http:// or https:// URL with a host"},
		{"serve", "PAYD_SANDBOX_WEBHOOK_URL", "sandbox-webhook-url", "http://", " must be an http:// or https:// URL with a host"},
		{"serve", "PAYD_DATABASE_URL", "database-url", "postgres://u:hunter2@db/payd", ` must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not "postgres://u:xxxxx@db/payd"`},
		{"serve", "PAYD_SANDBOX_DATABASE_URL", "sandbox-database-url", "mem", " must be sqlite://PATH or mysql://"},
		{"serve", "PAYD_REDIS_URL", "redis-url", "http://cache:6379", ": want redis://host:port/db"},
		{"serve", "PAYD_METRICS_ADDR", "metrics-addr", "9090", " must be host:port"},
		{"serve", "PAYD_PPROF_ADDR", "pprof", "6060", " must be host:port"},
		{"serve", "PAYD_RATE_LIMIT", "rate-limit", "fast", " must be a number of requests per second"},
		{"serve", "PAYD_RATE_LIMIT_BURST", "rate-limit-burst", "-1", " must be a whole number of requests"},
		{"serve", "PAYD_WEBHOOK_RATE_LIMIT", "webhook-rate-limit", "x", " must be a number of requests per second"},
		{"serve", "PAYD_WEBHOOK_RATE_LIMIT_BURST", "webhook-rate-limit-burst", "1.5", " must be a whole number of requests"},
		{"serve", "PAYD_TRUSTED_PROXIES", "trusted-proxies", "10.0.0/8", `: "10.0.0/8" is not a CIDR`},
		{"serve", "PAYD_RECONCILE_EVERY", "reconcile-every", "1ms", " must be 0 (never) or from 1s to"},
		{"serve", "PAYD_ADMIN_TOKENS", "admin-tokens", "nobody", " entry 1 of 1 must be name:token"},
		{"serve", "PAYD_SANDBOX_DUPLICATES", "sandbox-duplicates", "0", " must be a whole number from 1 to 10"},
		{"serve", "PAYD_SANDBOX_REORDER", "sandbox-reorder", "maybe", " must be true or false"},
		{"serve", "PAYD_WEBHOOK_SECRET", "webhook-secret", "hunter2", " must be one or more whsec_... secrets"},
		{"sandbox", "PAYD_SANDBOX_ASYNC_DELAY", "sandbox-async-delay", "later", `: "later" is not a duration`},
		{"sandbox", "PAYD_SANDBOX_DUPLICATES", "sandbox-duplicates", "11", " must be a whole number from 1 to 10"},
		{"migrate", "PAYD_DATABASE_URL", "database-url", "payd.db", ` must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not "payd.db"`},
		{"serve", "PAYD_DATABASE_URL", "database-url", "foo", ` must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not "foo"`},
		{"serve", "PAYD_DATABASE_URL", "database-url", "payd:hunter2@tcp(db:3306)/payd", " must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not a URL (the value is not shown"},
		{"serve", "PAYD_SANDBOX_DATABASE_URL", "sandbox-database-url", "password=hunter2", " must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not a URL (the value is not shown"},
		{"serve", "PAYD_PROVIDER_URL", "provider-url", "prov.example", ` must be an http:// or https:// URL with a host, not "prov.example"`},
		{"serve", "PAYD_ADDR", "addr", "9090", ` must be host:port (such as 127.0.0.1:8080, or :0 for a free port), not "9090"`},
		{"serve", "PAYD_ADDR", "addr", "127.0.0.1:http", " must be host:port"},
		{"serve", "PAYD_ADDR", "addr", ":65536", " must be host:port"},
		{"serve", "PAYD_SANDBOX_ADDR", "sandbox-addr", "9090", " must be host:port"},
		{"sandbox", "PAYD_SANDBOX_ADDR", "sandbox-addr", "localhost", " must be host:port"},
	}
	// The listen addresses: serve's own, and the sandbox's (serve's
	// in-process one defaults to 127.0.0.1:0), unless the case sets them.
	dbFlags["serve"] = append(dbFlags["serve"], "-addr", "127.0.0.1:0")
	dbFlags["sandbox"] = append(dbFlags["sandbox"], "-sandbox-addr", "127.0.0.1:0")
	for _, tt := range tests {
		args := map[string][]string{"serve": {"serve"}, "sandbox": {"sandbox"}, "migrate": {"migrate", "status"}}[tt.sub]
		for f := dbFlags[tt.sub]; len(f) > 0; f = f[2:] {
			if f[0] != "-"+tt.flag { // the case's own flag or variable gives it
				args = append(args, f[:2]...)
			}
		}
		byFlag := append(append([]string{}, args...), "-"+tt.flag, tt.value)
		err, exit := run(nil, byFlag)
		if want := "-" + tt.flag + tt.want; exit != 2 || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("payd %s: exit %d, %v; want exit 2 and an error starting %q", strings.Join(byFlag, " "), exit, err, want)
		}
		err, exit = run(map[string]string{tt.env: tt.value}, args)
		if want := tt.env + tt.want; exit != 1 || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s=%s payd %s: exit %d, %v; want exit 1 and an error starting %q", tt.env, tt.value, strings.Join(args, " "), exit, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "(not a URL; not shown)")) {
			t.Errorf("%s=%s: the error %q shows the password, or quotes a placeholder as the value", tt.env, tt.value, err)
		}
	}
}

// TestListenErrorsNameWhatWasUsed: an address payd cannot listen on (a
// port in use) is named as it was given, the flag or the variable, and
// only the one that failed; it is not the command line's fault (exit 1).
func TestListenErrorsNameWhatWasUsed(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	for _, tt := range []struct{ env, flag, other string }{
		{"PAYD_ADDR", "addr", ""},
		{"PAYD_SANDBOX_ADDR", "sandbox-addr", "PAYD_ADDR"},
		{"PAYD_METRICS_ADDR", "metrics-addr", "PAYD_PPROF_ADDR"},
		{"PAYD_PPROF_ADDR", "pprof", "PAYD_METRICS_ADDR"},
	} {
		dir := t.TempDir()
		args := []string{"serve", "-database-url", "sqlite://" + filepath.Join(dir, "payd.db"),
			"-sandbox-database-url", "sqlite://" + filepath.Join(dir, "sandbox.db")}
		if tt.flag != "addr" {
			args = append(args, "-addr", "127.0.0.1:0")
		}
		_, _, err, exit := runEnv(t, nil, append(args, "-"+tt.flag, inUse)...)
		if exit != 1 || err == nil || !strings.HasPrefix(err.Error(), "-"+tt.flag+": ") || strings.Contains(err.Error(), tt.env) ||
			(tt.other != "" && strings.Contains(err.Error(), tt.other)) {
			t.Errorf("payd serve -%s %s: exit %d, %v; want exit 1 and an error starting -%s: that names nothing else", tt.flag, inUse, exit, err, tt.flag)
		}
		_, _, err, exit = runEnv(t, map[string]string{tt.env: inUse}, args...)
		if exit != 1 || err == nil || !strings.HasPrefix(err.Error(), tt.env+": ") || (tt.other != "" && strings.Contains(err.Error(), tt.other)) {
			t.Errorf("%s=%s payd serve: exit %d, %v; want exit 1 and an error starting %s: that names nothing else", tt.env, inUse, exit, err, tt.env)
		}
	}
}

// startPayd runs payd serve in-process on a free port with its databases
// in a temporary folder, until the test ends; it returns its base URL.
func startPayd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-shutdown-delay", "0s", "-merchant-key", demoMerchantKey,
			"-database-url", "sqlite://" + filepath.Join(dir, "payd.db"), "-sandbox-database-url", "sqlite://" + filepath.Join(dir, "sandbox.db")},
			func(string) string { return "" }, w, io.Discard)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("payd serve = %v", err)
		}
	})
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "payd listening on "); ok {
				base <- u
			}
		}
		close(base)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case u, ok := <-base:
		if !ok {
			t.Fatal("payd serve ended before it listened")
		}
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("payd serve did not listen within 60s")
	}
	return ""
}

// demoMerchantKey is the merchant key of startPayd's payd: payd demo
// stocks the catalogue with it when it has nothing to sell.
const demoMerchantKey = "sk_demo0demo0demo0demo0demo0demo0demo0demo0demo0demo0demo0demo0"

// TestDemoHonoursPayDURL: payd demo walks the payd PAYD_URL names, as payd
// admin does; -url wins over it; a PAYD_URL that is not a URL is named.
func TestDemoHonoursPayDURL(t *testing.T) {
	base := startPayd(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name    string
		paydURL string
		args    []string
		exit    int
		want    string // in the output for 0, in the error otherwise
	}{
		{"PAYD_URL", base, nil, 0, "done: the order is paid once"},
		{"-url over PAYD_URL", dead, []string{"-url", base}, 0, "done: the order is paid once"},
		{"-url over a running PAYD_URL", base, []string{"-url", dead}, 1, "is payd running at " + dead},
		{"a PAYD_URL that is not a URL", "localhost:8080", nil, 1, `PAYD_URL "localhost:8080" must be an http:// or https:// URL`},
		{"a -url that is not a URL", base, []string{"-url", "localhost:8080"}, 2, `-url "localhost:8080" must be an http:// or https:// URL`},
	}
	for _, tt := range tests {
		out, _, err, exit := runEnv(t, map[string]string{"PAYD_URL": tt.paydURL, "PAYD_MERCHANT_KEY": demoMerchantKey}, append([]string{"demo"}, tt.args...)...)
		switch {
		case exit != tt.exit:
			t.Errorf("%s: payd demo %v exit %d (%v), want %d\n%s", tt.name, tt.args, exit, err, tt.exit, out)
		case exit == 0 && !strings.Contains(out, tt.want):
			t.Errorf("%s: payd demo %v printed no %q:\n%s", tt.name, tt.args, tt.want, out)
		case exit != 0 && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: payd demo %v = %v, want %q", tt.name, tt.args, err, tt.want)
		}
	}
	out, _, _, _ := runEnv(t, map[string]string{"PAYD_URL": "http://payd.internal:9000"}, "demo", "-h")
	if entry := flagHelp(out, "url"); !strings.Contains(entry, "PAYD_URL") || !strings.HasSuffix(entry, `(default "http://payd.internal:9000")`) {
		t.Errorf("payd demo -h with PAYD_URL set shows -url as\n%s\nwant PAYD_URL as its default", entry)
	}
}

// TestAdminChecksBeforeSending: a value payd admin can check itself (a
// status, action or type from domain's lists, an ID, key, cursor or
// customer of the wrong shape, a -limit out of range) exits 2 and sends
// nothing, with or without a token; a good value is sent.
func TestAdminChecksBeforeSending(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"code":"not_found","title":"not found","status":404}`)
	}))
	defer srv.Close()
	const id = "01890a5d-ac96-774b-bcce-b302099a8057"
	bad := []struct {
		args []string
		want string // in the error
	}{
		{[]string{"discrepancies", "resolve", id, "-action", "nope"}, `-action "nope": want apply, refund, ignore`},
		{[]string{"discrepancies", "resolve", "X", "-action", "ignore"}, `DISCREPANCY_ID "X" is not an ID`},
		{[]string{"discrepancies", "resolve", id, "-action", "ignore", "-run", "r1"}, `-run "r1" is not an ID`},
		{[]string{"discrepancies", "resolve", id, "-action", "ignore", "-key", "a b"}, `-key "a b"`},
		{[]string{"discrepancies", "list", "-status", "closed"}, `-status "closed": want open, resolving, resolved`},
		{[]string{"discrepancies", "list", "-type", "odd"}, `-type "odd": want missing_local_payment,`},
		{[]string{"discrepancies", "list", "-order", "o1"}, `-order "o1" is not an ID`},
		{[]string{"orders", "search", "-status", "weird"}, `-status "weird": want pending, processing, authorized, paid, refunded, cancelled, expired`},
		{[]string{"orders", "search", "-customer", "ada"}, `-customer "ada": want a customer ID`},
		{[]string{"orders", "search", "-limit", "0"}, "-limit 0: want a whole number from 1 to 100"},
		{[]string{"orders", "search", "-cursor", "next"}, `-cursor "next"`},
		{[]string{"orders", "show", "42"}, `ORDER_ID "42" is not an ID`},
		{[]string{"reconcile", "show", "last"}, `RUN_ID "last" is not an ID`},
		{[]string{"reconcile", "list", "-limit", "101"}, "-limit 101"},
		{[]string{"reconcile", "run", "-from", "24h", "-key", "é"}, `-key "é"`},
		{[]string{"orders", "refund", id}, "-reason is required"},
		{[]string{"orders", "refund", id, "-reason", "   "}, "-reason is required"},
		{[]string{"orders", "refund", id, "-reason", strings.Repeat("r", 501)}, "-reason: 501 characters, want at most 500"},
		{[]string{"orders", "refund", id, "-reason", strings.Repeat("é", 501)}, "-reason: 501 characters, want at most 500"},
		{[]string{"orders", "refund", id, "-reason", "damaged", "-amount", "five"}, `-amount "five": want a decimal amount`},
		{[]string{"orders", "refund", "o-1", "-reason", "damaged"}, `ORDER_ID "o-1" is not an ID`},
		{[]string{"orders", "refund", id, "-reason", "damaged", "-key", "a b"}, `-key "a b"`},
	}
	for _, token := range []string{"adm_0123456789abcdef0123456789", ""} {
		env := map[string]string{"PAYD_URL": srv.URL, "PAYD_ADMIN_TOKEN": token}
		for _, tt := range bad {
			_, _, err, exit := runEnv(t, env, append([]string{"admin"}, tt.args...)...)
			if exit != 2 || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("token %q: payd admin %s: exit %d, %v; want exit 2 and %q", token, strings.Join(tt.args, " "), exit, err, tt.want)
			}
		}
	}
	mu.Lock()
	if len(sent) != 0 {
		t.Errorf("refused command lines sent %v, want nothing", sent)
	}
	mu.Unlock()
	good := [][]string{
		{"discrepancies", "resolve", id, "-action", "ignore", "-run", id, "-key", "k-1"},
		{"orders", "search", "-status", "paid", "-customer", "ada@example.com", "-limit", "100", "-cursor", id},
		{"orders", "search", "-customer", id},
		{"orders", "show", id},
		{"orders", "refund", id, "-reason", "damaged", "-amount", "5.00", "-key", "k-2"},
		{"orders", "refund", id, "-reason", strings.Repeat("é", 300)}, // 600 bytes, 300 characters: payd's limit is 500 characters
		{"discrepancies", "list", "-status", "resolved", "-type", "amount_mismatch", "-order", id},
	}
	for _, args := range good {
		mu.Lock()
		sent = nil
		mu.Unlock()
		_, _, err, exit := runEnv(t, map[string]string{"PAYD_URL": srv.URL, "PAYD_ADMIN_TOKEN": "adm_x"}, append([]string{"admin"}, args...)...)
		mu.Lock()
		if exit != 1 || len(sent) == 0 || !strings.Contains(fmt.Sprint(err), "payd answered 404") {
			t.Errorf("payd admin %s: exit %d, %v, sent %v; want it sent and payd's 404 (exit 1)", strings.Join(args, " "), exit, err, sent)
		}
		mu.Unlock()
	}
}

// TestUnreachableNamesWhatSetTheURL: payd admin, unable to reach payd,
// names what gave the address: -url, PAYD_URL, or, for the default, both
// ways to give one; a password in it is masked.
func TestUnreachableNamesWhatSetTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://u:hunter2@" + ln.Addr().String()
	ln.Close()
	const token = "adm_0123456789abcdef0123456789"
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"-url", map[string]string{"PAYD_ADMIN_TOKEN": token, "PAYD_URL": "http://127.0.0.1:1"}, []string{"-url", closed}, "(is it running? check -url)"},
		{"PAYD_URL", map[string]string{"PAYD_ADMIN_TOKEN": token, "PAYD_URL": closed}, nil, "(is it running? check PAYD_URL)"},
	}
	for _, tt := range tests {
		_, _, err, exit := runEnv(t, tt.env, append([]string{"admin", "orders", "search"}, tt.args...)...)
		msg := fmt.Sprint(err)
		if exit != 1 || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "cannot reach payd at http://u:xxxxx@") || strings.Contains(msg, "hunter2") {
			t.Errorf("%s: exit %d, %v; want exit 1, %q and the URL masked", tt.name, exit, err, tt.want)
		}
	}
	// The default address may have a payd behind it on this machine: the
	// message for it is asked of the connection the command would make.
	a := &adminConn{url: closed}
	_, _, err = a.answer(nil, errors.New("connection refused"))
	if msg := fmt.Sprint(err); !strings.Contains(msg, "set PAYD_URL or pass -url") || strings.Contains(msg, "hunter2") {
		t.Errorf("unreachable default = %v, want it to name PAYD_URL and -url, the password masked", err)
	}
}

// TestMissingVerbSaysWhatIsMissing: payd migrate and payd admin without
// their verb print the usage on stderr and an error line that says what
// was missing, not the usage again.
func TestMissingVerbSaysWhatIsMissing(t *testing.T) {
	for args, want := range map[string]string{
		"migrate":      "migrate needs up or status (the usage is above)",
		"admin":        "admin needs a command, such as orders search (the list is above)",
		"admin orders": "admin orders needs a verb (the list is above)",
	} {
		_, errOut, err, exit := runEnv(t, nil, strings.Fields(args)...)
		if exit != 2 || fmt.Sprint(err) != want || !strings.Contains(errOut, "usage: payd") {
			t.Errorf("payd %s: exit %d, error %q, stderr %q; want 2, %q after the usage", args, exit, err, errOut, want)
		}
	}
}

// TestFlagsBeforeTheVerb: payd migrate and payd admin given their flags
// before the verb both say that the flags come after it, naming the
// first flag, as a usage error.
func TestFlagsBeforeTheVerb(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "-database-url", db, "up"}, "payd migrate takes flags after its verb: payd migrate up -database-url"},
		{[]string{"migrate", "-database-url=" + db, "status"}, "payd migrate takes flags after its verb: payd migrate status -database-url"},
		{[]string{"admin", "-url", "http://127.0.0.1:1", "orders", "search"}, "payd admin takes flags after its verb: payd admin GROUP VERB -url"},
	} {
		_, _, err, exit := runEnv(t, nil, tt.args...)
		if exit != 2 || !strings.HasPrefix(fmt.Sprint(err), tt.want) {
			t.Errorf("payd %s: exit %d, %v; want exit 2 and an error starting %q", strings.Join(tt.args, " "), exit, err, tt.want)
		}
	}
}
