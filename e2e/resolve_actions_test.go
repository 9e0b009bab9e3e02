package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// actionsOf is the `actions` member of a refused resolution's problem;
// it fails the test when the member is missing or not a list of strings.
func (r reply) actionsOf(t *testing.T) []string {
	t.Helper()
	raw, ok := r.json(t)["actions"].([]any)
	if !ok {
		t.Fatalf("problem %s has no actions list", r.Body)
	}
	out := []string{}
	for _, a := range raw {
		s, ok := a.(string)
		if !ok {
			t.Fatalf("actions %v: %v is not a string", raw, a)
		}
		out = append(out, s)
	}
	return out
}

// TestRefusedResolutionNamesTheActionsThatFit: on both resolve routes, an
// action that does not fit is 409 resolution_not_applicable naming the
// actions that do, in the detail and as `actions`; an action refused once
// the provider was asked names the others; once resolved, another action
// is 409 discrepancy_already_resolved naming none.
func TestRefusedResolutionNamesTheActionsThatFit(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, tok := s.register(newEmail())
		stranger := s.order(tok, "5.00") // a charge no attempt of payd's names
		s.chargeDirectly(uuid.NewString(), stranger, "5.00")
		phantom := s.order(tok, "8.00") // paid in payd's books, no charge at the provider
		s.bookPayment(t.Context(), phantom, uuid.NewString(), "ch_never_made", "8.00")
		now := time.Now().UTC()
		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]string{
			"from": now.Add(-time.Hour).Format(time.RFC3339), "to": now.Add(time.Minute).Format(time.RFC3339)})
		if r.Status != http.StatusCreated {
			t.Fatalf("reconciliation run = %d %s, want 201", r.Status, r.Body)
		}
		run := r.json(t)["id"].(string)
		orphan := s.openOf(stranger, domain.MissingLocalPayment)
		missing := s.openOf(phantom, domain.MissingProviderCharge)
		routes := map[string]func(did string) string{
			"run":    func(did string) string { return resolvePath(run, did) },
			"direct": func(did string) string { return "/v1/admin/discrepancies/" + did + "/resolve" },
		}
		for name, path := range routes {
			tests := []struct {
				what, did, action, code string
				actions                 []string
			}{
				{"apply to a charge no attempt names", orphan.ID, "apply", "resolution_not_applicable", []string{"refund", "ignore"}},
				{"apply to a missing provider charge", missing.ID, "apply", "resolution_not_applicable", []string{"ignore"}},
				{"refund a charge the provider does not have", missing.ID, "refund", "resolution_not_applicable", []string{"ignore"}},
			}
			for _, tt := range tests {
				r := s.admin("POST", path(tt.did), uuid.NewString(), map[string]string{"action": tt.action})
				if r.Status != http.StatusConflict || r.code(t) != tt.code {
					t.Errorf("%s route, %s = %d %s, want 409 %s", name, tt.what, r.Status, r.Body, tt.code)
					continue
				}
				if got := r.actionsOf(t); !slices.Equal(got, tt.actions) {
					t.Errorf("%s route, %s: actions %v, want %v", name, tt.what, got, tt.actions)
				}
				if detail, _ := r.json(t)["detail"].(string); !strings.Contains(detail, strings.Join(tt.actions, ", ")) {
					t.Errorf("%s route, %s: detail %q does not name %v", name, tt.what, detail, tt.actions)
				}
			}
		}
		if n := s.count("discrepancies WHERE status = 'open'"); n != 2 {
			t.Errorf("open discrepancies after the refusals = %d, want 2", n)
		}
		if r := s.admin("POST", routes["direct"](missing.ID), uuid.NewString(), map[string]string{"action": "ignore", "note": "booked by hand"}); r.Status != http.StatusOK {
			t.Fatalf("ignore = %d %s, want 200", r.Status, r.Body)
		}
		for name, path := range routes {
			r := s.admin("POST", path(missing.ID), uuid.NewString(), map[string]string{"action": "apply"})
			if r.Status != http.StatusConflict || r.code(t) != "discrepancy_already_resolved" {
				t.Errorf("%s route, apply after ignore = %d %s, want 409 discrepancy_already_resolved", name, r.Status, r.Body)
			} else if got := r.actionsOf(t); len(got) != 0 {
				t.Errorf("%s route, apply after ignore: actions %v, want none", name, got)
			}
		}
	})
}
