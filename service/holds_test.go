package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

func capture(w *world, orderID, key, amount string) (domain.Order, error) {
	r := service.CaptureRequest{OrderID: orderID, RequestID: key}
	if amount != "" {
		d := decimal.RequireFromString(amount)
		r.Amount = &d
	}
	return w.holds.Capture(context.Background(), r)
}

// booksOf adds up an order's ledger.
func booksOf(t *testing.T, w *world, o domain.Order) domain.Books {
	t.Helper()
	entries, err := w.ledger.ListByOrder(context.Background(), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	return domain.Summarize(o.Currency, entries)
}

// TestHoldAuthorizesThenCapturesOnce: a manual order's pay only holds its
// money (authorized, nothing charged in the books); one capture of part
// of it pays the order what was captured, once: the same key answers the
// same, another key is refused, and refunds stop at what was captured.
func TestHoldAuthorizesThenCapturesOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.heldOrder(t, cust, "24.00")
		if o.CaptureBefore == nil || o.CaptureMethod != domain.CaptureManual || !o.Captured().IsZero() {
			t.Fatalf("authorized order = %+v; want manual, a capture_before, nothing captured", o)
		}
		if b := booksOf(t, w, o); !b.Authorized.Equal(decimal.RequireFromString("24.00")) || !b.Charged.IsZero() {
			t.Errorf("books while held = %+v; want 24.00 authorized, nothing charged", b)
		}
		if _, err := capture(w, o.ID, "cap-big", "24.01"); !errors.Is(err, domain.ErrCaptureTooLarge) {
			t.Errorf("capture of 24.01 of 24.00 = %v; want ErrCaptureTooLarge", err)
		}
		paid, err := capture(w, o.ID, "cap-1", "10.00")
		if err != nil || paid.Status != domain.StatusPaid || !paid.CapturedAmount.Equal(decimal.RequireFromString("10.00")) || paid.HoldAction != "" {
			t.Fatalf("capture of 10.00 = %+v, %v; want paid, 10.00 captured", paid, err)
		}
		if again, err := capture(w, o.ID, "cap-1", "10.00"); err != nil || again.Status != domain.StatusPaid || !again.CapturedAmount.Equal(paid.CapturedAmount) {
			t.Errorf("the capture again = %+v, %v; want the same paid order", again, err)
		}
		if _, err := capture(w, o.ID, "cap-1", "11.00"); !errors.Is(err, domain.ErrKeyReused) {
			t.Errorf("the capture's key for 11.00 = %v; want ErrKeyReused", err)
		}
		if _, err := capture(w, o.ID, "cap-2", ""); !errors.Is(err, domain.ErrOrderNotCapturable) {
			t.Errorf("a second capture = %v; want ErrOrderNotCapturable", err)
		}
		if n := len(w.callsOf("capture")); n != 1 {
			t.Errorf("%d captures reached the provider, want 1", n)
		}
		b := booksOf(t, w, o)
		if !b.Authorized.IsZero() || !b.Charged.Equal(decimal.RequireFromString("10.00")) {
			t.Errorf("books after the capture = %+v; want nothing held, 10.00 charged", b)
		}
		ch, err := w.prov.inner.FindCharge(context.Background(), w.attempts(t, cust, o.ID)[0].ProviderChargeID)
		if err != nil || !ch.AmountCaptured.Equal(decimal.RequireFromString("10.00")) {
			t.Errorf("the provider's charge = %+v, %v; want 10.00 captured", ch, err)
		}
		if _, _, err := w.refunds.Refund(context.Background(), service.RefundRequest{OrderID: o.ID, Amount: "10.01", Reason: "too much", RequestID: "r-1"}); !errors.Is(err, domain.ErrRefundTooLarge) {
			t.Errorf("refund of 10.01 of 10.00 captured = %v; want ErrRefundTooLarge", err)
		}
	})
}

// TestHoldCaptureReplyLost: the provider captured but its reply was lost;
// the same request sent again asks under the same key and settles what
// the provider did, never capturing twice.
func TestHoldCaptureReplyLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.heldOrder(t, cust, "24.00")
		w.loseNextHoldReply()
		if _, err := capture(w, o.ID, "cap-lost", ""); !errors.Is(err, domain.ErrOutcomeUnknown) {
			t.Fatalf("capture whose reply was lost = %v; want ErrOutcomeUnknown", err)
		}
		if got := w.get(t, cust, o.ID); got.Status != domain.StatusAuthorized || got.HoldAction == "" {
			t.Fatalf("after the lost reply the order = %s owned by %q; want authorized, owned", got.Status, got.HoldAction)
		}
		if _, err := capture(w, o.ID, "cap-other", ""); !errors.Is(err, domain.ErrOrderNotCapturable) {
			t.Errorf("another capture while the first is unknown = %v; want ErrOrderNotCapturable", err)
		}
		// Reconciliation meanwhile sees the provider's capture of a hold
		// payd is still settling: no discrepancy, nothing booked.
		if _, err := w.reconcile(w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if d := w.discrepanciesOf(t, o.ID); len(d) != 0 {
			t.Errorf("reconciliation during the capture found %+v; want nothing", d)
		}
		w.clock.Advance(2 * lease) // the request's lease ends
		paid, err := capture(w, o.ID, "cap-lost", "")
		if err != nil || paid.Status != domain.StatusPaid || !paid.CapturedAmount.Equal(decimal.RequireFromString("24.00")) {
			t.Fatalf("the capture sent again = %+v, %v; want paid 24.00", paid, err)
		}
		keys := w.callsOf("capture")
		if len(keys) != 2 || keys[0] != keys[1] {
			t.Errorf("captures sent = %v; want the same key twice", keys)
		}
		if b := booksOf(t, w, o); !b.Charged.Equal(decimal.RequireFromString("24.00")) || !b.Authorized.IsZero() {
			t.Errorf("books after = %+v; want 24.00 charged once, nothing held", b)
		}
	})
}

// TestHoldCancelVoids: cancelling an authorized order voids its hold at
// the provider: cancelled, the stock given back, nothing charged; a
// capture after it is refused.
func TestHoldCancelVoids(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.heldOrder(t, cust, "24.00")
		got, err := w.orders.Cancel(context.Background(), cust, o.ID)
		if err != nil || got.Status != domain.StatusCancelled {
			t.Fatalf("Cancel(authorized) = %v, %v; want cancelled", got.Status, err)
		}
		if again, err := w.orders.Cancel(context.Background(), cust, o.ID); err != nil || again.Status != domain.StatusCancelled {
			t.Errorf("Cancel again = %v, %v; want cancelled", again.Status, err)
		}
		if _, err := capture(w, o.ID, "cap-late", ""); !errors.Is(err, domain.ErrOrderNotCapturable) {
			t.Errorf("capture of a voided hold = %v; want ErrOrderNotCapturable", err)
		}
		ch, err := w.prov.inner.FindCharge(context.Background(), w.attempts(t, cust, o.ID)[0].ProviderChargeID)
		if err != nil || ch.Status != domain.ChargeVoided {
			t.Errorf("the provider's charge = %+v, %v; want voided", ch, err)
		}
		if b := booksOf(t, w, o); !b.Authorized.IsZero() || !b.Charged.IsZero() {
			t.Errorf("books after the void = %+v; want nothing", b)
		}
	})
}

// TestHoldLapses: a hold past capture_before cannot be captured, and the
// holds job voids it: the order expires and its books hold nothing.
func TestHoldLapses(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.heldOrder(t, cust, "24.00")
		w.clock.Advance(domain.DefaultAuthorizationTTL + time.Minute)
		if _, err := capture(w, o.ID, "cap-late", ""); !errors.Is(err, domain.ErrAuthorizationExpired) {
			t.Errorf("capture past capture_before = %v; want ErrAuthorizationExpired", err)
		}
		if n, err := w.holds.Run(context.Background()); err != nil || n != 1 {
			t.Fatalf("holds job = %d, %v; want 1", n, err)
		}
		if n, err := w.holds.Run(context.Background()); err != nil || n != 0 {
			t.Errorf("holds job again = %d, %v; want 0", n, err)
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusExpired || got.HoldAction != "" {
			t.Errorf("after the job the order = %s owned by %q; want expired", got.Status, got.HoldAction)
		}
		if b := booksOf(t, w, o); !b.Authorized.IsZero() || !b.Charged.IsZero() {
			t.Errorf("books after the lapse = %+v; want nothing", b)
		}
	})
}

// TestHoldCaptureCancelRace: 20 captures and cancels of one hold at once,
// on both databases: exactly one ends it, and the others are refused.
func TestHoldCaptureCancelRace(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.heldOrder(t, cust, "24.00")
		errs := make([]error, 20)
		results := make([]domain.Order, 20)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				if i%2 == 0 {
					results[i], errs[i] = capture(w, o.ID, fmt.Sprintf("cap-%d", i), "")
				} else {
					results[i], errs[i] = w.orders.Cancel(context.Background(), cust, o.ID)
				}
			})
		}
		wg.Wait()
		got := w.get(t, cust, o.ID)
		captures, cancels := 0, 0
		for i, err := range errs {
			switch {
			case err == nil && i%2 == 0:
				captures++
			case err == nil && results[i].Status == domain.StatusCancelled:
				cancels++ // a cancel of a cancelled order answers cancelled
			case !errors.Is(err, domain.ErrOrderNotCapturable) && !errors.Is(err, domain.ErrOrderNotCancelable) &&
				!errors.Is(err, domain.ErrOrderAlreadyPaid):
				t.Errorf("call %d = %v; want a refusal", i, err)
			}
		}
		if (got.Status == domain.StatusPaid) != (captures == 1) || (got.Status == domain.StatusCancelled) != (captures == 0 && cancels > 0) {
			t.Errorf("order %s after the race with %d captures and %d cancels that succeeded", got.Status, captures, cancels)
		}
		if n := len(w.callsOf("capture")) + len(w.callsOf("void")); n != 1 {
			t.Errorf("%d captures and voids reached the provider, want 1", n)
		}
	})
}

// TestHoldEndedAtTheProvider: a hold ended at the provider behind payd's
// back settles from the provider's charge when payd acts on it: voided
// there, a capture ends as a lapse (the order expires, nothing charged);
// captured there, a cancel is refused and the order is paid what was
// taken.
func TestHoldEndedAtTheProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		voided := w.heldOrder(t, cust, "24.00")
		chargeOf := func(o domain.Order) string { return w.attempts(t, cust, o.ID)[0].ProviderChargeID }
		if _, err := w.prov.inner.Void(ctx, domain.VoidRequest{IdempotencyKey: "dashboard-void", ChargeID: chargeOf(voided)}); err != nil {
			t.Fatal(err)
		}
		if _, err := capture(w, voided.ID, "cap-1", ""); !errors.Is(err, domain.ErrAuthorizationExpired) {
			t.Errorf("capture of a hold voided at the provider = %v; want ErrAuthorizationExpired", err)
		}
		if got := w.get(t, cust, voided.ID); got.Status != domain.StatusExpired || got.HoldAction != "" {
			t.Errorf("after it the order = %s owned by %q; want expired", got.Status, got.HoldAction)
		}
		if b := booksOf(t, w, voided); !b.Authorized.IsZero() || !b.Charged.IsZero() {
			t.Errorf("its books = %+v; want nothing", b)
		}

		captured := w.heldOrder(t, cust, "24.00")
		if _, err := w.prov.inner.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "dashboard-capture", ChargeID: chargeOf(captured),
			Amount: decimal.RequireFromString("5.00"), Currency: "EUR"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.orders.Cancel(ctx, cust, captured.ID); !errors.Is(err, domain.ErrOrderNotCancelable) {
			t.Errorf("cancel of a hold captured at the provider = %v; want ErrOrderNotCancelable", err)
		}
		got := w.get(t, cust, captured.ID)
		if got.Status != domain.StatusPaid || !got.CapturedAmount.Equal(decimal.RequireFromString("5.00")) {
			t.Errorf("after it the order = %s with %s captured; want paid 5.00", got.Status, got.CapturedAmount)
		}
		if b := booksOf(t, w, captured); !b.Authorized.IsZero() || !b.Charged.Equal(decimal.RequireFromString("5.00")) {
			t.Errorf("its books = %+v; want 5.00 charged, nothing held", b)
		}
	})
}

// TestHoldAuthorizedByWebhook: an asynchronous manual pay answers
// processing; the provider's payment.authorized, asked about, authorizes
// the order once, however often it is delivered.
func TestHoldAuthorizedByWebhook(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		amount := "24.00"
		o, err := w.orders.Create(ctx, service.Keyed{}, service.NewOrder{Merchant: true, CustomerID: cust, Currency: "EUR",
			CaptureMethod: "manual", Items: []service.NewItem{{SKU: "sku-1", Name: "Tea", Quantity: 1, UnitPrice: &amount}}})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || p.Status != domain.StatusProcessing {
			t.Fatalf("pay(pm_async, manual) = %v, %v; want processing", p.Status, err)
		}
		w.resolveAsync(t)
		var authorized []event
		for _, ev := range w.events(t, o.ID) {
			if ev.Type == domain.EventPaymentAuthorized {
				authorized = append(authorized, ev)
			}
		}
		if len(authorized) != 1 {
			t.Fatalf("%d payment.authorized events, want 1", len(authorized))
		}
		for range 2 {
			if _, err := w.receive(ctx, authorized[0]); err != nil {
				t.Fatal(err)
			}
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusAuthorized || got.CaptureBefore == nil {
			t.Fatalf("after payment.authorized the order = %s; want authorized", got.Status)
		}
		if b := booksOf(t, w, o); !b.Authorized.Equal(decimal.RequireFromString("24.00")) || !b.Charged.IsZero() {
			t.Errorf("books = %+v; want 24.00 held once", b)
		}
		if paid, err := capture(w, o.ID, "cap-1", ""); err != nil || paid.Status != domain.StatusPaid {
			t.Errorf("capture = %v, %v; want paid", paid.Status, err)
		}
	})
}
