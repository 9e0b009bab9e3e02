package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesPageAndAssets(t *testing.T) {
	h := Handler()
	tests := []struct {
		path, wantType, wantBody string
	}{
		{"/checkout", "text/html; charset=utf-8", "<title>Checkout"},
		{"/checkout/", "text/html; charset=utf-8", "<title>Checkout"},
		{"/checkout/app.js", "text/javascript; charset=utf-8", "import"},
		{"/checkout/api.js", "text/javascript; charset=utf-8", "Idempotency-Key"},
		{"/checkout/payment.js", "text/javascript; charset=utf-8", "crypto.randomUUID()"},
		{"/checkout/cart.js", "text/javascript; charset=utf-8", "catalogue"},
		{"/checkout/style.css", "text/css; charset=utf-8", ":root"},
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
		for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "ETag"} {
			if res.Header.Get(h) == "" {
				t.Errorf("GET %s has no %s header", tt.path, h)
			}
		}
	}
}

func TestHandlerRefusesWhatIsNotThePage(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/checkout/missing.js", "/checkout/../web.go", "/checkout/checkout/index.html", "/checkoutx", "/", "/checkout/app.js/"} {
		if res := get(t, h, http.MethodGet, path, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.StatusCode)
		}
	}
	res := get(t, h, http.MethodPost, "/checkout", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /checkout = %d Allow %q, want 405 Allow \"GET, HEAD\"", res.StatusCode, res.Header.Get("Allow"))
	}
}

func TestHandlerRevalidatesByETag(t *testing.T) {
	h := Handler()
	first := get(t, h, http.MethodGet, "/checkout/app.js", nil)
	etag := first.Header.Get("ETag")
	if first.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("Cache-Control = %q, want no-cache", first.Header.Get("Cache-Control"))
	}
	again := get(t, h, http.MethodGet, "/checkout/app.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match %s = %d, want 304", etag, again.StatusCode)
	}
}

// TestPageLoadsOnlyItsOwnFiles checks every script, stylesheet and module
// import the page names is served here: the CSP allows nothing else, and no
// build step could have produced a missing file.
func TestPageLoadsOnlyItsOwnFiles(t *testing.T) {
	h := Handler()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"|from '([^']+)'`)
	for _, page := range append([]string{Prefix}, scripts(t)...) {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, page, nil).Body)
		for _, m := range refs.FindAllStringSubmatch(string(body), -1) {
			ref := m[1] + m[2]
			if strings.HasPrefix(ref, "./") {
				ref = Prefix + ref[1:]
			}
			if !strings.HasPrefix(ref, Prefix+"/") {
				t.Errorf("%s refers to %q, outside %s/", page, ref, Prefix)
				continue
			}
			if res := get(t, h, http.MethodGet, ref, nil); res.StatusCode != http.StatusOK {
				t.Errorf("%s refers to %s, which answers %d", page, ref, res.StatusCode)
			}
		}
	}
}

// TestScriptsKeepTokensOutOfURLs guards the rule that the bearer token only
// ever travels in the Authorization header, never in a URL that logs keep.
func TestScriptsKeepTokensOutOfURLs(t *testing.T) {
	h := Handler()
	for _, page := range scripts(t) {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, page, nil).Body)
		for _, bad := range []string{"new EventSource", "?token=", "&token=", "access_token"} {
			if strings.Contains(string(body), bad) {
				t.Errorf("%s contains %q", page, bad)
			}
		}
	}
}

// scripts lists the URLs of every embedded script of the checkout page.
func scripts(t *testing.T) []string {
	t.Helper()
	return scriptsOf(t, "checkout", Prefix)
}

// scriptsOf lists the URLs of every script embedded in dir, served at prefix.
func scriptsOf(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".js") {
			out = append(out, prefix+"/"+e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no scripts embedded")
	}
	return out
}

// TestServesNamesOnlyThePageAndItsFiles: a router asks Serves before
// handing a path to the page, and answers anything else itself.
func TestServesNamesOnlyThePageAndItsFiles(t *testing.T) {
	for _, c := range []struct {
		site *Site
		path string
		want bool
	}{
		{Handler(), "/checkout", true}, {Handler(), "/checkout/", true}, {Handler(), "/checkout/app.js", true},
		{Handler(), "/checkout/config.json", true}, {Handler(), "/checkout/nope", false}, {Handler(), "/checkout/x/app.js", false},
		{Console(), "/admin", true}, {Console(), "/admin/x.js", false}, {Console(), "/checkout/app.js", false},
	} {
		if got := c.site.Serves(c.path); got != c.want {
			t.Errorf("Serves(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}
