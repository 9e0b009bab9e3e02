package repository_test

import (
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// paidAt stores an order claimed and paid at the given time.
func paidAt(t *testing.T, db *repository.DB, at time.Time) domain.Order {
	t.Helper()
	o := newOrder(t, db)
	s := repository.NewOrderStore(db)
	// Claimed an hour before it was paid: before the fixture's expires_at.
	if ok, err := s.Claim(t.Context(), o.ID, "req-1", domain.AnyVersion, at.Add(-time.Hour)); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if ok, err := s.MarkPaid(t.Context(), o.ID, "req-1", testCause, at); !ok || err != nil {
		t.Fatalf("MarkPaid = %v, %v", ok, err)
	}
	return o
}

func orderIDs(list []domain.Order) []string {
	out := make([]string, len(list))
	for i, o := range list {
		out[i] = o.ID
	}
	return out
}

// TestOrderListPaidBetween: paid and refunded orders with paid_at in
// [from, to), by ID, paged by cursor, with their items.
func TestOrderListPaidBetween(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		from, to := t0, t0.Add(time.Hour)
		atFrom := paidAt(t, db, from)
		refunded := paidAt(t, db, from.Add(time.Minute))
		if ok, err := s.MoveRefund(t.Context(), refunded.ID, domain.MoveCount, 1200, to); !ok || err != nil {
			t.Fatalf("MoveRefund(count all) = %v, %v", ok, err)
		}
		justBeforeTo := paidAt(t, db, to.Add(-time.Microsecond))
		tie := paidAt(t, db, from.Add(time.Minute)) // paid with refunded, its ID after justBeforeTo's
		paidAt(t, db, to)                           // excluded: the window is half open
		paidAt(t, db, from.Add(-time.Microsecond))  // excluded: before the window
		orderAfter(t, db, claim("req-1"))           // processing: not paid
		newOrder(t, db)                             // pending

		// By paid_at, then ID.
		want := []string{atFrom.ID, refunded.ID, tie.ID, justBeforeTo.ID}
		if refunded.ID > tie.ID {
			want[1], want[2] = tie.ID, refunded.ID
		}
		got, err := s.ListPaidBetween(t.Context(), from, to, "", 10)
		if err != nil || !slices.Equal(orderIDs(got), want) {
			t.Fatalf("ListPaidBetween(%v, %v) = %v, %v, want %v", from, to, orderIDs(got), err, want)
		}
		for _, o := range got {
			if len(o.Items) != 0 || o.PaidAt == nil {
				t.Errorf("ListPaidBetween: order %s has %d items, paid_at %v; want none (not read) and a time", o.ID, len(o.Items), o.PaidAt)
			}
		}
		var paged []string
		for after := ""; ; {
			page, err := s.ListPaidBetween(t.Context(), from, to, after, 2)
			if err != nil {
				t.Fatalf("ListPaidBetween(after %q) = %v", after, err)
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, orderIDs(page)...)
			after = page[len(page)-1].ID
		}
		if !slices.Equal(paged, want) {
			t.Errorf("ListPaidBetween paged by 2 = %v, want %v", paged, want)
		}
		if _, err := s.ListPaidBetween(t.Context(), from, to, newID(), 2); err == nil {
			t.Errorf("ListPaidBetween(after an ID no paid order has) took it")
		}
		if got, err := s.ListPaidBetween(t.Context(), to.Add(time.Hour), to.Add(2*time.Hour), "", 10); err != nil || got == nil || len(got) != 0 {
			t.Errorf("ListPaidBetween(empty window) = %#v, %v, want an empty, non-nil list", got, err)
		}
	})
}

// TestOrderListStuck: processing orders whose last change is older than
// the cutoff, the longest stuck first.
func TestOrderListStuck(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		claimAt := func(at time.Time) domain.Order {
			o := newOrder(t, db)
			if ok, err := s.Claim(t.Context(), o.ID, "req-1", domain.AnyVersion, at); !ok || err != nil {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			return o
		}
		cutoff := t0.Add(time.Minute)
		second := claimAt(cutoff.Add(-time.Microsecond))
		first := claimAt(t0)
		claimAt(cutoff) // not older than the cutoff
		paidAt(t, db, t0)
		newOrder(t, db)

		got, err := s.ListStuck(t.Context(), cutoff, 10)
		if err != nil || !slices.Equal(orderIDs(got), []string{first.ID, second.ID}) {
			t.Errorf("ListStuck(%v) = %v, %v, want [%s %s]", cutoff, orderIDs(got), err, first.ID, second.ID)
		}
		if len(got) > 0 && (got[0].Status != domain.StatusProcessing || len(got[0].Items) != 2) {
			t.Errorf("ListStuck: %s with %d items, want processing with 2", got[0].Status, len(got[0].Items))
		}
		if got, err := s.ListStuck(t.Context(), cutoff, 1); err != nil || !slices.Equal(orderIDs(got), []string{first.ID}) {
			t.Errorf("ListStuck(limit 1) = %v, %v, want [%s]", orderIDs(got), err, first.ID)
		}
	})
}
