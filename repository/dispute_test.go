package repository_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// newDispute builds (without storing) an open dispute of 10.00 USD of
// charge chargeID, opened at t0 under the provider's ID du_<chargeID>.
func newDispute(orderID, chargeID string) domain.Dispute {
	return domain.Dispute{
		ID: newID(), ProviderDisputeID: "du_" + chargeID, OrderID: orderID, ChargeID: chargeID,
		Status: domain.DisputeOpen, Amount: dec("10.00"), Currency: "USD", Reason: "fraudulent",
		OpenedAt: t0, UpdatedAt: t0,
	}
}

func openDispute(t *testing.T, s *repository.DisputeStore, d domain.Dispute) domain.Dispute {
	t.Helper()
	got, isNew, err := s.Open(t.Context(), d)
	if err != nil || !isNew {
		t.Fatalf("Open(%s) = %v, %v, want new", d.ProviderDisputeID, isNew, err)
	}
	return got
}

func findDispute(t *testing.T, s *repository.DisputeStore, providerID string) domain.Dispute {
	t.Helper()
	d, err := s.FindByProviderID(t.Context(), providerID)
	if err != nil {
		t.Fatalf("FindByProviderID(%q) = %v", providerID, err)
	}
	return d
}

// TestDisputeOpen: a dispute is stored open whatever it says, once; the
// provider's reporting it again returns the stored one.
func TestDisputeOpen(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		ctx := t.Context()

		in := newDispute(newID(), "ch_1")
		in.Status, in.Amount, in.Currency = domain.DisputeWon, dec("1501"), "JPY"
		got := openDispute(t, s, in)
		stored := findDispute(t, s, in.ProviderDisputeID)
		for _, g := range []domain.Dispute{got, stored} {
			if g.ID != in.ID || g.Status != domain.DisputeOpen || !g.Amount.Equal(in.Amount) || g.Currency != "JPY" ||
				g.OrderID != in.OrderID || g.ChargeID != "ch_1" || g.Reason != "fraudulent" ||
				!g.OpenedAt.Equal(t0) || !g.UpdatedAt.Equal(t0) || g.ClosedAt != nil {
				t.Errorf("dispute %+v, want %+v open", g, in)
			}
		}

		again := newDispute(in.OrderID, "ch_1")
		again.Reason = "duplicate"
		if g, isNew, err := s.Open(ctx, again); err != nil || isNew || g.ID != in.ID || g.Reason != "fraudulent" {
			t.Errorf("Open(reported again) = %+v, %v, %v, want the stored dispute %s, not new", g, isNew, err, in.ID)
		}
		if g, isNew, err := s.Open(ctx, in); err != nil || isNew || g.ID != in.ID {
			t.Errorf("Open(the same dispute again) = %+v, %v, %v, want the stored one, not new", g, isNew, err)
		}
		if ds, err := s.ListByOrder(ctx, in.OrderID); err != nil || len(ds) != 1 {
			t.Errorf("ListByOrder = %d disputes, %v, want 1", len(ds), err)
		}

		if _, err := s.FindByProviderID(ctx, "du_nobody"); !errors.Is(err, domain.ErrDisputeNotFound) {
			t.Errorf("FindByProviderID(unknown) = %v, want %v", err, domain.ErrDisputeNotFound)
		}
		bad := newDispute(in.OrderID, "ch_bad")
		bad.Amount = dec("0")
		if _, isNew, err := s.Open(ctx, bad); err == nil || isNew {
			t.Errorf("Open(amount 0) = %v, %v, want an error", isNew, err)
		}
		bad = newDispute(in.OrderID, "ch_bad")
		bad.ProviderDisputeID = ""
		if _, isNew, err := s.Open(ctx, bad); err == nil || isNew {
			t.Errorf("Open(no provider ID) = %v, %v, want an error", isNew, err)
		}
	})
}

// TestDisputeEvidenceDue: a dispute opens with the provider's evidence
// date or none; SetEvidenceDue fills it in or moves it, reports a change
// only when the date differs, and touches no other dispute.
func TestDisputeEvidenceDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		ctx := t.Context()
		due := t0.Add(7*24*time.Hour + 1500*time.Microsecond)

		dated := newDispute(newID(), "ch_dated")
		dated.EvidenceDueBy = &due
		openDispute(t, s, dated)
		if g := findDispute(t, s, dated.ProviderDisputeID); g.EvidenceDueBy == nil || !g.EvidenceDueBy.Equal(due) {
			t.Errorf("opened with a date: evidence due %v, want %v", g.EvidenceDueBy, due)
		}

		undated := openDispute(t, s, newDispute(newID(), "ch_undated"))
		if g := findDispute(t, s, undated.ProviderDisputeID); g.EvidenceDueBy != nil {
			t.Errorf("opened without a date: evidence due %v, want none", g.EvidenceDueBy)
		}
		later := t0.Add(time.Hour)
		for i, want := range []bool{true, false} {
			changed, err := s.SetEvidenceDue(ctx, undated.ID, due, later)
			if err != nil || changed != want {
				t.Errorf("SetEvidenceDue #%d = %v, %v, want %v", i+1, changed, err, want)
			}
		}
		g := findDispute(t, s, undated.ProviderDisputeID)
		if g.EvidenceDueBy == nil || !g.EvidenceDueBy.Equal(due) || !g.UpdatedAt.Equal(later) {
			t.Errorf("after SetEvidenceDue: due %v, updated %v, want %v and %v", g.EvidenceDueBy, g.UpdatedAt, due, later)
		}
		moved := due.Add(48 * time.Hour)
		if changed, err := s.SetEvidenceDue(ctx, undated.ID, moved, later); err != nil || !changed {
			t.Errorf("SetEvidenceDue(moved) = %v, %v, want a change", changed, err)
		}
		if g := findDispute(t, s, undated.ProviderDisputeID); g.EvidenceDueBy == nil || !g.EvidenceDueBy.Equal(moved) {
			t.Errorf("moved: evidence due %v, want %v", g.EvidenceDueBy, moved)
		}
		if g := findDispute(t, s, dated.ProviderDisputeID); g.EvidenceDueBy == nil || !g.EvidenceDueBy.Equal(due) {
			t.Errorf("the other dispute's evidence due %v, want it left at %v", g.EvidenceDueBy, due)
		}
	})
}

// TestDisputeOpenRace: the provider's event, its retry and a
// reconciliation run open one dispute at once; exactly one opens it and
// all get the same stored dispute.
func TestDisputeOpenRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		orderID := newID()
		const n = 16
		ids := make(chan string, n)
		news := make(chan string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				in := newDispute(orderID, "ch_race")
				<-start
				got, isNew, err := s.Open(context.Background(), in)
				if err != nil {
					t.Errorf("Open = %v", err)
					return
				}
				ids <- got.ID
				if isNew {
					news <- in.ID
				}
			})
		}
		close(start)
		wg.Wait()
		close(ids)
		close(news)
		var winners []string
		for id := range news {
			winners = append(winners, id)
		}
		if len(winners) != 1 {
			t.Fatalf("%d opens reported new, want 1", len(winners))
		}
		for id := range ids {
			if id != winners[0] {
				t.Errorf("an opener got dispute %s, want the stored %s", id, winners[0])
			}
		}
		if ds, err := s.ListByOrder(t.Context(), orderID); err != nil || len(ds) != 1 {
			t.Errorf("ListByOrder = %d disputes, %v, want 1", len(ds), err)
		}
	})
}

// TestDisputeClose: a dispute closes once, won or lost; a close of a
// closed dispute changes nothing.
func TestDisputeClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		ctx := t.Context()
		closed := t0.Add(time.Hour)
		for _, tt := range []struct {
			e    domain.DisputeEvent
			want domain.DisputeStatus
		}{{domain.DisputeEventWin, domain.DisputeWon}, {domain.DisputeEventLose, domain.DisputeLost}} {
			dp := openDispute(t, s, newDispute(newID(), "ch_"+string(tt.e)))
			if ok, err := s.Close(ctx, dp.ID, tt.e, closed); err != nil || !ok {
				t.Fatalf("Close(%s) = %v, %v, want true", tt.e, ok, err)
			}
			got := findDispute(t, s, dp.ProviderDisputeID)
			if got.Status != tt.want || got.ClosedAt == nil || !got.ClosedAt.Equal(closed) || !got.UpdatedAt.Equal(closed) {
				t.Errorf("after Close(%s): %s closed at %v, updated %v; want %s at %v", tt.e, got.Status, got.ClosedAt, got.UpdatedAt, tt.want, closed)
			}
			for _, e := range domain.DisputeEvents {
				if ok, err := s.Close(ctx, dp.ID, e, closed.Add(time.Hour)); err != nil || ok {
					t.Errorf("Close(%s) of a %s dispute = %v, %v, want false", e, tt.want, ok, err)
				}
			}
			if again := findDispute(t, s, dp.ProviderDisputeID); again.Status != tt.want || !again.ClosedAt.Equal(closed) || !again.UpdatedAt.Equal(closed) {
				t.Errorf("a refused close changed the dispute: %s closed at %v", again.Status, again.ClosedAt)
			}
		}
		dp := openDispute(t, s, newDispute(newID(), "ch_unknown_event"))
		if ok, err := s.Close(ctx, dp.ID, "withdraw", closed); err == nil || ok {
			t.Errorf("Close(unknown event) = %v, %v, want an error", ok, err)
		}
		if ok, err := s.Close(ctx, newID(), domain.DisputeEventWin, closed); err != nil || ok {
			t.Errorf("Close(unknown dispute) = %v, %v, want false", ok, err)
		}
	})
}

// TestDisputeCloseRace: a won and a lost (and their redeliveries) race on
// one dispute; exactly one closes it, and its status is the winner's.
func TestDisputeCloseRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		for round := range 5 {
			dp := openDispute(t, s, newDispute(newID(), "ch_close_race_"+string(rune('a'+round))))
			const n = 8
			won := make(chan domain.DisputeEvent, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					e := domain.DisputeEvents[i%len(domain.DisputeEvents)]
					<-start
					ok, err := s.Close(context.Background(), dp.ID, e, t0.Add(time.Duration(i)*time.Second))
					if err != nil {
						t.Errorf("Close = %v", err)
					}
					if ok {
						won <- e
					}
				})
			}
			close(start)
			wg.Wait()
			close(won)
			var winners []domain.DisputeEvent
			for e := range won {
				winners = append(winners, e)
			}
			if len(winners) != 1 {
				t.Fatalf("%d closes won, want 1: %v", len(winners), winners)
			}
			if got := findDispute(t, s, dp.ProviderDisputeID); got.Status != winners[0].To() || got.ClosedAt == nil {
				t.Errorf("dispute %s closed at %v, want %s (the winner's)", got.Status, got.ClosedAt, winners[0].To())
			}
		}
	})
}

// TestDisputeOpenForCharge: a charge is under dispute while one of its
// disputes is open; CountOpen counts the open ones of every charge.
func TestDisputeOpenForCharge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewDisputeStore(db)
		ctx := t.Context()
		isOpen := func(chargeID string) bool {
			t.Helper()
			open, err := s.OpenForCharge(ctx, chargeID)
			if err != nil {
				t.Fatalf("OpenForCharge(%q) = %v", chargeID, err)
			}
			return open
		}
		count := func() int64 {
			t.Helper()
			n, err := s.CountOpen(ctx)
			if err != nil {
				t.Fatalf("CountOpen = %v", err)
			}
			return n
		}
		if isOpen("ch_1") || count() != 0 {
			t.Fatalf("an empty store has open disputes")
		}
		orderID := newID()
		first := openDispute(t, s, newDispute(orderID, "ch_1"))
		second := newDispute(orderID, "ch_2")
		second.OpenedAt = t0.Add(time.Minute)
		openDispute(t, s, second)
		if !isOpen("ch_1") || !isOpen("ch_2") || isOpen("ch_3") || count() != 2 {
			t.Errorf("OpenForCharge(ch_1, ch_2, ch_3) = %v, %v, %v; CountOpen = %d; want true, true, false; 2",
				isOpen("ch_1"), isOpen("ch_2"), isOpen("ch_3"), count())
		}
		if ok, err := s.Close(ctx, first.ID, domain.DisputeEventLose, t0.Add(time.Hour)); err != nil || !ok {
			t.Fatalf("Close = %v, %v", ok, err)
		}
		if isOpen("ch_1") || !isOpen("ch_2") || count() != 1 {
			t.Errorf("after ch_1's dispute closed: OpenForCharge(ch_1, ch_2) = %v, %v; CountOpen = %d; want false, true; 1",
				isOpen("ch_1"), isOpen("ch_2"), count())
		}
		ds, err := s.ListByOrder(ctx, orderID)
		if err != nil || len(ds) != 2 || ds[0].ID != first.ID || ds[0].Status != domain.DisputeLost || ds[1].ChargeID != "ch_2" {
			t.Errorf("ListByOrder = %+v, %v; want ch_1's (lost), then ch_2's", ds, err)
		}
	})
}

// TestDisputeChecks: the database itself refuses a status outside the
// dispute machine.
func TestDisputeChecks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		insert := func(status string) error {
			_, err := db.Exec(t.Context(), `INSERT INTO disputes (id, provider_dispute_id, order_id, charge_id, status,
				currency, amount_minor, opened_at, updated_at)
				VALUES (?, ?, ?, 'ch_1', ?, 'USD', 1000, '2025-03-01 12:00:00.000000', '2025-03-01 12:00:00.000000')`,
				newID(), newID(), newID(), status)
			return err
		}
		if err := insert("open"); err != nil {
			t.Fatalf("a valid row = %v, want it stored", err)
		}
		if err := insert("pending"); err == nil {
			t.Error("a dispute of status pending was stored, want the CHECK to refuse it")
		}
	})
}
