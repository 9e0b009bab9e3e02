package service_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// These tests hold payd's books (ADR 0030) to the sandbox's: every
// movement of an order's money is in its ledger once, whoever moved it.

// books returns the order's money summary and ledger as the admin sees them.
func (w *world) books(t *testing.T, orderID string) (domain.Order, domain.Books, []domain.LedgerEntry, []domain.Dispute) {
	t.Helper()
	tl, err := w.admin.Timeline(context.Background(), orderID)
	if err != nil {
		t.Fatalf("Timeline(%s) = %v", orderID, err)
	}
	return tl.Order, tl.Money, tl.Ledger, tl.Disputes
}

// wantMoney fails t unless m is charged, refunded, disputed, lost (net derived).
func wantMoney(t *testing.T, m domain.Books, charged, refunded, disputed, lost string) {
	t.Helper()
	want := domain.Books{Charged: dec(charged), Refunded: dec(refunded), Disputed: dec(disputed), Lost: dec(lost)}
	want.Net = want.Charged.Sub(want.Refunded).Sub(want.Lost)
	if !m.Charged.Equal(want.Charged) || !m.Refunded.Equal(want.Refunded) || !m.Disputed.Equal(want.Disputed) ||
		!m.Lost.Equal(want.Lost) || !m.Net.Equal(want.Net) {
		t.Errorf("money = charged %s refunded %s disputed %s lost %s net %s, want %s %s %s %s %s",
			m.Charged, m.Refunded, m.Disputed, m.Lost, m.Net, want.Charged, want.Refunded, want.Disputed, want.Lost, want.Net)
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// chargeOf returns the provider charge that paid the order.
func (w *world) chargeOf(t *testing.T, customerID string, o domain.Order) string {
	t.Helper()
	for _, a := range w.attempts(t, customerID, o.ID) {
		if a.Status == domain.AttemptSucceeded {
			return a.ProviderChargeID
		}
	}
	t.Fatalf("order %s has no succeeded attempt", o.ID)
	return ""
}

func TestLedgerBooksChargesAndRefunds(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		_, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if len(entries) != 1 || entries[0].Kind != domain.LedgerCharge || entries[0].Source != domain.SourcePayReply ||
			entries[0].ChargeID != w.chargeOf(t, cust, o) {
			t.Fatalf("ledger = %+v, want one charge from the pay reply", entries)
		}
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Amount: "4.00", Reason: "broken cup"}); err != nil {
			t.Fatalf("Refund = %v", err)
		}
		got, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "4.00", "0", "0")
		if !got.RefundedAmount.Equal(m.Refunded) {
			t.Errorf("refunded_amount %s, money.refunded %s: want them equal", got.RefundedAmount, m.Refunded)
		}
		if len(entries) != 2 || entries[1].Kind != domain.LedgerRefund {
			t.Fatalf("ledger = %+v, want the charge and the refund", entries)
		}
		// The refund's webhook reports the same refund: nothing new.
		rs, err := w.sb.Refunds(ctx)
		if err != nil || len(rs) != 1 {
			t.Fatalf("sandbox refunds = %+v, %v", rs, err)
		}
		out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), domain.ProviderEvent{Type: domain.EventRefundSucceeded, RefundID: rs[0].ID,
			ChargeID: rs[0].ChargeID, IdempotencyKey: rs[0].IdempotencyKey, OrderID: o.ID, AmountText: "4.00", Amount: dec("4.00"), Currency: "EUR"}, []byte("{}"))
		if err != nil {
			t.Fatalf("Receive = %v", err)
		}
		if _, m, entries, _ := w.books(t, o.ID); len(entries) != 2 {
			t.Errorf("after the refund's webhook (%s): ledger %+v, money %+v, want it unchanged", out, entries, m)
		}
	})
}

// outside refunds money of order o's charge straight at the sandbox, as a
// dashboard would: payd never asked for it.
func (w *world) outside(t *testing.T, chargeID, amount string) domain.ProviderRefund {
	t.Helper()
	pr, err := w.sb.Client.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: "dash-" + newKey(), ChargeID: chargeID, Amount: dec(amount), Currency: "EUR", Reason: "dashboard"})
	if err != nil {
		t.Fatalf("refund at the sandbox = %v", err)
	}
	return pr
}

// refundEvent is the sandbox's refund.succeeded webhook for pr.
func refundEvent(pr domain.ProviderRefund, orderID string) domain.ProviderEvent {
	return domain.ProviderEvent{Type: domain.EventRefundSucceeded, RefundID: pr.ID, ChargeID: pr.ChargeID, IdempotencyKey: pr.IdempotencyKey,
		OrderID: orderID, AmountText: pr.Amount.StringFixed(2), Amount: pr.Amount, Currency: pr.Currency}
}

func TestOutsideRefundIsBooked(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.chargeOf(t, cust, o)

		pr := w.outside(t, ch, "3.00")
		// Delivered twice, and by two replicas at once: booked once.
		other := w.replica()
		var wg sync.WaitGroup
		outs := make([]service.WebhookOutcome, 2)
		errs := make([]error, 2)
		for i, r := range []*world{w, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = r.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr, o.ID), []byte("{}"))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("Receive = %v, %v", errs[0], errs[1])
		}
		got, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "3.00", "0", "0")
		if got.Status != domain.StatusPaid || !got.RefundedAmount.Equal(dec("3.00")) {
			t.Errorf("order %s refunded %s, want paid with 3.00 refunded (outcomes %v)", got.Status, got.RefundedAmount, outs)
		}
		if len(entries) != 2 || entries[1].Kind != domain.LedgerOutsideRefund || entries[1].Source != domain.SourceWebhook {
			t.Fatalf("ledger = %+v, want the charge and one outside refund", entries)
		}
		audit, err := w.admin.Timeline(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range audit.Audit {
			found = found || (a.Actor == service.ActorProvider && a.Action == "outside_refund")
		}
		if !found {
			t.Errorf("audit = %+v, want the outside refund with the provider as actor", audit.Audit)
		}

		// The rest, outside too: the order is refunded, as by payd's own.
		pr2 := w.outside(t, ch, "7.00")
		if out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(pr2, o.ID), []byte("{}")); err != nil || out != service.OutcomeApplied {
			t.Fatalf("Receive = %q, %v, want applied", out, err)
		}
		got, m, _, _ = w.books(t, o.ID)
		wantMoney(t, m, "10.00", "10.00", "0", "0")
		if got.Status != domain.StatusRefunded || !got.RefundedAmount.Equal(dec("10.00")) {
			t.Errorf("order %s refunded %s, want refunded 10.00", got.Status, got.RefundedAmount)
		}
		// A payd refund now has nothing left to give.
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Reason: "again"}); !errors.Is(err, domain.ErrOrderNotRefundable) {
			t.Errorf("Refund of a refunded order = %v, want ErrOrderNotRefundable", err)
		}
	})
}

func TestOutsideRefundNeedsTheProvidersWord(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.chargeOf(t, cust, o)
		// A signed event for a refund the provider never made.
		forged := domain.ProviderRefund{ID: "re_forged", ChargeID: ch, Amount: dec("10.00"), Currency: "EUR"}
		out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(forged, o.ID), []byte("{}"))
		if err != nil || out != service.OutcomeDiscrepancy {
			t.Fatalf("Receive(forged refund) = %q, %v, want a discrepancy", out, err)
		}
		got, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() || len(entries) != 1 {
			t.Errorf("order %s refunded %s, ledger %+v: a refund on an event's word was booked", got.Status, got.RefundedAmount, entries)
		}
		ds, err := w.discrepancies.ListByOrder(ctx, o.ID)
		if err != nil || len(ds) != 1 || ds[0].Type != domain.RefundAmountMismatch {
			t.Errorf("discrepancies = %+v, %v, want one refund_amount_mismatch", ds, err)
		}
		// An event naming a charge the provider does not have.
		ghost := domain.ProviderRefund{ID: "re_ghost", ChargeID: "ch_ghost", Amount: dec("1.00"), Currency: "EUR"}
		if out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), refundEvent(ghost, o.ID), []byte("{}")); err != nil || out != service.OutcomeDiscrepancy {
			t.Fatalf("Receive(refund of no charge) = %q, %v, want a discrepancy", out, err)
		}
		if got, _, _, _ := w.books(t, o.ID); !got.RefundedAmount.IsZero() {
			t.Errorf("refunded %s after a refund of a charge the provider does not have", got.RefundedAmount)
		}
	})
}

// disputeEvent is the webhook the sandbox sends for dispute d at status s.
func disputeEvent(d domain.ProviderDispute, typ domain.ProviderEventType, s domain.DisputeStatus) domain.ProviderEvent {
	return domain.ProviderEvent{Type: typ, DisputeID: d.ID, DisputeStatus: s, Reason: d.Reason, ChargeID: d.ChargeID,
		IdempotencyKey: d.IdempotencyKey, OrderID: d.OrderID, AmountText: d.Amount.StringFixed(2), Amount: d.Amount, Currency: d.Currency}
}

// disputed pays an order of 10.00 with pm_dispute and lets the sandbox open
// its dispute; it returns the order and the provider's dispute.
func (w *world) disputed(t *testing.T, cust string) (domain.Order, domain.ProviderDispute) {
	t.Helper()
	ctx := context.Background()
	o := w.order(t, cust, "10.00")
	if got, err := w.pay(cust, o.ID, newKey(), "pm_dispute"); err != nil || got.Status != domain.StatusPaid {
		t.Fatalf("Pay(pm_dispute) = %v, %v, want paid", got.Status, err)
	}
	w.clock.Advance(2 * time.Second)
	if _, err := w.sb.OpenDisputes(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err := w.sb.Disputes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.OrderID == o.ID {
			return o, d
		}
	}
	t.Fatalf("the sandbox opened no dispute for %s: %+v", o.ID, ds)
	return o, domain.ProviderDispute{}
}

func TestDisputeLostIsBooked(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o, d := w.disputed(t, cust)
		for range 2 { // a redelivery changes nothing
			if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(d, domain.EventDisputeCreated, domain.DisputeOpen), []byte("{}")); err != nil {
				t.Fatalf("Receive(dispute.created) = %v", err)
			}
		}
		_, m, _, disputes := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "10.00", "0")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeOpen || disputes[0].ProviderDisputeID != d.ID {
			t.Fatalf("disputes = %+v, want %s open", disputes, d.ID)
		}
		// A refund of a disputed charge would give the money twice.
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Reason: "sorry"}); !errors.Is(err, domain.ErrChargeDisputed) {
			t.Fatalf("Refund under an open dispute = %v, want ErrChargeDisputed", err)
		}
		if got, _, _, _ := w.books(t, o.ID); !got.RefundedAmount.IsZero() {
			t.Errorf("a refused refund reserved %s", got.RefundedAmount)
		}

		lost, err := w.sb.CloseDispute(ctx, d.ID, domain.DisputeLost)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(lost, domain.EventDisputeClosed, domain.DisputeLost), []byte("{}")); err != nil {
				t.Fatalf("Receive(dispute.closed) = %v", err)
			}
		}
		got, m, entries, disputes := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "10.00")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeLost || disputes[0].ClosedAt == nil {
			t.Errorf("disputes = %+v, want lost", disputes)
		}
		if len(entries) != 3 {
			t.Errorf("ledger = %+v, want charge, dispute_opened, dispute_lost", entries)
		}
		if got.Status != domain.StatusPaid {
			t.Errorf("order %s: a lost dispute moves no order", got.Status)
		}
		// A won report after the loss changes nothing: a dispute closes once.
		if _, err := w.disputes.Sync(ctx, domain.ProviderDispute{ID: d.ID, ChargeID: d.ChargeID, Amount: d.Amount, Currency: d.Currency, Status: domain.DisputeWon}, domain.SourceReconciliation); err != nil {
			t.Fatal(err)
		}
		_, m, _, _ = w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "10.00")
	})
}

func TestDisputeWonOutOfOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o, d := w.disputed(t, cust)
		// The opening is learned, then the close arrives twice, racing on
		// two replicas, then the opening again, late.
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(d, domain.EventDisputeCreated, domain.DisputeOpen), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		won, err := w.sb.CloseDispute(ctx, d.ID, domain.DisputeWon)
		if err != nil {
			t.Fatal(err)
		}
		other := w.replica()
		var wg sync.WaitGroup
		for _, r := range []*world{w, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(won, domain.EventDisputeClosed, domain.DisputeWon), []byte("{}")); err != nil {
					t.Errorf("Receive(dispute.closed) = %v", err)
				}
			}()
		}
		wg.Wait()
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(d, domain.EventDisputeCreated, domain.DisputeOpen), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_, m, entries, disputes := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeWon || len(entries) != 3 {
			t.Errorf("disputes %+v, ledger %+v, want one won dispute with its opening and its win booked", disputes, entries)
		}
		// Won: the charge may be refunded again.
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Amount: "2.00", Reason: "goodwill"}); err != nil {
			t.Errorf("Refund after a won dispute = %v", err)
		}
	})
}

func TestDisputeCloseBeforeItsOpening(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o, d := w.disputed(t, cust)
		lost, err := w.sb.CloseDispute(ctx, d.ID, domain.DisputeLost)
		if err != nil {
			t.Fatal(err)
		}
		// The close arrives first: the dispute opens and closes at once.
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(lost, domain.EventDisputeClosed, domain.DisputeLost), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(d, domain.EventDisputeCreated, domain.DisputeOpen), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_, m, _, disputes := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "10.00")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeLost {
			t.Errorf("disputes = %+v, want one lost", disputes)
		}
		open, err := w.disputeStore.CountOpen(ctx)
		if err != nil || open != 0 {
			t.Errorf("CountOpen = %d, %v, want 0", open, err)
		}
	})
}

func TestReconciliationBooksWhatTheProviderShows(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		// A ledger that lost its charge (an order paid before the ledger
		// existed): the provider's list books it again, once.
		if err := w.db.Gorm().Exec("DELETE FROM ledger_entries WHERE order_id = ?", o.ID).Error; err != nil {
			t.Fatal(err)
		}
		// A dispute whose events never reached payd.
		d, dp := w.disputed(t, cust)
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
		for range 2 {
			if _, err := w.reconcile(from, to); err != nil {
				t.Fatalf("reconcile = %v", err)
			}
		}
		_, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if len(entries) != 1 || entries[0].Source != domain.SourceReconciliation {
			t.Errorf("ledger = %+v, want the charge booked once by the run", entries)
		}
		_, m, _, disputes := w.books(t, d.ID)
		wantMoney(t, m, "10.00", "0", "10.00", "0")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeOpen {
			t.Fatalf("disputes = %+v, want the provider's open dispute", disputes)
		}
		if _, err := w.sb.CloseDispute(ctx, dp.ID, domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		if _, err := w.reconcile(from, to); err != nil {
			t.Fatalf("reconcile = %v", err)
		}
		_, m, _, disputes = w.books(t, d.ID)
		wantMoney(t, m, "10.00", "0", "0", "10.00")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeLost {
			t.Errorf("disputes = %+v, want it lost", disputes)
		}
	})
}

func TestRefundResolutionOfNoOrdersCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		// A charge at the provider that is nobody's at payd, reported by a
		// file under a real order: payd books and refunds nothing for it.
		ch, err := w.sb.Client.Charge(ctx, domain.ChargeRequest{IdempotencyKey: "other-" + newKey(), OrderID: "not-payds", Amount: dec("4.00"), Currency: "EUR", PaymentMethod: "pm_ok"})
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := w.discrepancies.Record(ctx, domain.Discrepancy{ID: newKey(), Type: domain.MissingLocalPayment, Reference: ch.ID, OrderID: o.ID,
			ChargeID: ch.ID, ProviderAmount: dec("4.00"), Currency: "EUR", Status: domain.DiscrepancyOpen, DetectedAt: w.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.resolver.Resolve(ctx, d.ID, service.ResolveRefund, "the file says so"); !errors.Is(err, domain.ErrResolutionNotApplicable) {
			t.Fatalf("Resolve(refund) = %v, want ErrResolutionNotApplicable", err)
		}
		_, m, entries, _ := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if len(entries) != 1 {
			t.Errorf("ledger = %+v: another's charge was booked on the order a file named", entries)
		}
		if got, err := w.sb.Client.FindCharge(ctx, ch.ID); err != nil || !got.RefundedAmount.IsZero() {
			t.Errorf("the provider refunded %s of a charge payd does not own (%v)", got.RefundedAmount, err)
		}
		// A refund discrepancy is no charge to give back.
		rd, _, err := w.discrepancies.Record(ctx, domain.Discrepancy{ID: newKey(), Type: domain.RefundAmountMismatch, Reference: "refund:re_x", OrderID: o.ID,
			ChargeID: w.chargeOf(t, cust, o), Currency: "EUR", Status: domain.DiscrepancyOpen, DetectedAt: w.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.resolver.Resolve(ctx, rd.ID, service.ResolveRefund, ""); !errors.Is(err, domain.ErrResolutionNotApplicable) {
			t.Errorf("Resolve(refund) of a refund_amount_mismatch = %v, want ErrResolutionNotApplicable", err)
		}
		if got, _, _, _ := w.books(t, o.ID); !got.RefundedAmount.IsZero() {
			t.Errorf("refunded %s on a refund discrepancy's word", got.RefundedAmount)
		}
	})
}

func TestDisputeEventIsAHint(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o, d := w.disputed(t, cust)
		// A signed event says the dispute was lost, for double the money;
		// the provider says it is open, for the charge's amount.
		forged := disputeEvent(d, domain.EventDisputeClosed, domain.DisputeLost)
		forged.Amount, forged.AmountText = dec("20.00"), "20.00"
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), forged, []byte("{}")); err != nil {
			t.Fatalf("Receive = %v", err)
		}
		_, m, _, disputes := w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "10.00", "0")
		if len(disputes) != 1 || disputes[0].Status != domain.DisputeOpen {
			t.Fatalf("disputes = %+v, want it open as the provider has it", disputes)
		}
		// The real close still closes it.
		lost, err := w.sb.CloseDispute(ctx, d.ID, domain.DisputeWon)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(lost, domain.EventDisputeClosed, domain.DisputeWon), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_, m, _, disputes = w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if disputes[0].Status != domain.DisputeWon {
			t.Errorf("dispute %s, want won", disputes[0].Status)
		}
		// A dispute the provider never opened books nothing.
		ghost := d
		ghost.ID = "dp_ghost"
		if out, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(ghost, domain.EventDisputeCreated, domain.DisputeOpen), []byte("{}")); err != nil || out != service.OutcomeDiscrepancy {
			t.Fatalf("Receive(ghost dispute) = %q, %v, want a discrepancy", out, err)
		}
		_, m, _, disputes = w.books(t, o.ID)
		wantMoney(t, m, "10.00", "0", "0", "0")
		if len(disputes) != 1 {
			t.Errorf("disputes = %+v: a dispute on an event's word", disputes)
		}
	})
}

// TestPayingAnOrderBooksItsCharge: whichever path settles a payment, the
// order is paid only with its charge in the ledger. Here the attempt's
// success was committed without its entry (the state a books mismatch in
// the fault tests showed: an order paid, later refunded, with the refund
// booked and no charge); the next settlement of that attempt, by the same
// key or from the provider's event, books the charge as it pays the order.
func TestPayingAnOrderBooksItsCharge(t *testing.T) {
	for _, how := range []string{"same key", "provider event"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			eachDialect(t, func(t *testing.T, w *world) {
				cust := w.customer(t)
				o := w.order(t, cust, "15.00")
				key := newKey()
				if got, err := w.pay(cust, o.ID, key, "pm_timeout"); err != nil || got.Status != domain.StatusProcessing {
					t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
				}
				cs := w.charges(t, o.ID)
				as := w.attempts(t, cust, o.ID)
				if len(cs) != 1 || len(as) != 1 {
					t.Fatalf("charges %+v, attempts %+v: want one of each", cs, as)
				}
				if err := w.db.Gorm().Exec("UPDATE payment_attempts SET status = ?, provider_charge_id = ? WHERE id = ?",
					string(domain.AttemptSucceeded), cs[0].ID, as[0].ID).Error; err != nil {
					t.Fatal(err)
				}
				var got domain.Order
				var err error
				if how == "same key" {
					got, err = w.pay(cust, o.ID, key, "pm_timeout")
				} else {
					got, err = w.settleFromProvider(t, cust, w.attempts(t, cust, o.ID)[0])
				}
				if err != nil || got.Status != domain.StatusPaid {
					t.Fatalf("settling the succeeded attempt = %v, %v, want paid", got.Status, err)
				}
				_, m, entries, _ := w.books(t, o.ID)
				wantMoney(t, m, "15.00", "0", "0", "0")
				if len(entries) != 1 || entries[0].Reference != domain.ChargeReference(cs[0].ID) {
					t.Errorf("ledger = %+v, want the one charge %s", entries, cs[0].ID)
				}
			})
		})
	}
}

// TestFirstPaymentToldWithAForeignCharge: a charge at the provider that
// names an order but is none of its attempts', booked by an operator's
// refund resolution while the order is still pending (its refund's reply
// lost, so nothing else is booked yet), raises the order's version. The
// order's first payment then cannot take the one-packet event that knows
// its books without reading them (ADR 0067): its order.paid event says
// both charges, as the ledger does.
func TestFirstPaymentToldWithAForeignCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust, o, d := w.foreignCharge(t, "9.00")
		w.loseNextRefundReply()
		_, _ = w.resolver.Resolve(ctx, d.ID, service.ResolveRefund, "ops") // its refund's outcome stays unknown
		got, m, _, _ := w.books(t, o.ID)
		wantMoney(t, m, "9.00", "0", "0", "0")
		if got.Status != domain.StatusPending || got.Version <= domain.CreatedVersion {
			t.Fatalf("order %s at version %d after a foreign charge was booked, want pending past %d", got.Status, got.Version, domain.CreatedVersion)
		}

		if paid, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err != nil || paid.Status != domain.StatusPaid {
			t.Fatalf("Pay = %v, %v, want paid", paid.Status, err)
		}
		_, m, _, _ = w.books(t, o.ID)
		wantMoney(t, m, "18.00", "0", "0", "0")
		es := w.notified(t, o.ID)
		last := es[len(es)-1]
		if last.Type != domain.NotifyOrderPaid || !last.Books.Charged.Equal(m.Charged) || !last.Books.Net.Equal(m.Net) {
			t.Errorf("last event %s told books %+v, want order.paid with the ledger's %+v", last.Type, last.Books, m)
		}
	})
}

// TestReconciliationBookingRaisesTheVersion: a run that books a charge of
// an attempt payd is still settling (its reply was lost) raises the
// order's version as it books it, as every booking about an order that
// does not pay it does. The charge might be a second one carrying the
// attempt's key, so the order's first payment must read its books, not
// know them (ADR 0067); settled afterwards, the order's event says what
// its ledger says.
func TestReconciliationBookingRaisesTheVersion(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "9.00")
		key := newKey()
		w.delayNextCharge()
		if got, err := w.pay(cust, o.ID, key, "pm_ok"); err == nil && got.Status == domain.StatusPaid {
			t.Fatalf("Pay with its reply lost = paid, want it unsettled")
		}
		claimed := w.get(t, cust, o.ID)
		if claimed.Status != domain.StatusProcessing || claimed.Version != domain.CreatedVersion+1 {
			t.Fatalf("order %s at version %d, want processing at its first claim's %d", claimed.Status, claimed.Version, domain.CreatedVersion+1)
		}
		if _, err := w.reconcile(w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		booked, m, _, _ := w.books(t, o.ID)
		wantMoney(t, m, "9.00", "0", "0", "0")
		if booked.Version <= claimed.Version {
			t.Errorf("order at version %d after the run booked its charge, want past %d", booked.Version, claimed.Version)
		}
		if got, err := w.pay(cust, o.ID, key, "pm_ok"); err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay again = %v, %v, want paid", got.Status, err)
		}
		_, m, _, _ = w.books(t, o.ID)
		wantMoney(t, m, "9.00", "0", "0", "0")
		es := w.notified(t, o.ID)
		if last := es[len(es)-1]; last.Type != domain.NotifyOrderPaid || !last.Books.Charged.Equal(m.Charged) {
			t.Errorf("last event %s told books %+v, want order.paid with the ledger's %+v", last.Type, last.Books, m)
		}
	})
}
