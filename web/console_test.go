package web

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestConsoleServesPageAndAssets: /admin and each of its files answer with
// their type and the same protective headers as the checkout page.
func TestConsoleServesPageAndAssets(t *testing.T) {
	h := Console()
	tests := []struct {
		path, wantType, wantBody string
	}{
		{"/admin", "text/html; charset=utf-8", "<title>Console"},
		{"/admin/", "text/html; charset=utf-8", "<title>Console"},
		{"/admin/app.js", "text/javascript; charset=utf-8", "import"},
		{"/admin/api.js", "text/javascript; charset=utf-8", "Idempotency-Key"},
		{"/admin/discrepancies.js", "text/javascript; charset=utf-8", "setBusy(true)"},
		{"/admin/timeline.js", "text/javascript; charset=utf-8", "outcomeOf"},
		{"/admin/books.js", "text/javascript; charset=utf-8", "renderMoney"},
		{"/admin/overview.js", "text/javascript; charset=utf-8", "/v1/admin/stats"},
		{"/admin/chart.js", "text/javascript; charset=utf-8", "createElementNS"},
		{"/admin/live.js", "text/javascript; charset=utf-8", "visibilityState"},
		{"/admin/order.js", "text/javascript; charset=utf-8", "refundIntent"},
		{"/admin/dom.js", "text/javascript; charset=utf-8", "textContent"},
		{"/admin/catalogue.js", "text/javascript; charset=utf-8", "/v1/admin/products"},
		{"/admin/disputes.js", "text/javascript; charset=utf-8", "/v1/admin/disputes"},
		{"/admin/style.css", "text/css; charset=utf-8", ".timeline"},
	}
	for _, tt := range tests {
		res := get(t, h, http.MethodGet, tt.path, nil)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", tt.path, res.StatusCode)
			continue
		}
		if got := res.Header.Get("Content-Type"); got != tt.wantType {
			t.Errorf("GET %s Content-Type = %q, want %q", tt.path, got, tt.wantType)
		}
		if !strings.Contains(string(body), tt.wantBody) {
			t.Errorf("GET %s body lacks %q", tt.path, tt.wantBody)
		}
		for name, want := range map[string]string{"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"} {
			if got := res.Header.Get(name); got != want {
				t.Errorf("GET %s %s = %q, want %q", tt.path, name, got, want)
			}
		}
	}
}

// TestConsoleRefusesWhatIsNotThePage: the console serves its own files
// only, never the checkout's or the source's, and only to GET and HEAD.
func TestConsoleRefusesWhatIsNotThePage(t *testing.T) {
	h := Console()
	for _, path := range []string{"/admin/missing.js", "/admin/../web.go", "/admin/cart.js", "/adminx", "/checkout", "/admin/app.js/"} {
		if res := get(t, h, http.MethodGet, path, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.StatusCode)
		}
	}
	if res := get(t, h, http.MethodPost, "/admin", nil); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin = %d, want 405", res.StatusCode)
	}
}

// TestConsoleLoadsOnlyItsOwnFiles: every script, stylesheet and import the
// console names is one of its own files (the CSP allows nothing else).
func TestConsoleLoadsOnlyItsOwnFiles(t *testing.T) {
	h := Console()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"|from '([^']+)'`)
	for _, page := range append([]string{ConsolePrefix}, scriptsOf(t, "admin", ConsolePrefix)...) {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, page, nil).Body)
		for _, m := range refs.FindAllStringSubmatch(string(body), -1) {
			ref := m[1] + m[2]
			if strings.HasPrefix(ref, "./") {
				ref = ConsolePrefix + ref[1:]
			}
			if !strings.HasPrefix(ref, ConsolePrefix+"/") {
				t.Errorf("%s refers to %q, outside %s/", page, ref, ConsolePrefix)
				continue
			}
			if res := get(t, h, http.MethodGet, ref, nil); res.StatusCode != http.StatusOK {
				t.Errorf("%s refers to %s, which answers %d", page, ref, res.StatusCode)
			}
		}
	}
}

// TestConsoleScriptsGuardTheToken: the operator token lives in
// sessionStorage and travels only in the Authorization header; payd's
// answers go into the page as text, never as HTML.
func TestConsoleScriptsGuardTheToken(t *testing.T) {
	h := Console()
	var all strings.Builder
	for _, page := range scriptsOf(t, "admin", ConsolePrefix) {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, page, nil).Body)
		all.Write(body)
		for _, bad := range []string{"localStorage", "?token=", "&token=", "access_token", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(string(body), bad) {
				t.Errorf("%s contains %q", page, bad)
			}
		}
	}
	for _, want := range []string{"sessionStorage", "Authorization: `Bearer ", "credentials: 'omit'"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the console's scripts lack %q", want)
		}
	}
}

// TestConsolePollsAtMostEveryFiveSeconds: the console keeps what is on
// screen current by asking again at most every 5 s, and only while the tab
// is visible.
func TestConsolePollsAtMostEveryFiveSeconds(t *testing.T) {
	h := Console()
	app, _ := io.ReadAll(get(t, h, http.MethodGet, "/admin/app.js", nil).Body)
	m := regexp.MustCompile(`const POLL = (\d+);`).FindSubmatch(app)
	if m == nil {
		t.Fatal("app.js names no POLL interval")
	}
	if ms, err := strconv.Atoi(string(m[1])); err != nil || ms <= 0 || ms > 5000 {
		t.Errorf("POLL = %s ms, want 1 to 5000", m[1])
	}
	live, _ := io.ReadAll(get(t, h, http.MethodGet, "/admin/live.js", nil).Body)
	for _, want := range []string{"visibilitychange", "document.visibilityState === 'visible'"} {
		if !strings.Contains(string(live), want) {
			t.Errorf("live.js lacks %q", want)
		}
	}
}
