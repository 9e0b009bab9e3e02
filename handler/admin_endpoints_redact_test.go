package handler

import (
	"strings"
	"testing"

	"github.com/payd/payd/domain"
)

// TestAuditURLRedactsCredentials: an endpoint URL with userinfo (refused,
// but audited as a refusal) reaches the audit log without the password.
func TestAuditURLRedactsCredentials(t *testing.T) {
	for _, raw := range []string{"http://u:p@127.0.0.1:18091/", "https://user:s3cret@shop.example/hooks?x=1", "http://s3cret@shop.example/", "http://u:p@[bad/"} {
		got := auditURL(raw)
		if strings.Contains(got, "s3cret") || strings.Contains(got, "u:p") || strings.Contains(got, ":p@") {
			t.Errorf("auditURL(%q) = %q, keeps the credentials", raw, got)
		}
	}
	if got := auditURL("https://shop.example/hooks?x=1"); got != "https://shop.example/hooks?x=1" {
		t.Errorf("auditURL(plain) = %q, want it as it was", got)
	}
}

// TestEndpointShownAsCalled: an endpoint stored before payd refused URLs
// not written as it calls them (or set by PAYD_NOTIFY_URL) is shown as
// payd calls it; one written that way is shown as it is.
func TestEndpointShownAsCalled(t *testing.T) {
	for raw, want := range map[string]string{
		"HTTPS://shop.example/payd events":     "https://shop.example/payd%20events",
		"https://shop.example/payd-events?x=1": "https://shop.example/payd-events?x=1",
		"https://shop.example/a/%7e/b":         "https://shop.example/a/%7e/b",
	} {
		if got := toEndpointJSON(domain.Endpoint{ID: "e1", URL: raw}).URL; got != want {
			t.Errorf("endpoint %q shown as %q, want %q", raw, got, want)
		}
	}
}
