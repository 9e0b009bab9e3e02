package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// An outside refund that arrives while one of payd's refunds is in flight
// is counted on the order at once, and stays counted when the refund in
// flight is refused and its reservation released (issue 36, 1). The shop
// hears only what the provider confirmed: no event ever carries the
// reservation (issue 36, 2).
func TestOutsideRefundDuringARefundInFlight(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.chargeOf(t, cust, o)
		pr := w.outside(t, ch, "4.00") // refunded at the provider's dashboard
		w.prov.mu.Lock()
		w.prov.beforeRefund = func() {
			// While payd's 8.00 is on its way, the 4.00's webhook arrives.
			if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}")); err != nil {
				t.Errorf("Receive(refund.succeeded) = %v", err)
			}
			if got := w.get(t, cust, o.ID); got.Status != domain.StatusPaid || !got.RefundedAmount.Equal(dec("4.00")) {
				t.Errorf("order while 8.00 is in flight = %s refunded %s, want paid refunded 4.00", got.Status, got.RefundedAmount)
			}
		}
		w.prov.mu.Unlock()
		_, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Amount: "8.00", Reason: "too much"})
		if !errors.Is(err, domain.ErrRefundRefused) {
			t.Fatalf("Refund(8.00 of the 6.00 left) = %v, want refund refused", err)
		}
		got, m, _, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "4.00", "0", "0")
		if got.Status != domain.StatusPaid || !got.RefundedAmount.Equal(dec("4.00")) {
			t.Errorf("order after the refused refund = %s refunded %s, want paid refunded 4.00", got.Status, got.RefundedAmount)
		}
		for _, d := range w.discrepanciesOf(t, o.ID) {
			if d.Type == domain.RefundAmountMismatch {
				t.Errorf("discrepancy %s: %s; the outside refund was counted", d.Type, d.Note)
			}
		}
		// The rest, refunded by payd: the order is refunded, as the
		// provider and the ledger say.
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Reason: "the rest"}); err != nil {
			t.Fatalf("Refund(the rest) = %v", err)
		}
		got, m, _, _ = w.books(t, o.ID)
		wantMoney(t, m, "10.00", "10.00", "0", "0")
		if got.Status != domain.StatusRefunded || !got.RefundedAmount.Equal(dec("10.00")) {
			t.Errorf("order after the rest = %s refunded %s, want refunded 10.00", got.Status, got.RefundedAmount)
		}
		charge, err := w.sb.Client.FindCharge(ctx, ch)
		if err != nil || !charge.RefundedAmount.Equal(dec("10.00")) {
			t.Errorf("the provider's charge = %+v, %v, want 10.00 refunded", charge, err)
		}
		wantToldOnlyConfirmed(t, w, o.ID, []string{"4.00", "10.00"})
	})
}

// wantToldOnlyConfirmed fails t unless the order's order.refunded events
// told, in order, exactly the confirmed refunded amounts want, each equal
// to the ledger's refunded sum at the time.
func wantToldOnlyConfirmed(t *testing.T, w *world, orderID string, want []string) {
	t.Helper()
	tl, err := w.admin.Timeline(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	for _, e := range tl.Notified {
		if e.Type != domain.NotifyOrderRefunded && e.Type != domain.NotifyOrderRefundReversed {
			continue
		}
		told = append(told, e.Refunded.StringFixed(2))
		if !e.Refunded.Equal(e.Books.Refunded) {
			t.Errorf("event %s seq %d: refunded_amount %s, the ledger's refunded %s: an event told money the provider had not confirmed",
				e.Type, e.Seq, e.Refunded, e.Books.Refunded)
		}
	}
	if len(told) != len(want) {
		t.Fatalf("the shop was told refunded amounts %v, want %v", told, want)
	}
	for i := range want {
		if told[i] != want[i] {
			t.Errorf("the shop was told refunded amounts %v, want %v", told, want)
			break
		}
	}
}

// A refund in flight reserves, and tells nothing: the order's refunded
// amount and status wait for the provider's confirmation.
func TestRefundInFlightIsNotMoney(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		w.loseNextRefundReply() // the provider refunds; payd does not hear it
		r, got, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Reason: "all of it"})
		if err != nil || r.Status != domain.RefundPending {
			t.Fatalf("Refund with its reply lost = %+v, %v, want pending", r, err)
		}
		if got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() || !got.RefundPending.Equal(dec("10.00")) {
			t.Errorf("order with 10.00 in flight = %s refunded %s pending %s, want paid, 0, 10.00", got.Status, got.RefundedAmount, got.RefundPending)
		}
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Amount: "0.01", Reason: "more"}); !errors.Is(err, domain.ErrRefundTooLarge) {
			t.Errorf("Refund beside a reservation of everything = %v, want refund too large", err)
		}
		wantToldOnlyConfirmed(t, w, o.ID, nil)
		w.clock.Advance(lease)
		if _, err := w.refunds.RetryPending(ctx, w.clock.Now()); err != nil {
			t.Fatal(err)
		}
		got, m, _, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "10.00", "0", "0")
		if got.Status != domain.StatusRefunded || !got.RefundedAmount.Equal(dec("10.00")) || !got.RefundPending.IsZero() {
			t.Errorf("order once confirmed = %s refunded %s pending %s, want refunded, 10.00, 0", got.Status, got.RefundedAmount, got.RefundPending)
		}
		wantToldOnlyConfirmed(t, w, o.ID, []string{"10.00"})
	})
}

// The ledger heals the order: an order whose confirmed refunds disagree
// with its ledger (as an order of an earlier payd could, issue 36's first
// case) is repaired by a reconciliation run, through the guarded path,
// audited, told to the shop, and reported as order_books_repaired.
func TestReconciliationRepairsAnOrderFromItsLedger(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.chargeOf(t, cust, o)
		pr := w.outside(t, ch, "4.00")
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		// The order as an earlier payd left it: the refund in its ledger,
		// not on the order.
		if err := w.db.Gorm().Exec("UPDATE orders SET refunded_minor = 0 WHERE id = ?", o.ID).Error; err != nil {
			t.Fatal(err)
		}
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
		for range 2 {
			if _, err := w.reconcile(from, to); err != nil {
				t.Fatalf("reconcile = %v", err)
			}
		}
		tl, err := w.admin.Timeline(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tl.Order.Status != domain.StatusPaid || !tl.Order.RefundedAmount.Equal(dec("4.00")) {
			t.Errorf("order after reconciliation = %s refunded %s, want paid refunded 4.00", tl.Order.Status, tl.Order.RefundedAmount)
		}
		var repaired, audited int
		for _, d := range tl.Discrepancies {
			if d.Type == domain.OrderBooksRepaired {
				repaired++
				if d.Status != domain.DiscrepancyResolved || !d.ProviderAmount.Equal(dec("4.00")) || !d.LocalAmount.IsZero() {
					t.Errorf("order_books_repaired = %+v, want resolved, 0 → 4.00", d)
				}
			}
		}
		for _, a := range tl.Audit {
			if a.Action == "repair_books" {
				audited++
			}
		}
		if repaired != 1 || audited != 1 {
			t.Errorf("%d order_books_repaired, %d repair_books audit entries; want one each (the second run finds nothing to repair)", repaired, audited)
		}
		last := tl.Notified[len(tl.Notified)-1]
		if last.Type != domain.NotifyOrderRefunded || !last.Refunded.Equal(dec("4.00")) {
			t.Errorf("last event = %s refunded %s, want order.refunded 4.00", last.Type, last.Refunded)
		}
	})
}

// The ledger never lowers what an order counts: an order whose ledger
// holds less than its confirmed refunds (a refund booked before payd kept
// a ledger, which no entry records) is left as it is by a reconciliation
// run, and the shop is told nothing. Money is taken back only by a
// reversal the provider confirmed.
func TestHealNeverLowersConfirmedRefunds(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.chargeOf(t, cust, o)
		w.refundBehindPaydsBack(t, ch, "4.00") // the provider has it; no entry of payd's does
		if err := w.db.Gorm().Exec("UPDATE orders SET refunded_minor = 400 WHERE id = ?", o.ID).Error; err != nil {
			t.Fatal(err)
		}
		before, err := w.admin.Timeline(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.refunds.Heal(ctx, o.ID, domain.SourceReconciliation); err != nil {
			t.Fatal(err)
		}
		tl, err := w.admin.Timeline(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !tl.Order.RefundedAmount.Equal(dec("4.00")) || tl.Order.Status != domain.StatusPaid || len(tl.Notified) != len(before.Notified) {
			t.Errorf("after Heal: order %s refunded %s, %d events (was %d); want paid, 4.00, nothing told",
				tl.Order.Status, tl.Order.RefundedAmount, len(tl.Notified), len(before.Notified))
		}
		for _, d := range tl.Discrepancies {
			if d.Type == domain.OrderBooksRepaired {
				t.Errorf("discrepancy %+v: the order was lowered from its ledger", d)
			}
		}
	})
}
