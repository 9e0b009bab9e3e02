package service_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

// TestReconcileMissingProviderCharge: an order payd counts as paid whose
// charge the provider's books do not list becomes a discrepancy, recorded
// once however often the window is reconciled; against the provider's own
// list the same order matches.
func TestReconcileMissingProviderCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "25.00")
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)

		run, err := w.reconcile(from, to)
		if err != nil || run.Found != 0 || run.Matched != 1 {
			t.Fatalf("reconcile against the provider = found %d matched %d, %v, want 0 and 1", run.Found, run.Matched, err)
		}

		run, err = w.reconcileEmptySettlement(from, to)
		if err != nil || run.Found != 1 || run.New != 1 {
			t.Fatalf("reconcile without the charge = found %d new %d, %v, want 1 and 1", run.Found, run.New, err)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.MissingProviderCharge || ds[0].Status != domain.DiscrepancyOpen {
			t.Fatalf("discrepancies = %+v, want one open missing_provider_charge", ds)
		}

		run, err = w.reconcileEmptySettlement(from, to)
		if err != nil || run.Found != 1 || run.New != 0 {
			t.Fatalf("reconcile again = found %d new %d, %v, want 1 and 0", run.Found, run.New, err)
		}
		if n := len(w.discrepanciesOf(t, o.ID)); n != 1 {
			t.Fatalf("discrepancies after a rerun = %d, want 1", n)
		}
	})
}

// TestReconcileChargePaydNeverMade: a successful provider charge under a
// key payd has no attempt for becomes a missing local payment.
func TestReconcileChargePaydNeverMade(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "9.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "9.00")
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)

		run, err := w.reconcile(from, to)
		if err != nil || run.Found != 1 || run.New != 1 || run.Matched != 0 {
			t.Fatalf("reconcile = found %d new %d matched %d, %v, want 1, 1, 0", run.Found, run.New, run.Matched, err)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment || !ds[0].ProviderAmount.Equal(money("9.00")) {
			t.Fatalf("discrepancies = %+v, want one missing_local_payment of 9.00", ds)
		}
	})
}

// TestReconcileWalksPages: a run reads the provider's list a page at a
// time and decides every charge on it, and a charge on one page still
// answers for its order when payd's paid orders are walked after the
// last page; a provider whose pages do not move on fails the run instead
// of holding it forever.
func TestReconcileWalksPages(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		for range 5 {
			w.paidOrder(t, cust, "4.00")
		}
		stray := w.order(t, cust, "9.00")
		w.chargeBehindPaydsBack(t, newKey(), stray.ID, "9.00")
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
		w.prov.mu.Lock()
		w.prov.listPage, w.prov.log = 2, nil
		w.prov.mu.Unlock()

		run, err := w.reconcile(from, to)
		if err != nil || run.Found != 1 || run.Matched != 5 {
			t.Fatalf("reconcile in pages of 2 = found %d matched %d, %v, want 1 and 5", run.Found, run.Matched, err)
		}
		if ds := w.discrepanciesOf(t, stray.ID); len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment {
			t.Fatalf("discrepancies = %+v, want one missing_local_payment", ds)
		}
		w.prov.mu.Lock()
		lists := slices.Clone(w.prov.log)
		w.prov.stuckList = true
		w.prov.mu.Unlock()
		if len(lists) != 3 {
			t.Errorf("pages asked for = %q, want 3 (six charges, two a page)", lists)
		}

		if _, err := w.reconcile(from, to); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Fatalf("reconcile while every page starts at the first = %v, want ErrProviderUnavailable", err)
		}
	})
}
