package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestNamedOperators: with PAYD_ADMIN_TOKENS each operator's token opens
// the admin API beside the shared PAYD_ADMIN_TOKEN; the audit's actor is
// the operator's name, and the order's timeline shows each action's
// outcome — a refund answered 200, 409 and 400 alike, and a replay by
// another operator under the same key, and a refusal asked again — while
// no token reaches the log.
func TestNamedOperators(t *testing.T) {
	const alice, bob = "op-7Hq2xWv9Lr4Kp8Zt3Ny6Bc1Md5Fg0Js", "op-Qe3Rt7Yu1Io5Pa9Sd2Fg6Hj0Kl4Zx8Cv"
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_ADMIN_TOKENS": "alice:" + alice + ",bob:" + bob}))
		_, tok := s.register(newEmail())
		id := s.paidOrder(tok, "20.00")
		refund := func(token, key string, body map[string]string) reply {
			return s.do(request{method: "POST", path: "/v1/admin/orders/" + id + "/refund", token: token, key: key, body: body})
		}
		aliceKey, bobKey := uuid.NewString(), uuid.NewString()
		steps := []struct {
			who, token, key string
			body            map[string]string
			status          int
			code, outcome   string
			replayed        bool
		}{
			{"alice", alice, aliceKey, map[string]string{"amount": "5.00", "reason": "damaged"}, 200, "", "succeeded", false},
			{"bob", bob, bobKey, map[string]string{"amount": "100.00", "reason": "too much"}, 409, "refund_too_large", "refused", false},
			{"bob", bob, uuid.NewString(), map[string]string{"amount": "1.00", "reason": ""}, 400, "validation_failed", "refused", false},
			{"admin", testAdminToken, aliceKey, map[string]string{"amount": "5.00", "reason": "damaged"}, 200, "", "succeeded", true},
			// A refusal is not kept for replay: asked again, it is refused again.
			{"bob", bob, bobKey, map[string]string{"amount": "100.00", "reason": "too much"}, 409, "refund_too_large", "refused", false},
			// The idempotency layer's own refusals are recorded with their code too.
			{"bob", bob, aliceKey, map[string]string{"amount": "6.00", "reason": "damaged"}, 422, "idempotency_key_reused", "refused", false},
		}
		for _, st := range steps {
			if r := refund(st.token, st.key, st.body); r.Status != st.status || r.problemCode() != st.code {
				t.Fatalf("refund by %s = %d %s, want %d %s", st.who, r.Status, r.Body, st.status, st.code)
			}
		}
		if r := refund("op-nobody-0123456789abcdefghij", uuid.NewString(), steps[0].body); r.Status != http.StatusUnauthorized {
			t.Errorf("refund with an unknown token = %d, want 401", r.Status)
		}
		for token, want := range map[string]string{alice: "alice", bob: "bob", testAdminToken: "admin"} {
			r := s.do(request{method: "GET", path: "/v1/admin/whoami", token: token})
			if got := decode[struct{ Operator string }](t, r); r.Status != http.StatusOK || got.Operator != want {
				t.Errorf("whoami as %s = %d %s, want 200 %s", want, r.Status, r.Body, want)
			}
		}
		if r := s.do(request{method: "GET", path: "/v1/admin/whoami", token: tok}); r.Status != http.StatusForbidden {
			t.Errorf("whoami with a customer's token = %d, want 403", r.Status)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders", token: bob}); r.Status != http.StatusForbidden {
			t.Errorf("an operator's token on a customer route = %d, want 403", r.Status)
		}

		tl := s.timeline(id)
		if len(tl.Audit) != len(steps) {
			t.Fatalf("audit entries = %d, want %d (the unknown token is not an operator)", len(tl.Audit), len(steps))
		}
		var summaries []string
		for _, e := range tl.Timeline {
			if e.Kind == "audit" {
				summaries = append(summaries, e.Summary)
			}
		}
		for i, st := range steps {
			a := tl.Audit[i]
			code := ""
			if a.Code != nil {
				code = *a.Code
			}
			if a.Actor != st.who || a.Action != "refund" || a.Result != st.status || string(a.Outcome) != st.outcome || code != st.code || a.Replayed != st.replayed {
				t.Errorf("audit entry %d = %s %s %d %s code %q replayed %v, want %s refund %d %s code %q replayed %v",
					i, a.Actor, a.Action, a.Result, a.Outcome, code, a.Replayed, st.who, st.status, st.outcome, st.code, st.replayed)
			}
		}
		want := []string{"alice refund: 200 (succeeded)", "bob refund: 409 refund_too_large (refused)",
			"bob refund: 400 validation_failed (refused)", "admin refund: 200 (succeeded, replayed)",
			"bob refund: 409 refund_too_large (refused)", "bob refund: 422 idempotency_key_reused (refused)"}
		if !slices.Equal(summaries, want) {
			t.Errorf("the timeline's audit lines = %q, want %q", summaries, want)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 1 {
			t.Errorf("refunds = %d, want 1 (the replay did nothing)", n)
		}
		for _, secret := range []string{alice, bob, testAdminToken} {
			if strings.Contains(s.logs.String(), secret) {
				t.Errorf("a token is in the log")
			}
		}
	})
}
