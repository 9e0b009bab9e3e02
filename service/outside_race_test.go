package service_test

import (
	"context"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// An outside refund can be reported while the order it refunds is still
// processing: the provider charged, someone refunded at its dashboard, and
// the refund's webhook overtook the payment's outcome. The refund is booked
// then, but the order is not paid yet, so it cannot count it; the
// settlement that pays the order by that charge must count it then, in the
// same transaction, or payd says "paid, refunded 0" while the provider has
// the money back.
func TestOutsideRefundBeforeTheOrderIsPaid(t *testing.T) {
	for _, tc := range []struct {
		name, refund string
		// stale: the settlement applies the provider's record as read
		// before the refund was made (the pay reply or a webhook in
		// flight while the refund was reported and booked).
		stale      bool
		wantStatus domain.OrderStatus
	}{
		{"full", "10.00", false, domain.StatusRefunded},
		{"partial", "4.00", false, domain.StatusPaid},
		{"full, settled on an older record", "10.00", true, domain.StatusRefunded},
		{"partial, settled on an older record", "4.00", true, domain.StatusPaid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, w *world) {
				ctx := context.Background()
				cust := w.customer(t)
				o := w.order(t, cust, "10.00")
				if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
					t.Fatalf("Pay(pm_async) = %v, %v, want processing", got.Status, err)
				}
				w.resolveAsync(t) // the provider charged; payd does not know yet
				as := w.attempts(t, cust, o.ID)
				if len(as) != 1 {
					t.Fatalf("attempts = %+v, want one", as)
				}
				a := as[0]
				before, err := w.sb.Client.GetCharge(ctx, a)
				if err != nil || before.Status != domain.ChargeSucceeded {
					t.Fatalf("GetCharge = %+v, %v, want succeeded", before, err)
				}

				pr := w.outside(t, before.ID, tc.refund)
				if out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}")); err != nil {
					t.Fatalf("Receive(refund.succeeded) = %q, %v", out, err)
				}
				if got := w.get(t, cust, o.ID); got.Status != domain.StatusProcessing || !got.RefundedAmount.IsZero() {
					t.Fatalf("order after the early refund = %s refunded %s, want processing, nothing counted yet", got.Status, got.RefundedAmount)
				}

				ch := before
				if !tc.stale {
					if ch, err = w.sb.Client.GetCharge(ctx, a); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := w.checkout.Settle(ctx, w.get(t, cust, o.ID), a, ch, domain.SourceWebhook); err != nil {
					t.Fatalf("Settle = %v", err)
				}
				got, m, entries, _ := w.books(t, o.ID)
				wantMoney(t, m, "10.00", tc.refund, "0", "0")
				if got.Status != tc.wantStatus || !got.RefundedAmount.Equal(dec(tc.refund)) {
					t.Errorf("order = %s refunded %s, want %s refunded %s (ledger %+v)", got.Status, got.RefundedAmount, tc.wantStatus, tc.refund, entries)
				}
				if !got.RefundedAmount.Equal(m.Refunded) {
					t.Errorf("refunded_amount %s, money.refunded %s: want them equal", got.RefundedAmount, m.Refunded)
				}

				// The refund's webhook again, and the payment's: nothing more.
				if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}")); err != nil {
					t.Fatal(err)
				}
				for _, ev := range w.events(t, o.ID) {
					if _, err := w.receive(ctx, ev); err != nil {
						t.Fatalf("Receive(%s) = %v", ev.Type, err)
					}
				}
				if again := w.get(t, cust, o.ID); again.Status != tc.wantStatus || !again.RefundedAmount.Equal(dec(tc.refund)) {
					t.Errorf("order after the repeats = %s refunded %s, want %s refunded %s", again.Status, again.RefundedAmount, tc.wantStatus, tc.refund)
				}
				if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
					t.Errorf("discrepancies = %+v, want none", ds)
				}
			})
		})
	}
}

// The pay reply itself can be overtaken: the provider charged, the charge
// was refunded at its dashboard and the refund reported and booked, all
// before the reply reached payd. The reply's charge says nothing refunded
// (it was taken before the refund); the order's version, raised when the
// refund was recorded, tells the settlement to count it.
func TestOutsideRefundBeforeThePayReply(t *testing.T) {
	for _, tc := range []struct {
		name, refund string
		wantStatus   domain.OrderStatus
	}{
		{"full", "10.00", domain.StatusRefunded},
		{"partial", "4.00", domain.StatusPaid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, w *world) {
				ctx := context.Background()
				cust := w.customer(t)
				o := w.order(t, cust, "10.00")
				var booked []service.WebhookOutcome
				w.prov.afterCharge = func(ch domain.Charge) {
					pr := w.outside(t, ch.ID, tc.refund)
					out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}"))
					if err != nil {
						t.Errorf("Receive(refund.succeeded) = %v", err)
					}
					booked = append(booked, out)
				}
				got, err := w.pay(cust, o.ID, newKey(), "pm_ok")
				w.prov.afterCharge = nil
				if err != nil || got.Status != domain.StatusPaid {
					t.Fatalf("Pay = %v, %v, want paid: the payment succeeded", got.Status, err)
				}
				if len(booked) != 1 || booked[0] != service.OutcomeApplied {
					t.Fatalf("refund webhook outcomes = %v, want one applied", booked)
				}
				now, m, entries, _ := w.books(t, o.ID)
				wantMoney(t, m, "10.00", tc.refund, "0", "0")
				if now.Status != tc.wantStatus || !now.RefundedAmount.Equal(dec(tc.refund)) {
					t.Errorf("order = %s refunded %s, want %s refunded %s (ledger %+v)", now.Status, now.RefundedAmount, tc.wantStatus, tc.refund, entries)
				}
				if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
					t.Errorf("discrepancies = %+v, want none", ds)
				}
			})
		})
	}
}
