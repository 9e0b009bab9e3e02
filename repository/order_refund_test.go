package repository_test

import (
	"math/rand/v2"
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

// bookOf is order o's refund book in minor units.
func bookOf(o domain.Order) domain.RefundBook {
	return domain.RefundBook{
		Amount:   domain.MinorUnits(o.Amount, o.Currency),
		Refunded: domain.MinorUnits(o.RefundedAmount, o.Currency),
		Reserved: domain.MinorUnits(o.RefundPending, o.Currency),
	}
}

// TestRefundBookStatements holds the store's refund statements to
// domain's refund book: random moves of random amounts on paid orders
// (and orders in every other status), each done by MoveRefund on the
// database and by RefundBook.Apply on the book read before it. Both must
// agree on whether the move is allowed, and on the order's refunded and
// reserved amounts and status after it; a refused move leaves the row
// exactly as it was, an allowed one raises its version and stamps it.
func TestRefundBookStatements(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		r := rand.New(rand.NewPCG(7, 8))
		orders := []domain.Order{paidOrder(t, db), paidOrder(t, db), paidOrder(t, db),
			orderAfter(t, db), orderAfter(t, db, claim("req-1")), orderAfter(t, db, cancel)}
		amounts := []int64{1, 100, 400, 599, 600, 601, 800, 1199, 1200, 1201, 1 << 62}
		for i := range 300 {
			o := orders[r.IntN(len(orders))]
			before := findOrder(t, db, o.ID)
			m := domain.RefundMoves[r.IntN(len(domain.RefundMoves))]
			minor := amounts[r.IntN(len(amounts))]
			now := t0.Add(time.Duration(i+1) * time.Second)
			want, wantStatus, werr := bookOf(before).Apply(before.Status, m, minor)
			ok, err := s.MoveRefund(t.Context(), o.ID, m, minor, now)
			if err != nil {
				t.Fatalf("step %d: MoveRefund(%s, %d) = %v", i, m, minor, err)
			}
			after := findOrder(t, db, o.ID)
			if ok != (werr == nil) {
				t.Fatalf("step %d: MoveRefund(%s, %d) on %s %+v = %v; the book says %v", i, m, minor, before.Status, bookOf(before), ok, werr)
			}
			if !ok {
				if !equalOrders(after, before) {
					t.Fatalf("step %d: refused %s(%d) changed the order: %+v, want %+v", i, m, minor, after, before)
				}
				continue
			}
			if bookOf(after) != want || after.Status != wantStatus {
				t.Fatalf("step %d: %s(%d) on %s %+v left %s %+v; the book says %s %+v",
					i, m, minor, before.Status, bookOf(before), after.Status, bookOf(after), wantStatus, want)
			}
			if after.Version != before.Version+1 || !after.UpdatedAt.Equal(now) {
				t.Fatalf("step %d: after %s(%d): version %d, updated %v; want %d, %v", i, m, minor, after.Version, after.UpdatedAt, before.Version+1, now)
			}
		}
	})
}

// TestOrderRefundReservationIsNotMoney walks the story on one
// 12.00 order: a reservation of 8.00 in flight changes neither the
// refunded amount nor the status; an outside refund of 4.00 that arrives
// meanwhile is counted at once; the reservation released keeps it; and
// the rest settled makes the order refunded.
func TestOrderRefundReservationIsNotMoney(t *testing.T) {
	type want struct {
		ok                 bool
		status             domain.OrderStatus
		refunded, reserved string
	}
	steps := []struct {
		move  domain.RefundMove
		minor int64
		want  want
	}{
		{domain.MoveReserve, 800, want{true, domain.StatusPaid, "0.00", "8.00"}},
		{domain.MoveCount, 400, want{true, domain.StatusPaid, "4.00", "8.00"}},
		{domain.MoveReserve, 1, want{false, domain.StatusPaid, "4.00", "8.00"}}, // confirmed and reserved leave nothing
		{domain.MoveRelease, 800, want{true, domain.StatusPaid, "4.00", "0.00"}},
		{domain.MoveReserve, 800, want{true, domain.StatusPaid, "4.00", "8.00"}},
		{domain.MoveSettle, 800, want{true, domain.StatusRefunded, "12.00", "0.00"}},
		{domain.MoveReverse, 800, want{true, domain.StatusPaid, "4.00", "0.00"}},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db)
		for i, st := range steps {
			ok, err := s.MoveRefund(t.Context(), o.ID, st.move, st.minor, t0.Add(time.Duration(i+1)*time.Second))
			after := findOrder(t, db, o.ID)
			got := want{ok, after.Status, after.RefundedAmount.StringFixed(2), after.RefundPending.StringFixed(2)}
			if err != nil || got != st.want {
				t.Errorf("step %d: %s(%d) = %v, %v, leaving %+v; want %+v", i, st.move, st.minor, ok, err, got, st.want)
			}
		}
	})
}

// TestOrderRefundGuards: amounts must be positive and moves known; an
// order that does not exist matches nothing; an amount far beyond the
// order cannot overflow a guard's arithmetic.
func TestOrderRefundGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db)
		for _, m := range domain.RefundMoves {
			if ok, err := s.MoveRefund(t.Context(), newID(), m, 100, t0); ok || err != nil {
				t.Errorf("MoveRefund(missing order, %s) = %v, %v, want false, nil", m, ok, err)
			}
			for _, minor := range []int64{0, -100} {
				if _, err := s.MoveRefund(t.Context(), o.ID, m, minor, t0); err == nil {
					t.Errorf("MoveRefund(%s, %d) = nil error, want an error", m, minor)
				}
			}
			if ok, err := s.MoveRefund(t.Context(), o.ID, m, 1<<62, t0); ok || err != nil {
				t.Errorf("MoveRefund(%s, 2^62) = %v, %v, want false, nil", m, ok, err)
			}
		}
		if _, err := s.MoveRefund(t.Context(), o.ID, domain.RefundMove("nope"), 1, t0); err == nil {
			t.Errorf("MoveRefund(unknown move) = nil error, want an error")
		}
		if after := findOrder(t, db, o.ID); !equalOrders(after, o) {
			t.Errorf("refused moves changed the order: %+v, want %+v", after, o)
		}
	})
}

// TestOrderRefundMovesConcurrent: 20 operators reserve 1.00 of one 12.00
// order at once, and exactly 12 win; then, all at once, 6 reservations
// are settled, the other 6 released, and 3 outside refunds of 1.00
// counted. Whatever the interleaving, confirmed money ends at 9.00, none
// reserved, the order paid, and every move that won raised the version
// once.
func TestOrderRefundMovesConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db)
		var won atomic.Int64
		run := func(n int, m domain.RefundMove) {
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					ok, err := s.MoveRefund(t.Context(), o.ID, m, 100, t0.Add(time.Second))
					if err != nil {
						t.Errorf("MoveRefund(%s) = %v", m, err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
		}
		run(20, domain.MoveReserve)
		if got := findOrder(t, db, o.ID); won.Load() != 12 || got.RefundPending.StringFixed(2) != "12.00" ||
			got.RefundedAmount.StringFixed(2) != "0.00" || got.Status != domain.StatusPaid {
			t.Fatalf("20 concurrent reservations of 1.00: %d won, order %s refunded %s reserved %s; want 12, paid, 0.00, 12.00",
				won.Load(), got.Status, got.RefundedAmount.StringFixed(2), got.RefundPending.StringFixed(2))
		}
		var wg sync.WaitGroup
		for _, g := range []struct {
			n int
			m domain.RefundMove
		}{{6, domain.MoveSettle}, {6, domain.MoveRelease}, {3, domain.MoveCount}} {
			wg.Go(func() { run(g.n, g.m) })
		}
		wg.Wait()
		got := findOrder(t, db, o.ID)
		if won.Load() != 27 || got.RefundedAmount.StringFixed(2) != "9.00" || got.RefundPending.StringFixed(2) != "0.00" ||
			got.Status != domain.StatusPaid || got.Version != o.Version+27 {
			t.Errorf("after the moves: %d won, order %s refunded %s reserved %s version %d; want 27, paid, 9.00, 0.00, %d",
				won.Load(), got.Status, got.RefundedAmount.StringFixed(2), got.RefundPending.StringFixed(2), got.Version, o.Version+27)
		}
	})
}
