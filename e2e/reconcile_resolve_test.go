package e2e

import (
	"bytes"
	"encoding/json"
	"github.com/payd/payd/client"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// pick returns the found discrepancy of type typ about orderID.
func (s *stack) pick(found map[string]client.Discrepancy, typ, orderID string) client.Discrepancy {
	s.t.Helper()
	for _, d := range found {
		if string(d.Type) == typ && d.OrderId != nil && *d.OrderId == orderID {
			return d
		}
	}
	s.t.Fatalf("no %s discrepancy about order %s", typ, orderID)
	return client.Discrepancy{}
}

// refuseMisfits sends resolutions that cannot be carried out and checks
// each is a 4xx problem that leaves every discrepancy open and refunds
// nothing.
func (s *stack) refuseMisfits(run client.Run, found map[string]client.Discrepancy, st staged) {
	s.t.Helper()
	stranger := s.pick(found, "missing_local_payment", st.stranger)
	phantom := s.pick(found, "missing_provider_charge", st.phantom)
	dup := s.pick(found, "duplicate_charge", st.dup)
	action := func(a string) map[string]string { return map[string]string{"action": a, "note": "ops"} }
	misfitKey := uuid.NewString()
	tests := []struct {
		name, path, key string
		body            any
		status          int
		code            string
	}{
		{"apply a charge no attempt names", resolvePath(run.Id, stranger.Id), misfitKey, action("apply"), 409, "resolution_not_applicable"},
		{"apply a missing provider charge", resolvePath(run.Id, phantom.Id), uuid.NewString(), action("apply"), 409, "resolution_not_applicable"},
		{"refund a charge that does not exist", resolvePath(run.Id, phantom.Id), uuid.NewString(), action("refund"), 409, "resolution_not_applicable"},
		{"unknown action", resolvePath(run.Id, dup.Id), uuid.NewString(), action("delete"), 400, "validation_failed"},
		{"note too long", resolvePath(run.Id, dup.Id), uuid.NewString(),
			map[string]string{"action": "refund", "note": strings.Repeat("n", 1001)}, 400, "validation_failed"},
		{"no key", resolvePath(run.Id, dup.Id), "", action("refund"), 400, "idempotency_key_missing"},
		{"unknown discrepancy", resolvePath(run.Id, uuid.NewString()), uuid.NewString(), action("ignore"), 404, "discrepancy_not_found"},
		{"unknown run", resolvePath(uuid.NewString(), dup.Id), uuid.NewString(), action("refund"), 404, "reconciliation_not_found"},
	}
	for _, tt := range tests {
		r := s.admin("POST", tt.path, tt.key, tt.body)
		if r.Status != tt.status || r.code(s.t) != tt.code {
			s.t.Errorf("%s: resolve = %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
		}
	}
	if r := s.admin("GET", "/v1/admin/reconciliations/"+uuid.NewString(), "", nil); r.Status != http.StatusNotFound || r.code(s.t) != "reconciliation_not_found" {
		s.t.Errorf("GET an unknown run = %d %s, want 404 reconciliation_not_found", r.Status, r.Body)
	}
	if n := s.count("discrepancies WHERE status = 'open'"); n != int64(len(st.want)) {
		s.t.Errorf("open discrepancies after the misfits = %d, want %d", n, len(st.want))
	}
	if n := s.count("refunds"); n != 0 {
		s.t.Errorf("refunds after the misfits = %d, want 0", n)
	}
	// Asked again under the same key, the refusal is answered again; both
	// attempts are on the order's timeline with their outcome.
	if r := s.admin("POST", resolvePath(run.Id, stranger.Id), misfitKey, action("apply")); r.Status != http.StatusConflict || r.code(s.t) != "resolution_not_applicable" {
		s.t.Errorf("the refused resolution asked again = %d %s, want 409 resolution_not_applicable", r.Status, r.Body)
	}
	if n := s.auditRows("resolve_discrepancy", misfitKey, http.StatusConflict); n != 2 {
		s.t.Errorf("audit rows for the refused resolution = %d, want 2", n)
	}
	got := s.onTimeline(st.stranger, "resolve_discrepancy", misfitKey, stranger.Id)
	if len(got) != 2 {
		s.t.Errorf("the refused resolution on order %s's audit trail = %+v, want both attempts", st.stranger, got)
	}
	for _, a := range got {
		if a.Result != http.StatusConflict || a.Code == nil || *a.Code != "resolution_not_applicable" {
			s.t.Errorf("refused resolution on the timeline = %+v, want 409 resolution_not_applicable", a)
		}
	}
}

// resolveAll resolves each found discrepancy with the action that fits it
// and checks that resolving is idempotent and audited: the same key replays
// the answer, another key with the same action agrees, another action is
// 409. The duplicate charge is resolved by five operators at once.
func (s *stack) resolveAll(run client.Run, found map[string]client.Discrepancy, want map[string]string) {
	s.t.Helper()
	other := map[string]string{"apply": "ignore", "refund": "ignore", "ignore": "refund"}
	for k, act := range want {
		d := found[k]
		path, body := resolvePath(run.Id, d.Id), map[string]string{"action": act, "note": "checked by ops"}
		if d.Type == "duplicate_charge" {
			for _, r := range parallel(5, func(int) reply { return s.admin("POST", path, uuid.NewString(), body) }) {
				if got := decode[client.Discrepancy](s.t, r); r.Status != http.StatusOK || got.Status != "resolved" {
					s.t.Errorf("concurrent resolve of %s = %d %s, want 200 resolved", k, r.Status, r.Body)
				}
			}
		}
		key := uuid.NewString()
		r := s.admin("POST", path, key, body)
		got := decode[client.Discrepancy](s.t, r)
		if r.Status != http.StatusOK || got.Status != "resolved" || got.Resolution == nil || string(*got.Resolution) != act || got.Id != d.Id {
			s.t.Errorf("resolve %s with %s = %d %s, want 200 resolved by %s", k, act, r.Status, r.Body, act)
			continue
		}
		if again := s.admin("POST", path, key, body); again.Status != http.StatusOK || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			s.t.Errorf("resolve %s replay = %d %s (replayed %q), want the first answer replayed", k, again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}
		if same := s.admin("POST", path, uuid.NewString(), body); same.Status != http.StatusOK || decode[client.Discrepancy](s.t, same).Status != "resolved" {
			s.t.Errorf("resolve %s again with %s, another key = %d %s, want 200", k, act, same.Status, same.Body)
		}
		diff := s.admin("POST", path, uuid.NewString(), map[string]string{"action": other[act], "note": "changed my mind"})
		if diff.Status != http.StatusConflict || diff.code(s.t) != "discrepancy_already_resolved" {
			s.t.Errorf("resolve %s with %s after %s = %d %s, want 409 discrepancy_already_resolved", k, other[act], act, diff.Status, diff.Body)
		}
		for _, replayed := range []string{"false", "true"} {
			n := s.count("audit_log WHERE actor = 'admin' AND action = 'resolve_discrepancy' AND request_id = ? AND result = 200 AND detail LIKE ?",
				key, `%"replayed":`+replayed+`%`)
			if n != 1 {
				s.t.Errorf("audit rows for resolving %s (replayed %s) = %d, want 1", k, replayed, n)
			}
		}
		// The answer and its replay are both on the order's timeline.
		if got := s.onTimeline(*d.OrderId, "resolve_discrepancy", key, d.Id); len(got) != 2 || got[0].Result != 200 || got[1].Result != 200 || got[0].Replayed == got[1].Replayed {
			s.t.Errorf("resolving %s (key %s) on order %s's audit trail = %+v, want the answer and its replay", k, key, *d.OrderId, got)
		}
	}
}

// onTimeline returns the entries of an order's audit trail that show the
// action made under key about target.
func (s *stack) onTimeline(orderID, action, key, target string) []client.AuditEntry {
	s.t.Helper()
	var out []client.AuditEntry
	for _, a := range s.timeline(orderID).Audit {
		if a.Action == action && a.RequestId != nil && *a.RequestId == key && a.Target != nil && *a.Target == target && a.Actor == "admin" {
			out = append(out, a)
		}
	}
	return out
}

// checkResolved checks the books after every resolution: what was applied
// is paid, what was refunded is back with the customer in full (once),
// what was ignored or kept is untouched.
func (s *stack) checkResolved(st staged) {
	s.t.Helper()
	for id, want := range map[string]string{st.paid: "paid", st.lost: "paid", st.stuck: "paid", st.dup: "paid",
		st.closed: "cancelled", st.phantom: "paid", st.stranger: "pending"} {
		if o := s.timeline(id).Order; string(o.Status) != want || o.RefundedAmount != "0.00" {
			s.t.Errorf("order %s = %s with %s refunded, want %s with none", id, o.Status, o.RefundedAmount, want)
		}
	}
	// The mismatched charge is the order's payment in payd's books: it was
	// refunded through the order (10.00), and what the provider took
	// beyond the order (2.00) given back besides.
	if o := s.timeline(st.mismatch).Order; o.Status != "refunded" || o.RefundedAmount != "10.00" {
		s.t.Errorf("order %s = %s with %s refunded, want refunded with 10.00", st.mismatch, o.Status, o.RefundedAmount)
	}
	if n := s.count("refunds WHERE order_id = ? AND kind = 'manual' AND status = 'succeeded' AND amount_minor = 1000", st.mismatch); n != 1 {
		s.t.Errorf("manual refunds of the mismatched order = %d, want one of 10.00", n)
	}
	if n := s.count("payment_attempts WHERE order_id = ? AND status = 'succeeded'", st.lost); n != 1 {
		s.t.Errorf("succeeded attempts of the applied order = %d, want 1", n)
	}
	charges, err := s.sandbox.Charges(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	amount := map[string]string{}
	for _, c := range charges {
		amount[c.ID] = c.Amount.StringFixed(2)
	}
	for _, c := range st.refunded {
		if got := s.providerRefunded(c); got != amount[c] {
			s.t.Errorf("provider refunded %s of charge %s, want all %s", got, c, amount[c])
		}
		if n, want := s.settlementRefunds(c), 1+btoi(c == st.mismatchCharge); n != want {
			s.t.Errorf("provider refunds of %s = %d, want %d", c, n, want)
		}
	}
	for _, c := range st.kept {
		if got := s.providerRefunded(c); got != "0.00" {
			s.t.Errorf("provider refunded %s of charge %s, want nothing", got, c)
		}
	}
	if n := s.count("refunds WHERE kind = 'auto' AND status = 'succeeded'"); n != int64(len(st.refunded)) || s.count("refunds") != n+1 {
		s.t.Errorf("refunds = %d succeeded automatic of %d, want %d and no other", n, s.count("refunds"), len(st.refunded))
	}
	if n := s.count("discrepancies WHERE status = 'resolved'"); n != int64(len(st.want)) {
		s.t.Errorf("resolved discrepancies = %d, want %d", n, len(st.want))
	}
}

// loggedFindings checks that each discrepancy run found new is logged as
// stored: "discrepancy recorded" with its id, its status and the run.
func (s *stack) loggedFindings(run client.Run) {
	s.t.Helper()
	logged := map[string]bool{}
	for line := range strings.SplitSeq(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "discrepancy recorded" {
			continue
		}
		if id, _ := m["discrepancy_id"].(string); id != "" && m["run_id"] == run.Id && m["status"] == "open" {
			logged[id] = true
		}
	}
	for _, d := range run.Discrepancies {
		if !logged[d.Id] {
			s.t.Errorf("no \"discrepancy recorded\" line with discrepancy_id %s, run_id %s and status open", d.Id, run.Id)
		}
	}
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
