package repository_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestBatchReads: the reads a reconciliation run decides a page with
// return what exists of what was asked, each row under its key, a
// group's rows oldest first, and nothing for an empty ask.
func TestBatchReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, ctx := dbtest.Open(t, d), t.Context()
		orders, attempts, ledger := repository.NewOrderStore(db), repository.NewAttemptStore(db), repository.NewLedgerStore(db)
		a, b, none := newOrder(t, db), newOrder(t, db), newOrder(t, db)
		a1 := newAttempt(t, attempts, a, "req-1", t0)
		a2 := newAttempt(t, attempts, a, "req-2", t0.Add(time.Second))
		b1 := newAttempt(t, attempts, b, "req-1", t0)
		ea := chargeEntry(a.ID, "ch_a", t0)
		eb := chargeEntry(b.ID, "ch_b", t0)
		appendEntry(t, ledger, ea)
		appendEntry(t, ledger, eb)

		found, err := orders.FindByIDs(ctx, []string{a.ID, "no-such-order", b.ID})
		if err != nil || !slices.Equal(slices.Sorted(maps.Keys(found)), slices.Sorted(slices.Values([]string{a.ID, b.ID}))) || found[a.ID].Amount.IsZero() {
			t.Errorf("orders.FindByIDs = %v, %v; want a and b", found, err)
		}
		byID, err := attempts.FindByIDs(ctx, []string{a2.ID, b1.ID, "no-such-attempt"})
		if err != nil || len(byID) != 2 || byID[a2.ID].OrderID != a.ID || byID[b1.ID].RequestID != "req-1" {
			t.Errorf("attempts.FindByIDs = %v, %v; want a2 and b1", byID, err)
		}
		byOrder, err := attempts.ListByOrders(ctx, []string{a.ID, b.ID, none.ID})
		if err != nil || len(byOrder) != 2 || len(byOrder[a.ID]) != 2 || byOrder[a.ID][0].ID != a1.ID || byOrder[a.ID][1].ID != a2.ID || len(byOrder[b.ID]) != 1 {
			t.Errorf("attempts.ListByOrders = %v, %v; want a's two oldest first and b's one", byOrder, err)
		}
		entries, err := ledger.ListByOrders(ctx, []string{a.ID, none.ID})
		if err != nil || len(entries) != 1 || len(entries[a.ID]) != 1 || entries[a.ID][0].Reference != ea.Reference {
			t.Errorf("ledger.ListByOrders = %v, %v; want a's entry", entries, err)
		}
		booked, err := ledger.Booked(ctx, []string{eb.Reference, "charge:ch_never"})
		if err != nil || !booked[eb.Reference] || booked["charge:ch_never"] || len(booked) != 1 {
			t.Errorf("Booked = %v, %v; want only b's charge", booked, err)
		}
		for name, read := range map[string]func() (int, error){
			"orders":   func() (int, error) { m, err := orders.FindByIDs(ctx, nil); return len(m), err },
			"attempts": func() (int, error) { m, err := attempts.FindByIDs(ctx, nil); return len(m), err },
			"by order": func() (int, error) { m, err := attempts.ListByOrders(ctx, nil); return len(m), err },
			"ledger":   func() (int, error) { m, err := ledger.ListByOrders(ctx, nil); return len(m), err },
			"booked":   func() (int, error) { m, err := ledger.Booked(ctx, nil); return len(m), err },
		} {
			if n, err := read(); n != 0 || err != nil {
				t.Errorf("%s of nothing = %d, %v; want none", name, n, err)
			}
		}
	})
}
