package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// TestDemoWalksRunningPayd: `payd demo` drives a running payd through
// register, order, pay, replay and /v1/requests/{key}, prints each exchange
// and charges once; the token never appears whole in its output.
func TestDemoWalksRunningPayd(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		var out bytes.Buffer
		// The test's payd has an empty catalogue: the demo stocks it with
		// the merchant's key.
		if err := run(context.Background(), []string{"demo", "-url", s.base}, env{"PAYD_MERCHANT_KEY": testMerchantKey}.get, &out, &out); err != nil {
			t.Fatalf("payd demo = %v\n%s", err, out.String())
		}
		text := out.String()
		for _, want := range []string{"> POST /v1/customers", "< 201 Created", "> POST /v1/orders\n", "< 200 OK",
			"< Idempotent-Replayed: true", "> GET /v1/requests/", `"status":"paid"`, "done:"} {
			if !strings.Contains(text, want) {
				t.Errorf("demo output has no %q:\n%s", want, text)
			}
		}
		m := regexp.MustCompile(`> POST /v1/orders/(\S+)/pay`).FindAllStringSubmatch(text, -1)
		if len(m) != 2 || m[0][1] != m[1][1] {
			t.Fatalf("demo paid %v, want one order paid twice with one key:\n%s", m, text)
		}
		if n := s.charges(m[0][1]); n != 1 {
			t.Errorf("charges of the demo's order = %d, want 1", n)
		}
		if tok := regexp.MustCompile(`ptk_[A-Za-z0-9_-]{20,}`).FindString(text); tok != "" {
			t.Errorf("demo printed a whole token %s", tok)
		}
	})
}

// TestDemoWithoutServer: with nothing listening the demo fails and says so.
func TestDemoWithoutServer(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"demo", "-url", "http://127.0.0.1:1"}, env{}.get, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "is payd running") {
		t.Errorf("payd demo against nothing = %v, want an error asking whether payd runs", err)
	}
}

// pasteInShell runs script with sh, as a user pasting it would.
func pasteInShell(t *testing.T, script string) string {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: " + err.Error())
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	return string(out)
}

// checkWalkthrough: the pasted walkthrough registered, paid once, got the
// replay and found the request.
func checkWalkthrough(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{`"token":"ptk_`, `"status":"pending"`, "HTTP/1.1 200 OK", `"status":"paid"`,
		"Idempotent-Replayed: true", `"status":"succeeded"`} {
		if !strings.Contains(out, want) {
			t.Errorf("walkthrough output has no %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{`"code":"`, "400 Bad Request", "401 Unauthorized"} {
		if strings.Contains(out, bad) {
			t.Errorf("walkthrough output has %q:\n%s", bad, out)
		}
	}
}

// devEnv is payd in development with nothing set but a free port and a
// database of dialect in dir: secrets made up and kept, sandbox in-process.
func devEnv(t *testing.T, dialect, dir string) env {
	dbURL := "sqlite://" + filepath.Join(dir, "payd.db")
	if dialect == "mysql" {
		dbURL = dbtest.NewURL(t, migrations.MySQL)
		t.Chdir(dir)
	}
	return env{"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL, "PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(dir, "sandbox.db")}
}

// TestBannerWalkthroughRunsAsPasted pastes the banner's lines into sh.
func TestBannerWalkthroughRunsAsPasted(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		p := start(t, asConfigured(devEnv(t, dialect, t.TempDir())))
		within(5*time.Second, func() bool { return strings.Contains(p.stdout.String(), "/v1/requests/") })
		banner := p.stdout.String()
		if strings.Contains(banner, "uuidgen") || strings.Contains(banner, "...") || strings.Contains(banner, "…") {
			t.Errorf("banner has a placeholder or needs uuidgen:\n%s", banner)
		}
		_, walk, ok := strings.Cut(banner, "Try it:")
		if !ok {
			t.Fatalf("banner has no walkthrough:\n%s", banner)
		}
		var script strings.Builder
		for _, line := range strings.Split(walk, "\n")[1:] {
			script.WriteString(strings.TrimPrefix(line, "  ") + "\n")
		}
		out := pasteInShell(t, script.String())
		checkWalkthrough(t, out)
		// Pasted again: the registration replays, a new order is paid under its own key.
		checkWalkthrough(t, pasteInShell(t, script.String()))
	})
}

// TestReadmeWalkthroughRunsAsPasted pastes the README's curl session into
// sh, twice: the second time the registration is replayed and the new
// order paid under its own key.
func TestReadmeWalkthroughRunsAsPasted(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(raw), "## A session with curl")
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if strings.Contains(block, "uuidgen") || regexp.MustCompile(`(?m)^[^#]*…`).MatchString(block) {
		t.Errorf("README walkthrough has a placeholder outside comments or needs uuidgen:\n%s", block)
	}
	eachDialect(t, func(t *testing.T, dialect string) {
		dir := t.TempDir()
		p := start(t, asConfigured(devEnv(t, dialect, dir)))
		script := strings.Replace(block, "BASE=http://127.0.0.1:8080", "BASE="+p.base, 1)
		script = strings.Replace(script, " payd.secrets)", " "+filepath.Join(dir, "payd.secrets")+")", 1) // pasted where payd runs
		for range 2 {
			out := pasteInShell(t, script)
			checkWalkthrough(t, out)
			if !strings.Contains(out, `"items":[{"sku":"tea","quantity":2}],"carrier":"DHL"`) {
				t.Errorf("the README's shipment was not made:\n%s", out)
			}
		}
	})
}
