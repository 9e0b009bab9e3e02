package repository_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// paidOrder stores an order of 12.00 USD and pays it through req-1.
func paidOrder(t *testing.T, db *repository.DB) domain.Order {
	t.Helper()
	return orderAfter(t, db, claim("req-1"), markPaid("req-1"))
}

// TestOrderRefundReservations walks one paid 12.00 order through partial
// and full reservations and their release. Each call either applies (new
// status and refunded amount, version+1, updated_at) or matches nothing and
// leaves the row exactly as it was.
func TestOrderRefundReservations(t *testing.T) {
	type call struct {
		subtract bool
		minor    int64
		wantOK   bool
		status   domain.OrderStatus
		refunded string
	}
	steps := []call{
		// Half the amount: a CASE evaluated after refunded_minor was
		// assigned (MySQL's left-to-right SET) would wrongly say refunded.
		{false, 600, true, domain.StatusPaid, "6.00"},
		{false, 601, false, domain.StatusPaid, "6.00"}, // one cent too many
		{false, 600, true, domain.StatusRefunded, "12.00"},
		{false, 1, false, domain.StatusRefunded, "12.00"}, // nothing left, and not paid
		{true, 1201, false, domain.StatusRefunded, "12.00"},
		{true, 600, true, domain.StatusPaid, "6.00"}, // the provider refused the second refund
		{true, 601, false, domain.StatusPaid, "6.00"},
		{false, 599, true, domain.StatusPaid, "11.99"},
		{false, 1, true, domain.StatusRefunded, "12.00"}, // exactly at the full amount
		{true, 1200, true, domain.StatusPaid, "0.00"},
		{true, 1, false, domain.StatusPaid, "0.00"},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db)
		for i, st := range steps {
			before := findOrder(t, db, o.ID)
			now := t0.Add(time.Duration(i+1) * time.Second)
			name, ok, err := "AddRefund", false, error(nil)
			if st.subtract {
				name = "SubtractRefund"
				ok, err = s.SubtractRefund(t.Context(), o.ID, st.minor, now)
			} else {
				ok, err = s.AddRefund(t.Context(), o.ID, st.minor, now)
			}
			if ok != st.wantOK || err != nil {
				t.Errorf("step %d: %s(%d) = %v, %v, want %v", i, name, st.minor, ok, err, st.wantOK)
			}
			after := findOrder(t, db, o.ID)
			if after.Status != st.status || after.RefundedAmount.StringFixed(2) != st.refunded {
				t.Errorf("step %d: after %s(%d): %s, refunded %s; want %s, %s",
					i, name, st.minor, after.Status, after.RefundedAmount.StringFixed(2), st.status, st.refunded)
			}
			if !st.wantOK && !equalOrders(after, before) {
				t.Errorf("step %d: refused %s(%d) changed the order: %+v, want %+v", i, name, st.minor, after, before)
			}
			if st.wantOK && (after.Version != before.Version+1 || !after.UpdatedAt.Equal(now)) {
				t.Errorf("step %d: after %s(%d): version %d, updated %v; want %d, %v",
					i, name, st.minor, after.Version, after.UpdatedAt, before.Version+1, now)
			}
		}
	})
}

// TestOrderRefundGuards: only a paid order can be reserved against, and
// amounts must be positive.
func TestOrderRefundGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		for _, setup := range [][]step{nil, {claim("req-1")}, {cancel}} {
			before := orderAfter(t, db, setup...)
			if ok, err := s.AddRefund(t.Context(), before.ID, 100, t0); ok || err != nil {
				t.Errorf("AddRefund after %s = %v, %v, want false, nil", names(setup), ok, err)
			}
			if ok, err := s.SubtractRefund(t.Context(), before.ID, 100, t0); ok || err != nil {
				t.Errorf("SubtractRefund after %s = %v, %v, want false, nil", names(setup), ok, err)
			}
			if after := findOrder(t, db, before.ID); !equalOrders(after, before) {
				t.Errorf("refused refund after %s changed the order: %+v, want %+v", names(setup), after, before)
			}
		}
		if ok, err := s.AddRefund(t.Context(), newID(), 100, t0); ok || err != nil {
			t.Errorf("AddRefund(missing order) = %v, %v, want false, nil", ok, err)
		}
		o := paidOrder(t, db)
		for _, minor := range []int64{0, -100} {
			if _, err := s.AddRefund(t.Context(), o.ID, minor, t0); err == nil {
				t.Errorf("AddRefund(%d) = nil error, want an error", minor)
			}
			if _, err := s.SubtractRefund(t.Context(), o.ID, minor, t0); err == nil {
				t.Errorf("SubtractRefund(%d) = nil error, want an error", minor)
			}
		}
		// An amount far beyond the order cannot overflow the guard's arithmetic.
		if ok, err := s.AddRefund(t.Context(), o.ID, 1<<62, t0); ok || err != nil {
			t.Errorf("AddRefund(2^62) = %v, %v, want false, nil", ok, err)
		}
		if after := findOrder(t, db, o.ID); !equalOrders(after, o) {
			t.Errorf("refused refunds changed the order: %+v, want %+v", after, o)
		}
	})
}

// TestOrderAddRefundConcurrent: 20 operators reserve a slice of one 12.00
// order at once; the total never exceeds the amount, exactly as many as fit
// succeed, and the order is refunded exactly when all of it is reserved.
func TestOrderAddRefundConcurrent(t *testing.T) {
	tests := []struct {
		slice    int64
		wantOK   int64
		refunded string
		status   domain.OrderStatus
	}{
		{100, 12, "12.00", domain.StatusRefunded},
		{70, 17, "11.90", domain.StatusPaid},
		{1200, 1, "12.00", domain.StatusRefunded},
		{1300, 0, "0.00", domain.StatusPaid},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		for _, tt := range tests {
			o := paidOrder(t, db)
			const n = 20
			var won atomic.Int64
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					ok, err := s.AddRefund(t.Context(), o.ID, tt.slice, t0.Add(time.Second))
					if err != nil {
						t.Errorf("AddRefund(%d) = %v", tt.slice, err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			got := findOrder(t, db, o.ID)
			if won.Load() != tt.wantOK || got.RefundedAmount.StringFixed(2) != tt.refunded || got.Status != tt.status ||
				got.Version != o.Version+tt.wantOK {
				t.Errorf("%d concurrent AddRefund(%d): %d succeeded, order %s refunded %s version %d; want %d, %s, %s, %d",
					n, tt.slice, won.Load(), got.Status, got.RefundedAmount.StringFixed(2), got.Version,
					tt.wantOK, tt.status, tt.refunded, o.Version+tt.wantOK)
			}
		}
	})
}
