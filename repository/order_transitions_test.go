package repository_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// step is one transition call on an order, at time now.
type step struct {
	name string
	run  func(ctx context.Context, s *repository.OrderStore, id string, now time.Time) (bool, error)
}

func claim(req string) step {
	return step{"Claim(" + req + ")", func(ctx context.Context, s *repository.OrderStore, id string, now time.Time) (bool, error) {
		return s.Claim(ctx, id, req, domain.AnyVersion, now)
	}}
}

func markPaid(req string) step {
	return step{"MarkPaid(" + req + ")", func(ctx context.Context, s *repository.OrderStore, id string, now time.Time) (bool, error) {
		return s.MarkPaid(ctx, id, req, testCause, now)
	}}
}

func release(req string) step {
	return step{"Release(" + req + ")", func(ctx context.Context, s *repository.OrderStore, id string, now time.Time) (bool, error) {
		return s.Release(ctx, id, req, testCause, now)
	}}
}

var cancel = step{"Cancel", func(ctx context.Context, s *repository.OrderStore, id string, now time.Time) (bool, error) {
	return s.Cancel(ctx, id, testCause, now)
}}

// orderAfter stores a pending order and applies setup to it, failing the
// test if any setup step does not apply.
func orderAfter(t *testing.T, db *repository.DB, setup ...step) domain.Order {
	t.Helper()
	o := newOrder(t, db)
	s := repository.NewOrderStore(db)
	for _, st := range setup {
		if ok, err := st.run(t.Context(), s, o.ID, t0); !ok || err != nil {
			t.Fatalf("setup %s = %v, %v, want true", st.name, ok, err)
		}
	}
	return findOrder(t, db, o.ID)
}

// TestOrderTransitions: each transition applies once (version+1, new
// status, updated_at) and a second identical call matches nothing and
// leaves the row exactly as it was.
func TestOrderTransitions(t *testing.T) {
	later := t0.Add(1500 * time.Millisecond)
	tests := []struct {
		setup      []step
		do         step
		wantStatus domain.OrderStatus
		wantReq    string
		wantPaid   bool
	}{
		{nil, claim("req-1"), domain.StatusProcessing, "req-1", false},
		{[]step{claim("req-1")}, markPaid("req-1"), domain.StatusPaid, "req-1", true},
		{[]step{claim("req-1")}, release("req-1"), domain.StatusPending, "", false},
		{nil, cancel, domain.StatusCancelled, "", false},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		for _, tt := range tests {
			before := orderAfter(t, db, tt.setup...)
			if ok, err := tt.do.run(t.Context(), s, before.ID, later); !ok || err != nil {
				t.Errorf("%s = %v, %v, want true", tt.do.name, ok, err)
			}
			after := findOrder(t, db, before.ID)
			if after.Status != tt.wantStatus || after.PayRequestID != tt.wantReq ||
				after.Version != before.Version+1 || !after.UpdatedAt.Equal(later) || (after.PaidAt != nil) != tt.wantPaid {
				t.Errorf("after %s: status %s, request %q, version %d, updated %v, paid %v; want %s, %q, %d, %v, paid %v",
					tt.do.name, after.Status, after.PayRequestID, after.Version, after.UpdatedAt, after.PaidAt,
					tt.wantStatus, tt.wantReq, before.Version+1, later, tt.wantPaid)
			}
			if tt.wantPaid && !after.PaidAt.Equal(later) {
				t.Errorf("after %s: paid_at %v, want %v", tt.do.name, after.PaidAt, later)
			}
			if ok, err := tt.do.run(t.Context(), s, before.ID, later.Add(time.Second)); ok || err != nil {
				t.Errorf("second %s = %v, %v, want false, nil", tt.do.name, ok, err)
			}
			if again := findOrder(t, db, before.ID); !equalOrders(again, after) {
				t.Errorf("second %s changed the order: %+v, want %+v", tt.do.name, again, after)
			}
		}
	})
}

// TestOrderTransitionGuards: a transition from the wrong status, or by a
// request that did not claim the order, matches nothing and changes nothing.
func TestOrderTransitionGuards(t *testing.T) {
	paid := []step{claim("req-1"), markPaid("req-1")}
	tests := []struct {
		setup []step
		do    step
	}{
		{[]step{claim("req-1")}, claim("req-2")},
		{[]step{claim("req-1")}, claim("req-1")},
		{[]step{claim("req-1")}, markPaid("req-2")},
		{[]step{claim("req-1")}, release("req-2")},
		{[]step{claim("req-1")}, cancel},
		{nil, markPaid("req-1")},
		{nil, release("req-1")},
		{paid, claim("req-2")},
		{paid, release("req-1")},
		{paid, cancel},
		{[]step{cancel}, claim("req-1")},
		{[]step{cancel}, cancel},
		{[]step{claim("req-1"), release("req-1")}, markPaid("req-1")},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		for _, tt := range tests {
			before := orderAfter(t, db, tt.setup...)
			if ok, err := tt.do.run(t.Context(), s, before.ID, t0.Add(time.Minute)); ok || err != nil {
				t.Errorf("%s after %s = %v, %v, want false, nil", tt.do.name, names(tt.setup), ok, err)
			}
			if after := findOrder(t, db, before.ID); !equalOrders(after, before) {
				t.Errorf("%s after %s changed the order: %+v, want %+v", tt.do.name, names(tt.setup), after, before)
			}
		}
		for _, st := range []step{claim("r"), markPaid("r"), release("r"), cancel} {
			if ok, err := st.run(t.Context(), s, newID(), t0); ok || err != nil {
				t.Errorf("%s on a missing order = %v, %v, want false, nil", st.name, ok, err)
			}
		}
	})
}

func names(steps []step) string {
	if len(steps) == 0 {
		return "create"
	}
	out := ""
	for _, s := range steps {
		out += s.name + ";"
	}
	return out
}

// TestOrderConcurrentClaim: 50 pay requests with 50 different request IDs
// race for one order; exactly one claims it and the order records it.
func TestOrderConcurrentClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := newOrder(t, db)
		const n = 50
		won := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ok, err := s.Claim(t.Context(), o.ID, fmt.Sprintf("req-%d", i), o.Version, t0)
				if err != nil {
					t.Errorf("Claim(req-%d) = %v", i, err)
				}
				won[i] = ok
			})
		}
		wg.Wait()
		winners := 0
		for i, ok := range won {
			if ok {
				winners++
				if got := findOrder(t, db, o.ID); got.PayRequestID != fmt.Sprintf("req-%d", i) || got.Version != 2 {
					t.Errorf("order after race: request %q, version %d; want req-%d, 2", got.PayRequestID, got.Version, i)
				}
			}
		}
		if winners != 1 {
			t.Errorf("%d of %d concurrent Claims returned true, want 1", winners, n)
		}
	})
}
