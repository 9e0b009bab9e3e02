package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// eur is d in minor units of EUR, the fixtures' currency.
func eur(d decimal.Decimal) int64 { return domain.MinorUnits(d, "EUR") }

// notified returns order id's events, by seq.
func (w *world) notified(t *testing.T, id string) []domain.OutboxEvent {
	t.Helper()
	es, err := repository.NewOrderStore(w.db).EventsOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// types lists the events' types.
func types(es []domain.OutboxEvent) []domain.NotifyType {
	out := make([]domain.NotifyType, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// wantTold checks that order id was told exactly the events of types want,
// each numbered by a version of the order no later than its last, and
// returns them.
func (w *world) wantTold(t *testing.T, customerID, id string, want ...domain.NotifyType) []domain.OutboxEvent {
	t.Helper()
	es := w.notified(t, id)
	got := types(es)
	if len(got) != len(want) {
		t.Fatalf("order %s was told %v, want %v", id, got, want)
	}
	o := w.get(t, customerID, id)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %s was told %v, want %v", id, got, want)
		}
		if es[i].Seq > o.Version || (i > 0 && es[i].Seq <= es[i-1].Seq) {
			t.Errorf("order %s: event %d has seq %d (order at version %d)", id, i, es[i].Seq, o.Version)
		}
	}
	return es
}

// TestOutboxTellsEachChange: a pay, a decline, a cancel and an expiry are
// each told once, with the cause that made them: the pay request's key, the
// customer, the expiry job.
func TestOutboxTellsEachChange(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)

		o := w.order(t, cust, "10.00")
		key := newKey()
		if _, err := w.pay(cust, o.ID, key, "pm_ok"); err != nil {
			t.Fatal(err)
		}
		es := w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid)
		paid := w.get(t, cust, o.ID)
		if e := es[0]; e.Cause != (domain.Cause{Kind: domain.CausePayRequest, Ref: key}) || e.Seq != paid.Version ||
			e.OrderStatus != domain.StatusPaid || eur(e.Books.Charged) != 1000 || e.PaidAt == nil {
			t.Errorf("order.paid = %+v, want caused by pay request %s at version %d, 10.00 charged", e, key, paid.Version)
		}

		d := w.order(t, cust, "10.00")
		declined := newKey()
		var decline *domain.DeclineError
		if _, err := w.pay(cust, d.ID, declined, "pm_declined"); !errors.As(err, &decline) {
			t.Fatalf("Pay(pm_declined) = %v, want a decline", err)
		}
		if e := w.wantTold(t, cust, d.ID, domain.NotifyOrderPaymentFailed)[0]; e.Cause.Ref != declined || e.OrderStatus != domain.StatusPending || eur(e.Books.Charged) != 0 {
			t.Errorf("order.payment_failed = %+v, want pending, caused by %s", e, declined)
		}
		if _, err := w.orders.Cancel(ctx, cust, d.ID); err != nil {
			t.Fatal(err)
		}
		es = w.wantTold(t, cust, d.ID, domain.NotifyOrderPaymentFailed, domain.NotifyOrderCancelled)
		if e := es[1]; e.Cause != (domain.Cause{Kind: domain.CauseCustomer, Ref: cust}) || e.OrderStatus != domain.StatusCancelled {
			t.Errorf("order.cancelled = %+v, want caused by customer %s", e, cust)
		}
		// Cancelling again answers the same and tells nothing.
		if _, err := w.orders.Cancel(ctx, cust, d.ID); err != nil {
			t.Fatal(err)
		}
		w.wantTold(t, cust, d.ID, domain.NotifyOrderPaymentFailed, domain.NotifyOrderCancelled)

		x := w.order(t, cust, "10.00")
		w.clock.Advance(orderTTL + 1)
		if _, err := w.expire(ctx); err != nil {
			t.Fatal(err)
		}
		if e := w.wantTold(t, cust, x.ID, domain.NotifyOrderExpired)[0]; e.Cause.Kind != domain.CauseExpiry || e.OrderStatus != domain.StatusExpired {
			t.Errorf("order.expired = %+v, want caused by the expiry job", e)
		}
		w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid) // nothing more for the paid order
	})
}

// TestOutboxTellsMoneyThatMoved: a refund is told when its money moved,
// once per refund, and a refund the provider refused — its reservation
// given back — is never told; a refund made at the provider outside payd
// is told as the webhook that reported it.
func TestOutboxTellsMoneyThatMoved(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")

		req := service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1", Amount: "4.00"}
		if _, _, err := w.refunds.Refund(ctx, req); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.refunds.Refund(ctx, req); err != nil { // its replay refunds nothing more
			t.Fatal(err)
		}
		es := w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid, domain.NotifyOrderRefunded)
		if e := es[1]; eur(e.Refunded) != 400 || eur(e.Books.Refunded) != 400 || eur(e.Books.Charged) != 1000 || e.OrderStatus != domain.StatusPaid {
			t.Errorf("order.refunded = %+v, want 4.00 of 10.00 refunded", e)
		}

		// The provider refuses the next refund: less is left there than
		// payd believes. Its reservation goes back, and nothing is told.
		chargeID := w.charges(t, o.ID)[0].ID
		w.refundBehindPaydsBack(t, chargeID, "5.00")
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2", Amount: "6.00"}); !errors.Is(err, domain.ErrRefundRefused) {
			t.Fatalf("Refund(6.00) = %v, want ErrRefundRefused", err)
		}
		w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid, domain.NotifyOrderRefunded)

		// The refund made behind payd's back is reported by its webhook:
		// money moved, told once, however often the webhook comes.
		var reported int
		for _, ev := range w.events(t, o.ID) {
			if ev.Type != domain.EventRefundSucceeded || ev.Data.RefundID == "" {
				continue
			}
			for range 2 {
				if _, err := w.receive(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			reported++
		}
		if reported == 0 {
			t.Fatal("the sandbox queued no refund webhook")
		}
		es = w.notified(t, o.ID)
		var outside []domain.OutboxEvent
		for _, e := range es[2:] {
			if e.Type == domain.NotifyOrderRefunded && e.Cause.Kind == domain.CauseWebhook {
				outside = append(outside, e)
			}
		}
		if len(outside) != 1 || len(es) != 3 {
			t.Fatalf("after the outside refund's webhooks the order was told %v, want one more order.refunded caused by a webhook", types(es))
		}
		if e := outside[0]; eur(e.Books.Refunded) != 900 || eur(e.Refunded) != 900 {
			t.Errorf("outside order.refunded = %+v, want 9.00 refunded", e)
		}
	})
}

// TestOutboxTellsDisputes: a dispute's opening is told once, as the
// webhook that reported it, with the money withdrawn; its close once, with
// the money lost; redeliveries and a late report of another outcome tell
// nothing more.
func TestOutboxTellsDisputes(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o, d := w.disputed(t, cust)
		ev := disputeEvent(d, domain.EventDisputeCreated, domain.DisputeOpen)
		ev.ID = "evt_open"
		for range 2 {
			if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), ev, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		es := w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid, domain.NotifyOrderDisputed)
		if e := es[1]; e.Cause != (domain.Cause{Kind: domain.CauseWebhook, Ref: "evt_open"}) || eur(e.Books.Disputed) != 1000 {
			t.Errorf("order.disputed = %+v, want 10.00 disputed, caused by evt_open", e)
		}
		lost, err := w.sb.CloseDispute(ctx, d.ID, domain.DisputeLost)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := w.webhooks.Receive(ctx, "msg-"+newKey(), disputeEvent(lost, domain.EventDisputeClosed, domain.DisputeLost), []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.disputes.Sync(ctx, domain.ProviderDispute{ID: d.ID, ChargeID: d.ChargeID, Amount: d.Amount, Currency: d.Currency, Status: domain.DisputeWon}, domain.SourceReconciliation); err != nil {
			t.Fatal(err)
		}
		es = w.wantTold(t, cust, o.ID, domain.NotifyOrderPaid, domain.NotifyOrderDisputed, domain.NotifyOrderDisputeClosed)
		if e := es[2]; eur(e.Books.Disputed) != 0 || eur(e.Books.Lost) != 1000 || e.Cause.Kind != domain.CauseWebhook {
			t.Errorf("order.dispute_closed = %+v, want 10.00 lost, caused by a webhook", e)
		}
	})
}
