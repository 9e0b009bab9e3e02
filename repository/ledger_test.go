package repository_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// chargeEntry builds (without storing) the ledger entry of a 10.00 USD
// charge chargeID of orderID, told by the pay reply at created.
func chargeEntry(orderID, chargeID string, created time.Time) domain.LedgerEntry {
	return domain.LedgerEntry{
		ID: newID(), OrderID: orderID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference(chargeID),
		ChargeID: chargeID, Amount: dec("10.00"), Currency: "USD", Source: domain.SourcePayReply, CreatedAt: created,
	}
}

func ledgerOf(t *testing.T, db *repository.DB, orderID string) []domain.LedgerEntry {
	t.Helper()
	es, err := repository.NewLedgerStore(db).ListByOrder(t.Context(), orderID)
	if err != nil {
		t.Fatalf("ListByOrder(%q) = %v", orderID, err)
	}
	return es
}

func appendEntry(t *testing.T, s *repository.LedgerStore, e domain.LedgerEntry) {
	t.Helper()
	if isNew, err := s.Append(t.Context(), e); err != nil || !isNew {
		t.Fatalf("Append(%s) = %v, %v, want true", e.Reference, isNew, err)
	}
}

// TestLedgerAppend: a new reference is stored as given; the same movement
// learned again, as another entry or as the same one, is not, and is no
// error.
func TestLedgerAppend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewLedgerStore(db)
		ctx := t.Context()

		e := domain.LedgerEntry{
			ID: newID(), OrderID: newID(), Kind: domain.LedgerOutsideRefund, Reference: domain.RefundReference("re_1"),
			ChargeID: "ch_1", Amount: dec("1.235"), Currency: "KWD", Source: domain.SourceOperator, Actor: "ada",
			Note: "refunded from the dashboard", CreatedAt: t0,
		}
		appendEntry(t, s, e)
		again := e
		again.ID, again.Source, again.Amount = newID(), domain.SourceWebhook, dec("2.000")
		if isNew, err := s.Append(ctx, again); err != nil || isNew {
			t.Errorf("Append(repeat under a new ID) = %v, %v, want false, nil", isNew, err)
		}
		if isNew, err := s.Append(ctx, e); err != nil || isNew {
			t.Errorf("Append(the same entry again) = %v, %v, want false, nil", isNew, err)
		}
		got := ledgerOf(t, db, e.OrderID)
		if len(got) != 1 {
			t.Fatalf("ListByOrder = %d entries, want 1: %+v", len(got), got)
		}
		g := got[0]
		if g.ID != e.ID || g.Kind != e.Kind || g.Reference != e.Reference || g.ChargeID != e.ChargeID ||
			!g.Amount.Equal(e.Amount) || g.Currency != e.Currency || g.Source != e.Source || g.Actor != e.Actor ||
			g.Note != e.Note || !g.CreatedAt.Equal(e.CreatedAt) {
			t.Errorf("stored %+v, want %+v", g, e)
		}

		// Another entry that takes a stored ID is a real conflict.
		clash := chargeEntry(e.OrderID, "ch_other", t0)
		clash.ID = e.ID
		if isNew, err := s.Append(ctx, clash); err == nil || isNew {
			t.Errorf("Append(another entry under a taken ID) = %v, %v, want an error", isNew, err)
		}
	})
}

// TestLedgerAppendRefuses: an entry the ledger must never hold is an
// error, not a silent drop, and nothing is stored.
func TestLedgerAppendRefuses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewLedgerStore(db)
		orderID := newID()
		tests := []struct {
			name   string
			change func(*domain.LedgerEntry)
		}{
			{"unknown kind", func(e *domain.LedgerEntry) { e.Kind = "chargeback" }},
			{"no kind", func(e *domain.LedgerEntry) { e.Kind = "" }},
			{"unknown source", func(e *domain.LedgerEntry) { e.Source = "rumour" }},
			{"zero amount", func(e *domain.LedgerEntry) { e.Amount = dec("0") }},
			{"negative amount", func(e *domain.LedgerEntry) { e.Amount = dec("-10.00") }},
			{"fraction of a cent", func(e *domain.LedgerEntry) { e.Amount = dec("10.005") }},
			{"unknown currency", func(e *domain.LedgerEntry) { e.Currency = "XXX" }},
			{"no reference", func(e *domain.LedgerEntry) { e.Reference = "" }},
			{"no order", func(e *domain.LedgerEntry) { e.OrderID = "" }},
		}
		for i, tt := range tests {
			e := chargeEntry(orderID, "ch_"+string(rune('a'+i)), t0)
			tt.change(&e)
			if isNew, err := s.Append(t.Context(), e); err == nil || isNew {
				t.Errorf("Append(%s) = %v, %v, want an error", tt.name, isNew, err)
			}
		}
		if got := ledgerOf(t, db, orderID); len(got) != 0 {
			t.Errorf("refused entries were stored: %+v", got)
		}
	})
}

// TestLedgerChecks: the database itself refuses a row with an unknown
// kind or source or a non-positive amount, whatever sends it.
func TestLedgerChecks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		insert := func(kind, source string, amount int64) error {
			_, err := db.Exec(t.Context(), `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id,
				currency, amount_minor, source, created_at) VALUES (?, ?, ?, ?, 'ch_1', 'USD', ?, ?, '2025-03-01 12:00:00.000000')`,
				newID(), newID(), kind, newID(), amount, source)
			return err
		}
		if err := insert("charge", "pay_reply", 1000); err != nil {
			t.Fatalf("a valid row = %v, want it stored", err)
		}
		if err := insert("chargeback", "pay_reply", 1000); err == nil {
			t.Error("a row of kind chargeback was stored, want the CHECK to refuse it")
		}
		if err := insert("charge", "rumour", 1000); err == nil {
			t.Error("a row of source rumour was stored, want the CHECK to refuse it")
		}
		if err := insert("charge", "pay_reply", 0); err == nil {
			t.Error("a row of amount 0 was stored, want the CHECK to refuse it")
		}
	})
}

// TestLedgerAppendRace: many callers learn one movement at once (the pay
// reply, webhooks, the recoverer); exactly one records it.
func TestLedgerAppendRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewLedgerStore(db)
		for round := range 3 {
			orderID, chargeID := newID(), "ch_race_"+string(rune('a'+round))
			const n = 16
			var wins atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					e := chargeEntry(orderID, chargeID, t0)
					<-start
					isNew, err := s.Append(context.Background(), e)
					if err != nil {
						t.Errorf("Append = %v", err)
					}
					if isNew {
						wins.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if w := wins.Load(); w != 1 {
				t.Errorf("%d appends reported new, want 1", w)
			}
			if got := ledgerOf(t, db, orderID); len(got) != 1 {
				t.Errorf("%d entries stored, want 1", len(got))
			}
		}
	})
}

// TestLedgerAppendInTx: an entry appended in a transaction is the
// transaction's: it stays when it commits, and goes when it rolls back.
func TestLedgerAppendInTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s, tx := repository.NewLedgerStore(db), repository.NewTransactor(db)

		kept := chargeEntry(newID(), "ch_kept", t0)
		err := tx.InTx(t.Context(), func(ctx context.Context) error {
			_, err := s.Append(ctx, kept)
			return err
		})
		if err != nil {
			t.Fatalf("InTx(Append) = %v", err)
		}
		if got := ledgerOf(t, db, kept.OrderID); len(got) != 1 {
			t.Errorf("after commit: %d entries, want 1", len(got))
		}

		undone := chargeEntry(newID(), "ch_undone", t0)
		boom := errors.New("boom")
		err = tx.InTx(t.Context(), func(ctx context.Context) error {
			if isNew, err := s.Append(ctx, undone); err != nil || !isNew {
				t.Errorf("Append in the transaction = %v, %v, want true", isNew, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want %v", err, boom)
		}
		if got := ledgerOf(t, db, undone.OrderID); len(got) != 0 {
			t.Errorf("after rollback: %d entries, want none", len(got))
		}
		// Rolled back, the reference is free again.
		appendEntry(t, s, undone)
	})
}

// TestLedgerRepeatInTx: a repeat inside a caller's transaction reports
// false and leaves the transaction whole: what it wrote before and after
// the repeat commits.
func TestLedgerRepeatInTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s, tx := repository.NewLedgerStore(db), repository.NewTransactor(db)
		o := newOrder(t, db)
		recorded := chargeEntry(o.ID, "ch_1", t0)
		appendEntry(t, s, recorded)

		before, after := chargeEntry(o.ID, "ch_before", t0.Add(time.Second)), chargeEntry(o.ID, "ch_after", t0.Add(2*time.Second))
		err := tx.InTx(t.Context(), func(ctx context.Context) error {
			if _, err := s.Append(ctx, before); err != nil {
				return err
			}
			if ok, err := repository.NewOrderStore(db).Cancel(ctx, o.ID, testCause, t0); err != nil || !ok {
				return errors.Join(err, errors.New("cancel matched nothing"))
			}
			repeat := chargeEntry(o.ID, "ch_1", t0)
			if isNew, err := s.Append(ctx, repeat); err != nil || isNew {
				t.Errorf("Append(repeat) in the transaction = %v, %v, want false, nil", isNew, err)
			}
			_, err := s.Append(ctx, after)
			return err
		})
		if err != nil {
			t.Fatalf("InTx with a repeat = %v, want it committed", err)
		}
		got := ledgerOf(t, db, o.ID)
		if len(got) != 3 || got[0].ID != recorded.ID || got[1].ID != before.ID || got[2].ID != after.ID {
			t.Errorf("ledger %+v, want the recorded charge, then ch_before and ch_after", got)
		}
		if st := findOrder(t, db, o.ID).Status; st != domain.StatusCancelled {
			t.Errorf("order %s, want cancelled: the transaction's other write was lost", st)
		}
	})
}

// TestLedgerListOrder: an order's entries come oldest first, ties by ID,
// and only that order's.
func TestLedgerListOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewLedgerStore(db)
		orderID := newID()
		third := chargeEntry(orderID, "ch_3", t0.Add(2*time.Minute))
		first := chargeEntry(orderID, "ch_1", t0)
		tieA, tieB := chargeEntry(orderID, "ch_2a", t0.Add(time.Minute)), chargeEntry(orderID, "ch_2b", t0.Add(time.Minute))
		tieA.ID, tieB.ID = "00000000-0000-7000-8000-00000000000a", "00000000-0000-7000-8000-00000000000b"
		for _, e := range []domain.LedgerEntry{third, tieB, first, tieA, chargeEntry(newID(), "ch_other", t0)} {
			appendEntry(t, s, e)
		}
		got := ledgerOf(t, db, orderID)
		want := []string{first.ID, tieA.ID, tieB.ID, third.ID}
		if len(got) != len(want) {
			t.Fatalf("ListByOrder = %d entries, want %d", len(got), len(want))
		}
		for i, e := range got {
			if e.ID != want[i] {
				t.Errorf("entry %d = %s (%s), want %s", i, e.ID, e.Reference, want[i])
			}
		}
	})
}
