package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// oddIDs are path ids no payd row can have: one character too long, far
// too long, invalid UTF-8, a UUID of the wrong shape, SQL-ish text.
var oddIDs = []string{
	strings.Repeat("a", 37),
	strings.Repeat("0", 600),
	"%ff",
	"%ff%fe" + strings.Repeat("x", 30),
	"00000000-0000-0000-0000-00000000000g",
	"1'%20OR%20'1'='1",
}

// TestOddPathIDs: every route that takes an id answers a 4xx problem for an
// id that cannot exist — never a 500 — identically on both databases, and
// an operator action with such an id is still on the audit trail.
func TestOddPathIDs(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("odd-ids@example.com")
		realOrder := s.paidOrder(tok, "10.00")
		realRun := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]string{
			"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"})
		if realRun.Status != http.StatusCreated {
			t.Fatalf("reconcile = %d %s, want 201", realRun.Status, realRun.Body)
		}
		runID := realRun.json(t)["id"].(string)

		for _, id := range oddIDs {
			calls := []struct {
				method, path, token string
				body                any
				want                string
			}{
				{"GET", "/v1/orders/" + id, tok, nil, "order_not_found"},
				{"POST", "/v1/orders/" + id + "/pay", tok, map[string]string{"payment_method": "pm_ok"}, "order_not_found"},
				{"POST", "/v1/orders/" + id + "/cancel", tok, nil, "order_not_found"},
				{"GET", "/v1/orders/" + id + "/events", tok, nil, "order_not_found"},
				{"GET", "/v1/admin/orders/" + id, testAdminToken, nil, "order_not_found"},
				{"POST", "/v1/admin/orders/" + id + "/refund", testAdminToken, map[string]string{"reason": "odd"}, "order_not_found"},
				{"GET", "/v1/admin/reconciliations/" + id, testAdminToken, nil, "reconciliation_not_found"},
				{"POST", resolvePath(id, uuid.NewString()), testAdminToken, map[string]string{"action": "ignore"}, "reconciliation_not_found"},
				{"POST", resolvePath(runID, id), testAdminToken, map[string]string{"action": "ignore"}, "discrepancy_not_found"},
			}
			for _, c := range calls {
				key := uuid.NewString()
				r := s.do(request{method: c.method, path: c.path, token: c.token, key: key, body: c.body})
				if r.Status != http.StatusNotFound || r.code(t) != c.want {
					t.Errorf("%s %.60s = %d %s, want 404 %s", c.method, c.path, r.Status, r.Body, c.want)
				}
				if c.token == testAdminToken && c.method == "POST" {
					if n := s.count("audit_log WHERE request_id = ? AND result = 404", key); n != 1 {
						t.Errorf("%s %.60s: %d audit entries with result 404, want 1", c.method, c.path, n)
					}
				}
			}
		}
		// Keys in paths are checked the same way: 400 idempotency_key_invalid.
		for _, p := range []string{"/v1/requests/" + strings.Repeat("k", 256), "/v1/requests/%ff"} {
			if r := s.do(request{method: "GET", path: p, token: tok}); r.Status != http.StatusBadRequest || r.code(t) != "idempotency_key_invalid" {
				t.Errorf("GET %.60s = %d %s, want 400 idempotency_key_invalid", p, r.Status, r.Body)
			}
		}
		for _, p := range []string{"/v1/admin/idempotency/admin/" + strings.Repeat("k", 256), "/v1/admin/idempotency/admin/%ff",
			"/v1/admin/idempotency/" + strings.Repeat("s", 300) + "/k"} {
			r := s.do(request{method: "GET", path: p, token: testAdminToken})
			if r.Status != http.StatusBadRequest && r.Status != http.StatusNotFound {
				t.Errorf("GET %.60s = %d %s, want 400 or 404", p, r.Status, r.Body)
			}
		}
		// A malformed key on an operator action is refused and still audited.
		long := strings.Repeat("k", 300)
		if r := s.refund(realOrder, long, ""); r.Status != http.StatusBadRequest || r.code(t) != "idempotency_key_invalid" {
			t.Errorf("refund with a 300-character key = %d %s, want 400 idempotency_key_invalid", r.Status, r.Body)
		}
		if n := s.count("audit_log WHERE order_id = ? AND result = 400", realOrder); n != 1 {
			t.Errorf("refund with a 300-character key: %d audit entries, want 1", n)
		}
		// Filters in the query string get the same care: no 500.
		for _, q := range []string{"customer=%ff", "customer=" + strings.Repeat("c", 600), "cursor=%ff", "status=%ff"} {
			if r := s.admin("GET", "/v1/admin/orders?"+q, "", nil); r.Status >= 500 {
				t.Errorf("GET /v1/admin/orders?%.40s = %d %s, want no 5xx", q, r.Status, r.Body)
			}
			if r := s.do(request{method: "GET", path: "/v1/orders?" + q, token: tok}); r.Status >= 500 {
				t.Errorf("GET /v1/orders?%.40s = %d %s, want no 5xx", q, r.Status, r.Body)
			}
		}
		// The real ones still work.
		if r := s.do(request{method: "GET", path: "/v1/orders/" + realOrder, token: tok}); r.Status != http.StatusOK {
			t.Errorf("GET real order = %d %s, want 200", r.Status, r.Body)
		}
		if r := s.admin("GET", "/v1/admin/reconciliations/"+runID, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET real run = %d %s, want 200", r.Status, r.Body)
		}
	})
}
