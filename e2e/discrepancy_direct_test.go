package e2e

import (
	"bytes"
	"github.com/payd/payd/client"
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestDiscrepancyByID: a discrepancy found outside any run (a pay reply
// reporting another amount) is read and resolved by its ID alone while no
// run exists, with the run-scoped route's body, refusals, idempotency and
// audit trail, on both databases.
func TestDiscrepancyByID(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, tok := s.register("direct@example.com")
		order := s.order(tok, "500.00")
		h.set(order, hostileRule{Amount: "0.01"})
		if r := s.pay(tok, order, uuid.NewString(), "pm_ok"); r.Status != http.StatusBadGateway {
			t.Fatalf("pay with another amount = %d %s, want 502", r.Status, r.Body)
		}
		var did string
		for _, d := range s.timeline(order).Discrepancies {
			if d.Type == "amount_mismatch" {
				did = d.Id
			}
		}
		if did == "" {
			t.Fatalf("no amount_mismatch on order %s", order)
		}
		path := "/v1/admin/discrepancies/" + did

		r := s.admin("GET", path, "", nil)
		if got := decode[client.Discrepancy](t, r); r.Status != http.StatusOK || got.Id != did || got.RunId != nil || got.Status != "open" || got.OrderId == nil || *got.OrderId != order {
			t.Errorf("GET %s = %d %s, want 200, open, about order %s, no run", path, r.Status, r.Body, order)
		}
		ignore := map[string]string{"action": "ignore", "note": "refunded by hand"}
		for _, tt := range []struct {
			name, method, path, key string
			body                    any
			status                  int
			code                    string
		}{
			{"GET an unknown discrepancy", "GET", "/v1/admin/discrepancies/" + uuid.NewString(), "", nil, 404, "discrepancy_not_found"},
			{"GET a malformed id", "GET", "/v1/admin/discrepancies/not-an-id", "", nil, 404, "discrepancy_not_found"},
			{"resolve an unknown discrepancy", "POST", "/v1/admin/discrepancies/" + uuid.NewString() + "/resolve", uuid.NewString(), ignore, 404, "discrepancy_not_found"},
			{"resolve with no key", "POST", path + "/resolve", "", ignore, 400, "idempotency_key_missing"},
			{"unknown action", "POST", path + "/resolve", uuid.NewString(), map[string]string{"action": "delete"}, 400, "validation_failed"},
			{"through a run that does not exist", "POST", resolvePath(uuid.NewString(), did), uuid.NewString(), ignore, 404, "reconciliation_not_found"},
		} {
			if r := s.admin(tt.method, tt.path, tt.key, tt.body); r.Status != tt.status || r.code(t) != tt.code {
				t.Errorf("%s = %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
			}
		}

		key := uuid.NewString()
		r = s.admin("POST", path+"/resolve", key, ignore)
		if got := decode[client.Discrepancy](t, r); r.Status != http.StatusOK || got.Status != "resolved" || got.Resolution == nil || *got.Resolution != "ignore" || got.Note != "refunded by hand" {
			t.Fatalf("resolve by id = %d %s, want 200 resolved by ignore with the note", r.Status, r.Body)
		}
		if again := s.admin("POST", path+"/resolve", key, ignore); again.Status != http.StatusOK || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay = %d %s (replayed %q), want the first answer replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}
		refused := uuid.NewString()
		if diff := s.admin("POST", path+"/resolve", refused, map[string]string{"action": "refund"}); diff.Status != http.StatusConflict || diff.code(t) != "discrepancy_already_resolved" {
			t.Errorf("another action after ignore = %d %s, want 409 discrepancy_already_resolved", diff.Status, diff.Body)
		}
		if got := decode[client.Discrepancy](t, s.admin("GET", path, "", nil)); got.Status != "resolved" {
			t.Errorf("GET after resolving = %+v, want resolved", got)
		}
		if n := s.count("reconciliation_runs"); n != 0 {
			t.Errorf("runs = %d, want none", n)
		}
		if got := s.onTimeline(order, "resolve_discrepancy", key, did); len(got) != 2 || got[0].Replayed == got[1].Replayed {
			t.Errorf("the resolution on the order's audit trail = %+v, want it and its replay", got)
		}
		if got := s.onTimeline(order, "resolve_discrepancy", refused, did); len(got) != 1 || got[0].Result != http.StatusConflict {
			t.Errorf("the refused resolution on the order's audit trail = %+v, want one 409", got)
		}
	})
}
