package service_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
)

// TestPaySucceeds: a charge the provider accepts pays the order, through
// one attempt and one charge under that attempt's ID.
func TestPaySucceeds(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "12.30")

		got, err := w.pay(cust, o.ID, newKey(), "pm_ok")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay = %v, %v, want paid", got.Status, err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Errorf("stored status = %v, want paid", st)
		}
		as := w.attempts(t, cust, o.ID)
		if len(as) != 1 || as[0].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %+v, want one succeeded", as)
		}
		cs := w.charges(t, o.ID)
		if len(cs) != 1 || cs[0].Key != as[0].ID || cs[0].Status != "succeeded" || !cs[0].Amount.Equal(o.Amount) {
			t.Fatalf("charges = %+v, want one succeeded for %s under key %s", cs, o.Amount, as[0].ID)
		}
	})
}

// TestPayDeclineReleasesOrder: a decline is a *domain.DeclineError with the
// provider's code (402) and gives the order back, so another key pays it.
func TestPayDeclineReleasesOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "20.00")

		_, err := w.pay(cust, o.ID, newKey(), "pm_insufficient_funds")
		var decline *domain.DeclineError
		if !errors.As(err, &decline) || decline.Code != "insufficient_funds" || !errors.Is(err, domain.ErrPaymentDeclined) {
			t.Fatalf("Pay(pm_insufficient_funds) = %v, want a DeclineError insufficient_funds", err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPending {
			t.Fatalf("status after decline = %v, want pending", st)
		}

		got, err := w.pay(cust, o.ID, newKey(), "pm_ok")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay with another key = %v, %v, want paid", got.Status, err)
		}
		as := w.attempts(t, cust, o.ID)
		if len(as) != 2 || as[0].Status != domain.AttemptFailed || as[1].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %+v, want failed then succeeded", as)
		}
		if got := statusesOf(w.charges(t, o.ID)); !slices.Equal(got, []string{"failed", "succeeded"}) {
			t.Fatalf("charges = %v, want one failed and one succeeded", got)
		}
	})
}

// TestPayReplaySameKey: the same key again answers the same outcome without
// asking the provider for a second charge; the key with another payment
// method is domain.ErrKeyReused.
func TestPayReplaySameKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "7.00")
		key := newKey()

		first, err := w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || first.Status != domain.StatusPaid {
			t.Fatalf("Pay = %v, %v, want paid", first.Status, err)
		}
		w.calls()
		again, err := w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || again.Status != domain.StatusPaid || again.ID != first.ID || again.PayRequestID != key {
			t.Fatalf("Pay again = %+v, %v, want the same paid order", again, err)
		}
		if calls := w.calls(); len(calls) != 0 {
			t.Errorf("provider calls on replay = %v, want none", calls)
		}
		if _, err := w.pay(cust, o.ID, key, "pm_declined"); !errors.Is(err, domain.ErrKeyReused) {
			t.Errorf("Pay same key, other method = %v, want ErrKeyReused", err)
		}
		if n := len(w.charges(t, o.ID)); n != 1 {
			t.Fatalf("charges = %d, want 1", n)
		}
		if n := len(w.attempts(t, cust, o.ID)); n != 1 {
			t.Fatalf("attempts = %d, want 1", n)
		}
	})
}

// TestPayConcurrentKeysChargeOnce: requests with different keys racing on
// one order, on a real database, claim it exactly once and charge once;
// every other one is told the payment is in progress or done.
func TestPayConcurrentKeysChargeOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		other := w.replica() // a second payd process on the same database
		for round := range 6 {
			o := w.order(t, cust, "9.99")
			const n = 8
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				errs  = make([]error, n)
				paid  = make([]bool, n)
			)
			for i := range n {
				p := w
				if i%2 == 1 {
					p = other
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got, err := p.pay(cust, o.ID, newKey(), "pm_ok")
					errs[i], paid[i] = err, err == nil && got.Status == domain.StatusPaid
				}()
			}
			close(start)
			wg.Wait()

			winners := 0
			for i, err := range errs {
				switch {
				case err == nil && paid[i]:
					winners++
				case errors.Is(err, domain.ErrPaymentInProgress), errors.Is(err, domain.ErrOrderAlreadyPaid):
				default:
					t.Errorf("round %d: request %d = %v, want paid, in progress or already paid", round, i, err)
				}
			}
			if winners != 1 {
				t.Errorf("round %d: %d requests paid, want exactly 1", round, winners)
			}
			if as := w.attempts(t, cust, o.ID); len(as) != 1 {
				t.Errorf("round %d: attempts = %d, want 1 (one claim)", round, len(as))
			}
			if cs := w.charges(t, o.ID); len(cs) != 1 {
				t.Errorf("round %d: charges = %v, want exactly one", round, statusesOf(cs))
			}
			if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
				t.Errorf("round %d: status = %v, want paid", round, st)
			}
		}
	})
}

// TestPayReplyLostRecoversByAsking: the provider charged but its reply was
// lost. The request answers processing (202); the same key later asks the
// provider about that very attempt before anything else, learns of the
// charge and pays the order — one charge in all.
func TestPayReplyLostRecoversByAsking(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "15.00")
		key := newKey()

		got, err := w.pay(cust, o.ID, key, "pm_timeout") // the sandbox charges and drops the reply
		if err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the reply lost = %v, %v, want processing and no error", got.Status, err)
		}
		as := w.attempts(t, cust, o.ID)
		if len(as) != 1 || as[0].Status != domain.AttemptUnknown {
			t.Fatalf("attempts = %+v, want one unknown", as)
		}
		id := as[0].ID
		if calls := w.calls(); !slices.Equal(calls, []string{"charge " + id}) {
			t.Fatalf("provider calls = %v, want one charge", calls)
		}

		got, err = w.pay(cust, o.ID, key, "pm_timeout")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay again with the key = %v, %v, want paid", got.Status, err)
		}
		if calls := w.calls(); !slices.Equal(calls, []string{"get " + id}) {
			t.Fatalf("provider calls on recovery = %v, want only a lookup of %s", calls, id)
		}
		if cs := w.charges(t, o.ID); len(cs) != 1 || cs[0].Key != id {
			t.Fatalf("charges = %+v, want exactly one, under %s", cs, id)
		}
		if as := w.attempts(t, cust, o.ID); len(as) != 1 || as[0].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %+v, want the one attempt succeeded", as)
		}
	})
}

// TestPayNeverReceivedIsAskedByReplaying: a charge request lost on its
// way to the provider. A retry asks the provider by replaying the create
// under the same attempt ID (ADR 54): the provider's answer is the charge,
// made once under that key whether the lost request arrives later or
// never, and the order is paid by that one charge. No look-up's "not
// found" is taken for "never charged".
func TestPayNeverReceivedIsAskedByReplaying(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "30.00")
		key := newKey()

		w.loseNextCharge()
		got, err := w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the request lost = %v, %v, want processing", got.Status, err)
		}
		id := w.attempts(t, cust, o.ID)[0].ID
		w.calls()

		got, err = w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay again = %v, %v, want paid by the replayed create", got.Status, err)
		}
		if calls := w.calls(); !slices.Equal(calls, []string{"get " + id}) {
			t.Fatalf("provider calls = %v, want one question under the attempt", calls)
		}
		if cs := w.charges(t, o.ID); len(cs) != 1 || cs[0].Key != id || cs[0].Status != "succeeded" {
			t.Fatalf("charges = %+v, want one succeeded under %s", cs, id)
		}
		if as := w.attempts(t, cust, o.ID); len(as) != 1 {
			t.Fatalf("attempts = %d, want 1: the replay is the same attempt", len(as))
		}
		w.clock.Advance(inFlightWindow + time.Second)
		if got, err = w.pay(cust, o.ID, key, "pm_ok"); err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay after the window = %v, %v, want paid", got.Status, err)
		}
		if cs := w.charges(t, o.ID); len(cs) != 1 {
			t.Fatalf("charges after the window = %d, want still 1", len(cs))
		}
	})
}

// TestPayAmountMismatchIsHeld: a success reported for other money is not
// applied: the attempt is held, the order stays claimed (no other payment
// can start), an amount_mismatch is recorded, and the key keeps answering
// so without asking the provider again.
func TestPayAmountMismatchIsHeld(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "10.00")
		key := newKey()
		w.misreportAmounts()

		if _, err := w.pay(cust, o.ID, key, "pm_ok"); !errors.Is(err, domain.ErrAmountMismatch) {
			t.Fatalf("Pay = %v, want ErrAmountMismatch", err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusProcessing {
			t.Fatalf("status = %v, want processing (held for an operator)", st)
		}
		as := w.attempts(t, cust, o.ID)
		if len(as) != 1 || as[0].Status != domain.AttemptHeld {
			t.Fatalf("attempts = %+v, want one held", as)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.AmountMismatch {
			t.Fatalf("discrepancies = %+v, want one amount_mismatch", ds)
		}
		w.calls()
		if _, err := w.pay(cust, o.ID, key, "pm_ok"); !errors.Is(err, domain.ErrAmountMismatch) {
			t.Errorf("Pay again with the key = %v, want ErrAmountMismatch", err)
		}
		if calls := w.calls(); len(calls) != 0 {
			t.Errorf("provider calls for a held attempt = %v, want none", calls)
		}
		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrPaymentInProgress) {
			t.Errorf("Pay with another key = %v, want ErrPaymentInProgress", err)
		}
		if n := len(w.charges(t, o.ID)); n != 1 {
			t.Fatalf("charges = %d, want 1", n)
		}
	})
}

// TestPayExpiredOrder: an order past its expires_at is not claimed, even
// before the expiry job has run, and nothing is charged.
func TestPayExpiredOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "5.00")
		w.clock.Advance(orderTTL + time.Minute)

		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrOrderExpired) {
			t.Fatalf("Pay = %v, want ErrOrderExpired", err)
		}
		if n := len(w.charges(t, o.ID)); n != 0 {
			t.Fatalf("charges = %d, want 0", n)
		}
		if n := len(w.attempts(t, cust, o.ID)); n != 0 {
			t.Fatalf("attempts = %d, want 0", n)
		}
	})
}

// TestPayOtherCustomersOrder: another customer's order is not found, and
// its existence does not leak through a charge or a claim.
func TestPayOtherCustomersOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		owner, stranger := w.customer(t), w.customer(t)
		o := w.order(t, owner, "5.00")

		if _, err := w.pay(stranger, o.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("Pay by another customer = %v, want ErrOrderNotFound", err)
		}
		if st := w.get(t, owner, o.ID).Status; st != domain.StatusPending {
			t.Fatalf("status = %v, want pending", st)
		}
		if n := len(w.charges(t, o.ID)); n != 0 {
			t.Fatalf("charges = %d, want 0", n)
		}
	})
}

// TestSettleCompletesRecord: an outcome that arrives after the pay request
// answered 202 completes that request's idempotency record with what the
// pay call would now answer — a success, or a decline that is final for
// the key — and applying it twice changes nothing more.
func TestSettleCompletesRecord(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		ok, fail := w.order(t, cust, "11.00"), w.order(t, cust, "12.00")
		okKey, failKey := newKey(), newKey()

		for _, p := range []struct{ order, key, method string }{{ok.ID, okKey, "pm_async"}, {fail.ID, failKey, "pm_async_fail"}} {
			got, err := w.payKeyed(t, cust, p.order, p.key, p.method)
			if err != nil || got.Status != domain.StatusProcessing {
				t.Fatalf("Pay(%s) = %v, %v, want processing", p.method, got.Status, err)
			}
			if r := w.recordOf(t, cust, p.key); r.Status != domain.RecordProcessing {
				t.Fatalf("record after 202 = %v, want processing", r.Status)
			}
		}
		w.resolveAsync(t)

		a := w.attempts(t, cust, ok.ID)[0]
		got, err := w.settleFromProvider(t, cust, a)
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Settle(success) = %v, %v, want paid", got.Status, err)
		}
		if r := w.recordOf(t, cust, okKey); r.Status != domain.RecordSucceeded || r.ResponseStatus != 200 {
			t.Fatalf("record after Settle = %v %d, want succeeded 200", r.Status, r.ResponseStatus)
		}
		if _, err := w.settleFromProvider(t, cust, a); err != nil {
			t.Fatalf("Settle again = %v", err)
		}
		if n := w.outcomes("paid"); n != 1 {
			t.Errorf("payments reported paid = %d, want 1", n)
		}

		fa := w.attempts(t, cust, fail.ID)[0]
		_, err = w.settleFromProvider(t, cust, fa)
		var decline *domain.DeclineError
		if !errors.As(err, &decline) || decline.Code != "card_declined" {
			t.Fatalf("Settle(failure) = %v, want a card_declined DeclineError", err)
		}
		if st := w.get(t, cust, fail.ID).Status; st != domain.StatusPending {
			t.Fatalf("status after a settled decline = %v, want pending", st)
		}
		r := w.recordOf(t, cust, failKey)
		if r.Status != domain.RecordFailed || r.ResponseStatus != 402 || r.CompletedBy != domain.CompletedInBackground {
			t.Fatalf("record after a settled decline = %v %d by %q, want failed 402 in background", r.Status, r.ResponseStatus, r.CompletedBy)
		}
	})
}

// TestPayTimeoutThenLateCharge: the provider does not answer before the
// charge request's deadline; payd gives up at it and answers processing.
// The request reaches the provider just after and is charged; a retry with
// the key, still inside the in-flight window, finds that charge by asking
// and pays the order with it — one charge.
func TestPayTimeoutThenLateCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "21.00")
		key := newKey()

		w.delayNextCharge()
		began := time.Now()
		got, err := w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay past the deadline = %v, %v, want processing", got.Status, err)
		}
		if took := time.Since(began); took > providerTimeout+10*time.Second {
			t.Fatalf("Pay took %v, want it to give up at the %v deadline", took, providerTimeout)
		}
		id := w.attempts(t, cust, o.ID)[0].ID
		if cs := w.charges(t, o.ID); len(cs) != 1 || cs[0].Key != id {
			t.Fatalf("charges = %+v, want the late one under %s", cs, id)
		}
		w.calls()

		got, err = w.pay(cust, o.ID, key, "pm_ok")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay again = %v, %v, want paid", got.Status, err)
		}
		if calls := w.calls(); !slices.Equal(calls, []string{"get " + id}) {
			t.Fatalf("provider calls = %v, want only a lookup", calls)
		}
		if n := len(w.charges(t, o.ID)); n != 1 {
			t.Fatalf("charges = %d, want 1", n)
		}
	})
}

// TestPaySameKeyConcurrently: the same key sent twice at once (a client
// retrying before its first answer) charges once: one request pays, the
// other answers paid or still processing, never a second charge.
func TestPaySameKeyConcurrently(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		other := w.replica()
		for round := range 4 {
			o := w.order(t, cust, "4.50")
			key := newKey()
			var wg sync.WaitGroup
			start := make(chan struct{})
			results := make([]domain.OrderStatus, 2)
			for i, p := range []*world{w, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got, err := p.pay(cust, o.ID, key, "pm_ok")
					if err != nil {
						t.Errorf("round %d: Pay on replica %d = %v, want no error", round, i, err)
					}
					results[i] = got.Status
				}()
			}
			close(start)
			wg.Wait()
			if !slices.Contains(results, domain.StatusPaid) {
				t.Errorf("round %d: answers = %v, want one paid", round, results)
			}
			for _, st := range results {
				if st != domain.StatusPaid && st != domain.StatusProcessing {
					t.Errorf("round %d: answers = %v, want paid or processing", round, results)
				}
			}
			if n := len(w.charges(t, o.ID)); n != 1 {
				t.Errorf("round %d: charges = %d, want 1", round, n)
			}
			if n := len(w.attempts(t, cust, o.ID)); n != 1 {
				t.Errorf("round %d: attempts = %d, want 1", round, n)
			}
		}
	})
}

// TestPayOrderChangedSinceCreated: the order a replica remembers from
// creating it is a hint, not the truth (ADR 0034). Changed since on
// another replica, the pay decides from the order as it is: cancelled, it
// is not payable and nothing is charged; claimed, declined and released,
// it is paid, and the answer carries the order's real version, as a read
// of it would.
func TestPayOrderChangedSinceCreated(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		other := w.replica()

		cancelled := w.order(t, cust, "3.00")
		if _, err := other.orders.Cancel(context.Background(), cust, cancelled.ID); err != nil {
			t.Fatalf("Cancel on another replica = %v", err)
		}
		if _, err := w.pay(cust, cancelled.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrOrderNotPayable) {
			t.Errorf("Pay(cancelled elsewhere) = %v, want ErrOrderNotPayable", err)
		}
		if n := len(w.charges(t, cancelled.ID)); n != 0 {
			t.Errorf("charges of the cancelled order = %d, want 0", n)
		}

		released := w.order(t, cust, "4.00")
		if _, err := other.pay(cust, released.ID, newKey(), "pm_insufficient_funds"); !errors.Is(err, domain.ErrPaymentDeclined) {
			t.Fatalf("Pay(declined) on another replica = %v", err)
		}
		got, err := w.pay(cust, released.ID, newKey(), "pm_ok")
		if err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay(released elsewhere) = %v, %v, want paid", got.Status, err)
		}
		if stored := w.get(t, cust, released.ID); got.Version != stored.Version {
			t.Errorf("answer's version = %d, stored version = %d", got.Version, stored.Version)
		}
		if got := statusesOf(w.charges(t, released.ID)); !slices.Equal(got, []string{"failed", "succeeded"}) {
			t.Errorf("charges = %v, want one failed and one succeeded", got)
		}
	})
}

// TestPayClaimsRememberedOrderWithoutReading: the replica that created an
// order pays it without reading it (ADR 0034): one statement fewer than
// the same pay of an order another replica created, with the same answer.
func TestPayClaimsRememberedOrderWithoutReading(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		other := w.replica()
		mine, theirs := w.order(t, cust, "6.00"), other.order(t, cust, "6.00")
		counter := dbtest.CountStatements(w.db)
		payCounted := func(orderID string) (domain.Order, int64) {
			t.Helper()
			counter.Reset()
			o, err := w.pay(cust, orderID, newKey(), "pm_ok")
			if err != nil || o.Status != domain.StatusPaid {
				t.Fatalf("Pay(%s) = %v, %v, want paid", orderID, o.Status, err)
			}
			return o, counter.Load()
		}
		gotMine, remembered := payCounted(mine.ID)
		gotTheirs, read := payCounted(theirs.ID)
		if read != remembered+1 {
			t.Errorf("statements: %d paying the order this replica created, %d paying one it did not; want one fewer", remembered, read)
		}
		if gotMine.Version != gotTheirs.Version || gotMine.Version != w.get(t, cust, mine.ID).Version {
			t.Errorf("answer versions %d (remembered) and %d (read), stored %d: want the same", gotMine.Version, gotTheirs.Version, w.get(t, cust, mine.ID).Version)
		}
	})
}
