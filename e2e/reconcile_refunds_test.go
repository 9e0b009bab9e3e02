package e2e

import (
	"context"
	"github.com/payd/payd/client"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

// refundWindow is a reconciliation window around a test's refunds.
type refundWindow struct{ from, to time.Time }

func newRefundWindow() refundWindow {
	return refundWindow{from: time.Now().UTC().Add(-time.Minute).Truncate(time.Second), to: time.Now().UTC().Add(time.Hour).Truncate(time.Second)}
}

// reconcileRefunds runs a reconciliation of w against the provider's lists
// (csv empty) or an uploaded settlement file, and decodes the run.
func (s *stack) reconcileRefunds(w refundWindow, dry bool, csv string) (reply, client.Run) {
	s.t.Helper()
	var r reply
	if csv != "" {
		r = s.uploadSettlement(uuid.NewString(), w.from, w.to, dry, csv)
	} else {
		body := map[string]any{"from": w.from.Format(time.RFC3339), "to": w.to.Format(time.RFC3339), "dry_run": dry}
		r = s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), body)
	}
	want := http.StatusCreated
	if dry {
		want = http.StatusOK
	}
	if r.Status != want {
		s.t.Fatalf("reconcile (dry %v) = %d %s, want %d", dry, r.Status, r.Body, want)
	}
	return r, decode[client.Run](s.t, r)
}

// refundFindings returns the run's discrepancies by "type reference",
// failing unless the run found exactly the wanted ones.
func (s *stack) refundFindings(run client.Run, want ...string) map[string]client.Discrepancy {
	s.t.Helper()
	w := map[string]string{}
	for _, k := range want {
		w[k] = ""
	}
	return s.checkFound(run.Discrepancies, w)
}

// refundDirectly refunds amount of a charge straight at the sandbox, under
// a key payd never used: a refund from the provider's dashboard.
func (s *stack) refundDirectly(chargeID, amount string) domain.ProviderRefund {
	s.t.Helper()
	r, err := s.directProvider().Refund(s.t.Context(), domain.ProviderRefundRequest{
		IdempotencyKey: "dash-" + uuid.NewString(), ChargeID: chargeID, Amount: decimal.RequireFromString(amount), Currency: "USD", Reason: "dashboard",
	})
	if err != nil || r.Status != domain.ChargeSucceeded {
		s.t.Fatalf("Refund(%s, %s) at the sandbox = %+v, %v; want succeeded", chargeID, amount, r, err)
	}
	return r
}

// outsideEntries counts the ledger's outside refund entries of a provider refund.
func (s *stack) outsideEntries(refundID string) int64 {
	s.t.Helper()
	return s.count("ledger_entries WHERE kind = 'outside_refund' AND reference = ?", domain.RefundReference(refundID))
}

// TestReconcileOutsideRefund: a refund made straight at the provider,
// bypassing payd, of a paid order is found by a run against the provider's
// refund list as refund_missing_locally, recorded at once as an outside
// refund (the order reads it refunded, in full: status refunded) and kept,
// resolved, as the trace; a dry run before records nothing, and a second
// run finds nothing new. When the provider's webhook told payd first, the
// run agrees and records nothing more: the refund is booked once either way.
func TestReconcileOutsideRefund(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, tok := s.register("outside@example.com")
		w := newRefundWindow()
		id := s.paidOrder(tok, "10.00")
		re := s.refundDirectly(s.sandboxCharge(id, "succeeded"), "10.00")
		ref := "refund_missing_locally " + domain.RefundReference(re.ID)

		_, dry := s.reconcileRefunds(w, true, "")
		if f := s.refundFindings(dry, ref)[ref]; f.Status != "open" || dry.New != 0 {
			t.Errorf("dry run found %+v (new %d), want it open and nothing new", f, dry.New)
		}
		if n := s.count("discrepancies") + s.outsideEntries(re.ID); n != 0 {
			t.Errorf("a dry run recorded %d rows, want 0", n)
		}
		if o := s.timeline(id).Order; o.Status != "paid" || o.RefundedAmount != "0.00" {
			t.Errorf("order after the dry run = %s, %s refunded; want paid, 0.00", o.Status, o.RefundedAmount)
		}

		_, run := s.reconcileRefunds(w, false, "")
		f := s.refundFindings(run, ref)[ref]
		if run.New != 1 || f.Status != "resolved" || f.Resolution == nil || *f.Resolution != "recorded" || f.ProviderAmount == nil || *f.ProviderAmount != "10.00" {
			t.Errorf("run found %+v (new %d), want it new, resolved as recorded, for 10.00", f, run.New)
		}
		if f.OrderId == nil || *f.OrderId != id {
			t.Errorf("finding's order = %v, want %s", f.OrderId, id)
		}
		if o := s.timeline(id).Order; o.Status != "refunded" || o.RefundedAmount != "10.00" {
			t.Errorf("order after the run = %s, %s refunded; want refunded, 10.00", o.Status, o.RefundedAmount)
		}
		if n := s.outsideEntries(re.ID); n != 1 {
			t.Errorf("outside refund entries = %d, want 1", n)
		}
		if n := s.count("audit_log WHERE action = 'outside_refund' AND order_id = ? AND actor = 'provider'", id); n != 1 {
			t.Errorf("audit rows of the outside refund = %d, want 1", n)
		}

		_, again := s.reconcileRefunds(w, false, "")
		if again.New != 0 {
			t.Errorf("second run = %d new, want 0: %+v", again.New, again.Discrepancies)
		}
		if o := s.timeline(id).Order; o.RefundedAmount != "10.00" || s.outsideEntries(re.ID) != 1 {
			t.Errorf("after a second run the order refunded %s (%d entries), want 10.00 once", o.RefundedAmount, s.outsideEntries(re.ID))
		}

		// The webhook first: payd books it from the event, and the run agrees.
		other := s.paidOrder(tok, "8.00")
		re2 := s.refundDirectly(s.sandboxCharge(other, "succeeded"), "3.00")
		for _, d := range s.webhookOf(re2.ID) {
			if r := s.deliver(d); r.Status != http.StatusOK {
				t.Fatalf("refund webhook = %d %s, want 200", r.Status, r.Body)
			}
		}
		_, run = s.reconcileRefunds(w, false, "")
		if run.New != 0 {
			t.Errorf("run after the webhook = %d new, want 0: %+v", run.New, run.Discrepancies)
		}
		if o := s.timeline(other).Order; o.Status != "paid" || o.RefundedAmount != "3.00" || s.outsideEntries(re2.ID) != 1 {
			t.Errorf("order refunded by webhook, then reconciled = %s, %s refunded (%d entries); want paid, 3.00 once", o.Status, o.RefundedAmount, s.outsideEntries(re2.ID))
		}
	})
}

// webhookOf returns the sandbox's undelivered events about a refund.
func (s *stack) webhookOf(refundID string) []sandbox.Delivery {
	s.t.Helper()
	all, err := s.sandbox.Deliveries(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	var out []sandbox.Delivery
	for _, d := range all {
		if d.Type == string(domain.EventRefundSucceeded) && strings.Contains(string(d.Payload), refundID) {
			out = append(out, d)
		}
	}
	if len(out) != 1 {
		s.t.Fatalf("refund events of %s = %d, want 1", refundID, len(out))
	}
	return out
}

// TestReconcileSettlementRefunds: a settlement file that lists a charge and
// a refund payd never made records that refund as an outside refund (the
// provider confirms it), once however often the file is uploaded; a
// refund line the provider does not have moves no money: it is a
// refund_amount_mismatch for an operator, and the order's books do not
// change.
func TestReconcileSettlementRefunds(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, tok := s.register("filed@example.com")
		w := newRefundWindow()
		id := s.paidOrder(tok, "10.00")
		chargeID := s.sandboxCharge(id, "succeeded")
		re := s.refundDirectly(chargeID, "4.00")
		file := s.settlementCSV()
		if !strings.Contains(file, ","+re.ID+"\n") {
			t.Fatalf("the settlement does not name refund %s:\n%s", re.ID, file)
		}
		ref := "refund_missing_locally " + domain.RefundReference(re.ID)

		_, run := s.reconcileRefunds(w, false, file)
		f := s.refundFindings(run, ref)[ref]
		if run.Source != "csv" || run.New != 1 || f.Status != "resolved" || f.Resolution == nil || *f.Resolution != "recorded" {
			t.Errorf("file run found %+v (source %s, new %d), want it new and recorded", f, run.Source, run.New)
		}
		if o := s.timeline(id).Order; o.Status != "paid" || o.RefundedAmount != "4.00" || s.outsideEntries(re.ID) != 1 {
			t.Errorf("order after the file = %s, %s refunded (%d entries); want paid, 4.00 once", o.Status, o.RefundedAmount, s.outsideEntries(re.ID))
		}

		// A refund the provider never made, on the file's word alone.
		forged := strings.Join([]string{chargeID, "", id, "refund", "succeeded", "3.00", "USD", time.Now().UTC().Format(time.RFC3339), "re_forged"}, ",") + "\n"
		bad := "refund_amount_mismatch " + domain.RefundReference("re_forged")
		_, dry := s.reconcileRefunds(w, true, file+forged)
		s.refundFindings(dry, ref, bad)
		_, run = s.reconcileRefunds(w, false, file+forged)
		f = s.refundFindings(run, ref, bad)[bad]
		if f.Status != "open" || s.outsideEntries("re_forged") != 0 {
			t.Errorf("forged refund line = %+v (%d entries), want an open refund_amount_mismatch and nothing booked", f, s.outsideEntries("re_forged"))
		}
		if run.New != 1 {
			t.Errorf("run with the forged line = %d new, want 1", run.New)
		}
		if o := s.timeline(id).Order; o.Status != "paid" || o.RefundedAmount != "4.00" {
			t.Errorf("order after the forged line = %s, %s refunded; want paid, 4.00", o.Status, o.RefundedAmount)
		}

		_, again := s.reconcileRefunds(w, false, file+forged)
		if again.New != 0 || s.outsideEntries(re.ID) != 1 {
			t.Errorf("second upload = %d new (%d entries), want 0 new, the refund booked once", again.New, s.outsideEntries(re.ID))
		}
		// The same refund found against the provider's list is the same finding.
		_, prov := s.reconcileRefunds(w, false, "")
		if prov.New != 0 {
			t.Errorf("provider run after the file = %d new, want 0: %+v", prov.New, prov.Discrepancies)
		}
	})
}

// TestReconcileRefundDisagreements: payd's own succeeded refund the
// provider does not list is refund_missing_at_provider, and one the
// provider lists for another amount is refund_amount_mismatch — against
// the provider's list and the settlement file alike, each recorded once;
// payd's refund that agrees is no finding. Nothing is booked for either.
func TestReconcileRefundDisagreements(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, tok := s.register("disagree@example.com")
		w := newRefundWindow()
		ctx := context.Background()

		agreed := s.paidOrder(tok, "5.00")
		if r := s.refund(agreed, uuid.NewString(), "2.00"); r.Status != http.StatusOK {
			t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
		}

		// payd's books hold a succeeded refund the provider never made.
		ghost := s.paidOrder(tok, "6.00")
		s.localRefund(ctx, ghost, s.sandboxCharge(ghost, "succeeded"), "ghost-"+uuid.NewString(), "re_ghost", "1.00")

		// payd's books hold 3.00 for a refund the provider made for 2.00.
		short := s.paidOrder(tok, "7.00")
		chargeID := s.sandboxCharge(short, "succeeded")
		key := "short-" + uuid.NewString()
		re, err := s.directProvider().Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: key, ChargeID: chargeID, Amount: decimal.RequireFromString("2.00"), Currency: "USD"})
		if err != nil {
			t.Fatal(err)
		}
		s.localRefund(ctx, short, chargeID, key, re.ID, "3.00")

		missing := "refund_missing_at_provider " + domain.RefundReference("re_ghost")
		mismatch := "refund_amount_mismatch " + domain.RefundReference(re.ID)
		for i, file := range []string{"", s.settlementCSV()} {
			_, run := s.reconcileRefunds(w, false, file)
			found := s.refundFindings(run, missing, mismatch)
			wantNew := 2
			if i > 0 {
				wantNew = 0 // the file finds what the provider's list found
			}
			if run.New != wantNew {
				t.Errorf("run %d = %d new, want %d", i, run.New, wantNew)
			}
			if m := found[missing]; m.Status != "open" || m.LocalAmount == nil || *m.LocalAmount != "1.00" || m.OrderId == nil || *m.OrderId != ghost {
				t.Errorf("missing at provider = %+v, want open, 1.00 of %s", m, ghost)
			}
			if m := found[mismatch]; m.Status != "open" || m.LocalAmount == nil || *m.LocalAmount != "3.00" || m.ProviderAmount == nil || *m.ProviderAmount != "2.00" {
				t.Errorf("refund amount mismatch = %+v, want open, local 3.00, provider 2.00", m)
			}
		}
		if n := s.count("ledger_entries WHERE kind = 'outside_refund'"); n != 0 {
			t.Errorf("outside refund entries = %d, want 0", n)
		}
		if o := s.timeline(short).Order; o.RefundedAmount != "0.00" {
			t.Errorf("order with the mismatched refund refunded %s, want 0.00 (the row was written behind payd's back)", o.RefundedAmount)
		}
	})
}

// localRefund writes into payd's refunds, through its store, a refund of
// amount of orderID's charge that succeeded as the provider's refundID.
func (s *stack) localRefund(ctx context.Context, orderID, chargeID, key, refundID, amount string) {
	s.t.Helper()
	store, now := repository.NewRefundStore(s.db), time.Now().UTC()
	r := domain.Refund{ID: uuid.NewString(), OrderID: orderID, ChargeID: chargeID, Kind: domain.RefundManual, ProviderKey: key,
		Amount: decimal.RequireFromString(amount), Currency: "USD", Status: domain.RefundPending, Reason: "test", CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, r); err != nil {
		s.t.Fatal(err)
	}
	if ok, err := store.Finish(ctx, r.ID, domain.RefundSucceeded, refundID, now); err != nil || !ok {
		s.t.Fatalf("Finish(%s) = %v, %v", r.ID, ok, err)
	}
}
