package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// errUndone rolls back a transaction's first run.
var errUndone = errors.New("undone by the database")

// rerunning stands for a database that undoes the first run of every
// transaction after fn succeeded — a deadlock's victim, a Galera node whose
// COMMIT lost certification — so the repository runs fn again: here fn
// runs, is rolled back, between() may let a competitor commit, and fn runs
// again. Use cases must come out as if fn had run once.
type rerunning struct {
	inner   service.Transactor
	between func()
	reruns  atomic.Int32
}

func (r *rerunning) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	err := r.inner.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		return errUndone
	})
	if !errors.Is(err, errUndone) {
		return err
	}
	r.reruns.Add(1)
	if r.between != nil {
		r.between()
	}
	return r.inner.InTx(ctx, fn)
}

// rerunAll makes every use case of w run each transaction twice. The
// pay path's batched transactions (Checkout.Batch) are left out: they
// send no fn to run again, and their reruns are the repository's
// (TestPayBatchRerunLoses); here the pay path runs its step-by-step
// transactions, which it falls back to when a batch's guard fails.
func (w *world) rerunAll() *rerunning {
	r := &rerunning{inner: w.checkout.Tx}
	w.checkout.Tx, w.refunds.Tx, w.reconciler.Tx = r, r, r
	w.checkout.Batch = nil
	return r
}

// TestTransactionsRerun: when every transaction's first run is undone, a
// pay still charges once and pays the order, a decline releases it once,
// and a refund reserves and refunds once.
func TestTransactionsRerun(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		tx := w.rerunAll()
		cust := w.customer(t)

		o := w.order(t, cust, "10.00")
		if _, err := w.pay(cust, o.ID, newKey(), "pm_declined"); !errors.Is(err, domain.ErrPaymentDeclined) {
			t.Fatalf("Pay(pm_declined) = %v, want %v", err, domain.ErrPaymentDeclined)
		}
		if got := w.get(t, cust, o.ID); got.Status != domain.StatusPending {
			t.Fatalf("order after a decline = %s, want pending", got.Status)
		}
		paid, err := w.pay(cust, o.ID, newKey(), "pm_ok")
		if err != nil || paid.Status != domain.StatusPaid {
			t.Fatalf("Pay(pm_ok) = %s, %v; want paid", paid.Status, err)
		}
		if cs := w.charges(t, o.ID); len(cs) != 2 || w.outcomes("paid") != 1 || w.outcomes("declined") != 1 {
			t.Errorf("charges %v, paid %d, declined %d; want 2 charges (one declined), 1 paid, 1 declined",
				statusesOf(cs), w.outcomes("paid"), w.outcomes("declined"))
		}
		if got := w.get(t, cust, o.ID); got.Version != paid.Version {
			t.Errorf("order version = %d, Pay answered %d", got.Version, paid.Version)
		}

		if _, _, err := w.refunds.Refund(context.Background(), service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp", Amount: "4.00", Reason: "damaged"}); err != nil {
			t.Fatalf("Refund(4.00) = %v", err)
		}
		if cs := w.charges(t, o.ID); !cs[1].Refunded.Equal(decimal.RequireFromString("4.00")) {
			t.Errorf("refunded %s, want 4.00", cs[1].Refunded)
		}
		if tx.reruns.Load() < 4 { // claim, release, claim, succeed, reserve
			t.Errorf("transactions run again = %d, want at least 4", tx.reruns.Load())
		}
	})
}

// TestClaimRerunLoses: the claim's first run matched the order but was
// undone, and another request claimed the order before it ran again — as
// a Galera node learns at COMMIT that another node's claim won. The rerun
// matches nothing: the request is told the payment is in progress and
// nothing is charged.
func TestClaimRerunLoses(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "10.00")
		orders := repository.NewOrderStore(dbtest.OpenURL(t, w.url))
		w.checkout.Batch = nil // see rerunAll
		w.checkout.Tx = &rerunning{inner: w.checkout.Tx, between: func() {
			if won, err := orders.Claim(context.Background(), o.ID, "winner", domain.AnyVersion, w.clock.Now()); err != nil || !won {
				t.Errorf("winner's Claim = %v, %v; want true", won, err)
			}
		}}
		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrPaymentInProgress) {
			t.Errorf("Pay() after losing the claim = %v, want %v", err, domain.ErrPaymentInProgress)
		}
		if cs := w.charges(t, o.ID); len(cs) != 0 {
			t.Errorf("charges = %v, want none", statusesOf(cs))
		}
		if as := w.attempts(t, cust, o.ID); len(as) != 0 {
			t.Errorf("attempts = %d, want none (the loser's was rolled back)", len(as))
		}
	})
}

// TestReconcileRerun: a reconciliation whose transaction runs twice
// reports and stores its findings once.
func TestReconcileRerun(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		tx := w.rerunAll()
		cust := w.customer(t)
		o := w.order(t, cust, "9.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "9.00")
		from, to := w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)

		run, err := w.reconcile(from, to)
		if err != nil || run.Found != 1 || run.New != 1 || len(run.Discrepancies) != 1 {
			t.Fatalf("reconcile = found %d new %d, %d discrepancies, %v; want 1, 1, 1", run.Found, run.New, len(run.Discrepancies), err)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 1 {
			t.Errorf("discrepancies stored = %d, want 1", len(ds))
		}
		if tx.reruns.Load() < 1 {
			t.Error("the run's transaction was not run again")
		}
	})
}
