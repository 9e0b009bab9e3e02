package web

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var someProblems = []Problem{{"card_declined", 402, "Card declined"}, {"order_not_found", 404, "Order not found"}}

// TestLandingLinksPagesDocumentAndProblems: / is an HTML page with the
// pages' headers that links the checkout page, the console, the OpenAPI
// document and a page per problem it was given, in the checkout style.
func TestLandingLinksPagesDocumentAndProblems(t *testing.T) {
	h := Landing(someProblems)
	res := get(t, h, http.MethodGet, "/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", res.StatusCode)
	}
	if got := res.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("GET / Content-Type = %q, want text/html; charset=utf-8", got)
	}
	want := map[string]string{
		"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("GET / %s = %q, want %q", k, got, v)
		}
	}
	links := map[string]bool{}
	for _, m := range regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(string(body), -1) {
		links[m[1]] = true
	}
	for _, l := range []string{"/checkout/style.css", Prefix, ConsolePrefix, "/openapi.yaml", "/problems/card_declined", "/problems/order_not_found"} {
		if !links[l] {
			t.Errorf("GET / links no %s; links %v", l, links)
		}
	}
	if strings.Contains(string(body), "<script") {
		t.Error("the landing page has a script; it needs none")
	}
	if !strings.Contains(string(body), "Order not found") {
		t.Error("the landing page does not name the problems' titles")
	}
}

// TestLandingIsOnlySlash: HEAD / answers like GET without a body; any
// other path or method is refused.
func TestLandingIsOnlySlash(t *testing.T) {
	h := Landing(someProblems)
	head := get(t, h, http.MethodHead, "/", nil)
	body, _ := io.ReadAll(head.Body)
	if head.StatusCode != http.StatusOK || head.Header.Get("Content-Type") != "text/html; charset=utf-8" || len(body) != 0 {
		t.Errorf("HEAD / = %d %q with %d bytes, want 200 text/html and no body", head.StatusCode, head.Header.Get("Content-Type"), len(body))
	}
	for _, p := range []string{"/index.html", "/landing.html", "//", "/x"} {
		if res := get(t, h, http.MethodGet, p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
	}
	if res := get(t, h, http.MethodPost, "/", nil); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405", res.StatusCode)
	}
}
