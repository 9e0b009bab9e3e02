package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBannerPrintsSandboxAddress: with the sandbox in-process (no
// PAYD_PROVIDER_URL), the banner and the log say where it listens, and
// what listens there is the sandbox: it serves the settlement file of
// today, in the format a reconciliation upload takes.
func TestBannerPrintsSandboxAddress(t *testing.T) {
	p := start(t, asConfigured(devEnv(t, "sqlite", t.TempDir())))
	within(5*time.Second, func() bool { return strings.Contains(p.stdout.String(), "/v1/requests/") })
	banner := p.stdout.String()
	m := regexp.MustCompile(`sandbox in-process at (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the banner does not say where the sandbox listens:\n%s", banner)
	}
	if !strings.Contains(p.logs.String(), `"msg":"sandbox listening","addr":"`+strings.TrimPrefix(m[1], "http://")+`"`) {
		t.Errorf("the log does not say where the sandbox listens:\n%s", p.logs.String())
	}
	resp, err := http.Get(m[1] + "/v1/settlements/" + time.Now().UTC().Format("2006-01-02") + ".csv")
	if err != nil {
		t.Fatalf("GET the sandbox's settlement file: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at") {
		t.Errorf("GET %s/v1/settlements/today.csv = %d %q, want 200 and the settlement header", m[1], resp.StatusCode, body)
	}
	// The operators' console is named too, and answers where it says.
	c := regexp.MustCompile(`operators' console: (http://\S+/admin) `).FindStringSubmatch(banner)
	if c == nil {
		t.Fatalf("the banner does not name the operators' console:\n%s", banner)
	}
	page, err := http.Get(c[1])
	if err != nil {
		t.Fatalf("GET the console: %v", err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s = %d %s, want 200 text/html", c[1], page.StatusCode, page.Header.Get("Content-Type"))
	}
}
