package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestReconcileFileLineNamingAnotherCharge: a settlement file's charge
// line under a real attempt's key that names another charge, or another
// order, than the attempt's is not matched: the file does not bear out the
// payment, and a discrepancy names the line; so is a line naming a charge
// the provider does not have, under an attempt whose charge payd does not
// know yet. The right line matches.
func TestReconcileFileLineNamingAnotherCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
		line := func(o domain.Order) domain.Charge {
			t.Helper()
			ch := w.charges(t, o.ID)[0]
			return domain.Charge{ID: ch.ID, IdempotencyKey: ch.Key, OrderID: o.ID, Amount: o.Amount, Currency: string(o.Currency),
				Status: domain.ChargeSucceeded, CreatedAt: w.clock.Now()}
		}
		right := w.paidOrder(t, cust, "10.00")
		wrongCharge := w.paidOrder(t, cust, "11.00")
		wrongOrder := w.paidOrder(t, cust, "12.00")
		other := w.order(t, cust, "12.00")

		unknown := w.order(t, cust, "13.00") // payd knows no charge of its attempt: the provider is asked
		w.loseNextCharge()
		if got, err := w.pay(cust, unknown.ID, newKey(), "pm_ok"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("pay with its charge lost = %s, %v; want processing, the outcome unknown", got.Status, err)
		}
		ua := w.attempts(t, cust, unknown.ID)[0]
		bad3 := domain.Charge{ID: "ch_the_provider_never_made", IdempotencyKey: ua.ID, OrderID: unknown.ID, Amount: unknown.Amount,
			Currency: string(unknown.Currency), Status: domain.ChargeSucceeded, CreatedAt: w.clock.Now()}

		bad1 := line(wrongCharge)
		bad1.ID = "ch_not_this_attempts"
		bad2 := line(wrongOrder)
		bad2.OrderID = other.ID
		run, err := w.reconciler.Run(context.Background(), service.ReconcileRequest{From: from, To: to,
			File: settlementOf(line(right), bad1, bad2, bad3)})
		if err != nil {
			t.Fatal(err)
		}
		if run.Matched != 1 || run.Found != 3 {
			t.Errorf("run = matched %d found %d, want 1 matched (the right line) and 3 found", run.Matched, run.Found)
		}
		for _, tt := range []struct {
			name string
			o    domain.Order
			line domain.Charge
		}{{"another charge", wrongCharge, bad1}, {"another order", wrongOrder, bad2}, {"a charge the provider never made", unknown, bad3}} {
			ds := w.discrepanciesOf(t, tt.o.ID)
			if len(ds) != 1 || ds[0].Status != domain.DiscrepancyOpen || ds[0].AttemptID != tt.line.IdempotencyKey || ds[0].Reference != tt.line.ID {
				t.Errorf("%s: discrepancies = %+v, want one open about the line's charge %s", tt.name, ds, tt.line.ID)
			}
		}
		if ds := w.discrepanciesOf(t, right.ID); len(ds) != 0 {
			t.Errorf("right line: discrepancies = %+v, want none", ds)
		}
	})
}
