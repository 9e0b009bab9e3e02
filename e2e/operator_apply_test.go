package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// TestApplyHeldMismatchAsksProvider: an operator's apply of a held
// amount_mismatch asks the provider first. While the provider still
// reports the charge for other money, apply is refused (409) and the order
// is not paid: refund is the operator's tool for that charge.
func TestApplyHeldMismatchAsksProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("apply-held@example.com")
		id, key := s.order(token, "20.00"), uuid.NewString()
		h.set(id, hostileRule{Amount: "20.01"}) // kept: the provider keeps saying 20.01
		wantMismatchProblem(t, "pay", s.pay(token, id, key, "pm_ok"))
		s.heldForOperator(id, key)
		d := s.discrepancies(id)[0]
		r := s.admin("POST", resolvePath(s.anyRun(), d.ID), uuid.NewString(), map[string]string{"action": "apply", "note": "looks fine"})
		if r.Status != http.StatusConflict || r.code(t) != "resolution_not_applicable" {
			t.Errorf("apply of a charge the provider reports for 20.01 = %d %s, want 409 resolution_not_applicable", r.Status, r.Body)
		}
		s.heldForOperator(id, key)
	})
}

// TestApplyMissingPaymentAsksProvider: a settlement file is the operator's
// upload, not the provider's word. A row claiming a success for an attempt
// the provider declined, under another charge than the attempt's, does not
// bear the payment out: a missing_provider_charge naming the row's charge,
// which apply does not fit (409), and the order stays unpaid.
func TestApplyMissingPaymentAsksProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, token := s.register("apply-csv@example.com")
		id := s.order(token, "9.00")
		if r := s.pay(token, id, uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay pm_declined = %d %s, want 402", r.Status, r.Body)
		}
		a := s.onlyAttempt(id)
		now := time.Now().UTC()
		csv := "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n" +
			fmt.Sprintf("ch_forged,%s,%s,charge,succeeded,9.00,USD,%s\n", a.ID, id, now.Add(-time.Minute).Format(time.RFC3339))
		run := s.uploadSettlement(uuid.NewString(), now.Add(-time.Hour), now.Add(time.Minute), false, csv)
		if run.Status != http.StatusCreated {
			t.Fatalf("upload = %d %s, want 201", run.Status, run.Body)
		}
		ds := s.discrepancies(id)
		if len(ds) != 1 || ds[0].Type != domain.MissingProviderCharge || ds[0].Reference != "ch_forged" {
			t.Fatalf("discrepancies = %+v, want one missing_provider_charge about the row's ch_forged", ds)
		}
		r := s.admin("POST", resolvePath(run.json(t)["id"].(string), ds[0].ID), uuid.NewString(), map[string]string{"action": "apply", "note": "the file says so"})
		if r.Status != http.StatusConflict || r.code(t) != "resolution_not_applicable" {
			t.Errorf("apply of a forged settlement row = %d %s, want 409 resolution_not_applicable", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status == domain.StatusPaid {
			t.Errorf("order = %s, want not paid by a charge the provider declined", o.Status)
		}
	})
}
