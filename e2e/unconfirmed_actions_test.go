package e2e

import (
	"net/http"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// TestUnconfirmedMadeUpChargeActions: a signed success naming a charge the
// provider does not have is unconfirmed_payment; the actions it lists are
// exactly those resolving it accepts. It offers no refund (there is no
// charge to give back), and ignoring it resolves it.
func TestUnconfirmedMadeUpChargeActions(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register(newEmail())
		id, key := s.order(token, "25.00"), uuid.NewString()
		if r := s.pay(token, id, key, "pm_error"); r.Status != http.StatusAccepted {
			t.Fatalf("pay(pm_error) = %d %s, want 202", r.Status, r.Body)
		}
		a := s.onlyAttempt(id)
		evID := "evt_" + uuid.NewString()
		forged := payment{AttemptID: a.ID, ChargeID: "ch_made_up_" + a.ID[:8], OrderID: id, Amount: "25.00", Currency: "USD"}
		if r := s.sendEvent(evID, "payment.succeeded", forged); r.Status != http.StatusOK {
			t.Fatalf("forged success = %d %s, want 200", r.Status, r.Body)
		}
		ds := s.unconfirmedOf(id, evID)
		if len(ds) != 1 {
			t.Fatalf("unconfirmed_payment = %+v, want one", ds)
		}
		did := ds[0].ID
		got := decode[struct {
			Actions []string `json:"actions"`
		}](t, s.admin("GET", "/v1/admin/discrepancies/"+did, "", nil))
		if want := []string{domain.ActionIgnore}; !slices.Equal(got.Actions, want) {
			t.Errorf("actions = %v, want %v: the provider has no such charge to refund", got.Actions, want)
		}
		// Every action it does not list is refused, and each it lists is
		// carried out (ignore last: it resolves the discrepancy).
		for _, action := range []string{domain.ActionApply, domain.ActionRefund, domain.ActionIgnore} {
			r := s.admin("POST", "/v1/admin/discrepancies/"+did+"/resolve", uuid.NewString(), map[string]any{"action": action, "note": "checked"})
			listed := slices.Contains(got.Actions, action)
			refused := r.Status == http.StatusConflict && r.problemCode() == "resolution_not_applicable"
			if listed == refused {
				t.Errorf("resolve %s = %d %s; listed in actions: %v", action, r.Status, r.Body, listed)
			}
		}
	})
}
