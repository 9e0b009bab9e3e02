package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestLandingPageLinksWhatPaydServes: GET / on a running payd is an HTML
// page with the pages' headers that links the checkout page, the console,
// the OpenAPI document and the problem types, and every page it links
// answers 200 there. HEAD / answers the headers; / shadows no other route.
func TestLandingPageLinksWhatPaydServes(t *testing.T) {
	s := start(t, on("sqlite"))
	r := s.do(request{method: http.MethodGet, path: "/"})
	if r.Status != http.StatusOK {
		t.Fatalf("GET / = %d %s, want 200", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET / Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options", "ETag"} {
		if r.Header.Get(h) == "" {
			t.Errorf("GET / has no %s header", h)
		}
	}
	var links []string
	problems := 0
	for _, m := range regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(string(r.Body), -1) {
		if !strings.HasPrefix(m[1], "#") {
			links = append(links, m[1])
		}
		if strings.HasPrefix(m[1], "/problems/") {
			problems++
		}
	}
	for _, want := range []string{"/checkout", "/admin", "/openapi.yaml", "/problems/card_declined", "/problems/idempotency_key_in_use"} {
		if !contains(links, want) {
			t.Errorf("GET / links no %s; it links %v", want, links)
		}
	}
	if problems < 30 {
		t.Errorf("GET / links %d problem types, want the whole catalogue", problems)
	}
	for _, l := range links {
		if !strings.HasPrefix(l, "/") || strings.HasPrefix(l, "//") {
			t.Errorf("GET / links %q, not a path of payd's own", l)
			continue
		}
		got := s.do(request{method: http.MethodGet, path: l})
		if got.Status != http.StatusOK {
			t.Errorf("GET / links %s, which answers %d", l, got.Status)
		}
		// HEAD of every link: GET's status and headers, no body.
		head := s.do(request{method: http.MethodHead, path: l})
		if head.Status != http.StatusOK || len(head.Body) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes, want 200 and no body", l, head.Status, len(head.Body))
		}
		for _, h := range []string{"Content-Type", "Content-Length", "ETag", "Content-Security-Policy", "Cache-Control"} {
			if head.Header.Get(h) != got.Header.Get(h) {
				t.Errorf("HEAD %s %s = %q, GET's is %q", l, h, head.Header.Get(h), got.Header.Get(h))
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if got := s.do(request{method: http.MethodHead, path: p}); got.Status != http.StatusOK || len(got.Body) != 0 ||
			got.Header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD %s = %d %q with %d bytes, want 200 application/json and no body", p, got.Status, got.Header.Get("Content-Type"), len(got.Body))
		}
	}
	// Unknown files under the pages are payd's 404 problem, like any
	// unknown path, by GET and by HEAD.
	for _, p := range []string{"/checkout/nope", "/admin/x.js", "/problems/nope"} {
		if got := s.do(request{method: http.MethodGet, path: p}); got.Status != http.StatusNotFound ||
			got.Header.Get("Content-Type") != "application/problem+json" || got.code(t) != "not_found" {
			t.Errorf("GET %s = %d %q %s, want the 404 not_found problem", p, got.Status, got.Header.Get("Content-Type"), got.Body)
		}
		if got := s.do(request{method: http.MethodHead, path: p}); got.Status != http.StatusNotFound ||
			got.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("HEAD %s = %d %q, want 404 application/problem+json", p, got.Status, got.Header.Get("Content-Type"))
		}
	}

	head := s.do(request{method: http.MethodHead, path: "/"})
	if head.Status != http.StatusOK || head.Header.Get("Content-Type") != "text/html; charset=utf-8" || len(head.Body) != 0 {
		t.Errorf("HEAD / = %d %q with %d bytes, want 200 text/html and no body", head.Status, head.Header.Get("Content-Type"), len(head.Body))
	}
	if got := s.do(request{method: http.MethodGet, path: "/v1/orders"}); got.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/orders without a token = %d, want 401: / must not shadow the API", got.Status)
	}
	if got := s.do(request{method: http.MethodGet, path: "/nowhere"}); got.Status != http.StatusNotFound || got.code(t) != "not_found" {
		t.Errorf("GET /nowhere = %d %s, want the 404 not_found problem", got.Status, got.Body)
	}
}
