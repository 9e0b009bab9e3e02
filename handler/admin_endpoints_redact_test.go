package handler

import (
	"strings"
	"testing"
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
