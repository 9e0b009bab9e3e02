package repository_test

import (
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestOrderLockMovesTheVersionOnly holds OrderStore.Lock to a write that
// changes nothing but the version, and returns the order as it is now.
func TestOrderLockMovesTheVersionOnly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		orders := repository.NewOrderStore(db)
		ctx := t.Context()
		o, _ := claimedOrder(t, db, repository.NewPayBatch(db), "req-1")
		before := findOrder(t, db, o.ID)
		got, err := orders.Lock(ctx, o.ID)
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
		if got.Version != before.Version+1 || got.Status != before.Status || got.PayRequestID != before.PayRequestID ||
			!got.UpdatedAt.Equal(before.UpdatedAt) || !got.RefundedAmount.Equal(before.RefundedAmount) {
			t.Errorf("Lock = %+v, want %+v at version %d and nothing else changed", got, before, before.Version+1)
		}
		if stored := findOrder(t, db, o.ID); stored.Version != got.Version {
			t.Errorf("stored version %d, Lock returned %d", stored.Version, got.Version)
		}
		if _, err := orders.Lock(ctx, "no-such-order"); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("Lock(unknown) = %v, want ErrOrderNotFound", err)
		}
	})
}

// TestPayBatchSucceedAndPayAtVersion: an order recorded something since its
// caller read it (an outside refund raised its version) is not paid by the
// batch; the attempt's success and its charge are committed alone, and the
// caller pays it step by step.
func TestPayBatchSucceedAndPayAtVersion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		later := t0.Add(time.Second)

		o, a := claimedOrder(t, db, b, "req-1")
		read := findOrder(t, db, o.ID)
		if _, err := repository.NewOrderStore(db).Lock(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), read.Version, testCause, later); err != nil || !settled || paid {
			t.Fatalf("SucceedAndPay(older version) = %v, %v, %v, want settled, not paid", settled, paid, err)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusProcessing {
			t.Errorf("order %s, want still processing", got.Status)
		}
		if as := attemptsOf(t, db, o.ID); as[0].Status != domain.AttemptSucceeded || as[0].ProviderChargeID != "ch_1" {
			t.Errorf("attempt %s charge %q, want succeeded ch_1", as[0].Status, as[0].ProviderChargeID)
		}

		o2, a2 := claimedOrder(t, db, b, "req-2")
		at := findOrder(t, db, o2.ID).Version
		if settled, paid, err := b.SucceedAndPay(ctx, a2, "ch_2", entryOf(a2, "ch_2", later), at, testCause, later); err != nil || !settled || !paid {
			t.Fatalf("SucceedAndPay(at its version) = %v, %v, %v, want settled and paid", settled, paid, err)
		}
		if got := findOrder(t, db, o2.ID); got.Status != domain.StatusPaid || got.Version != at+1 {
			t.Errorf("order %s at version %d, want paid at %d", got.Status, got.Version, at+1)
		}
	})
}
