package repository_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// newAttempt stores a started attempt on o for requestID, created at created.
func newAttempt(t *testing.T, s *repository.AttemptStore, o domain.Order, requestID string, created time.Time) domain.Attempt {
	t.Helper()
	a := domain.Attempt{
		ID: newID(), OrderID: o.ID, RequestID: requestID, Status: domain.AttemptStarted, CaptureMethod: domain.CaptureAutomatic,
		PaymentMethod: "pm_ok", Amount: o.Amount, Currency: o.Currency, CreatedAt: created, UpdatedAt: created,
	}
	if err := s.Create(t.Context(), a); err != nil {
		t.Fatalf("Create(attempt) = %v", err)
	}
	return a
}

func findAttempt(t *testing.T, s *repository.AttemptStore, id string) domain.Attempt {
	t.Helper()
	a, err := s.FindByID(t.Context(), id)
	if err != nil {
		t.Fatalf("FindByID(%q) = %v", id, err)
	}
	return a
}

func TestAttemptRoundTrip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		o := newOrder(t, db)
		a := newAttempt(t, s, o, "req-1", t0)
		got := findAttempt(t, s, a.ID)
		// Sprint compares decimals and times by value (both are canonical here).
		if fmt.Sprint(got) != fmt.Sprint(a) {
			t.Errorf("FindByID(%q) = %+v, want %+v", a.ID, got, a)
		}
		if _, err := s.FindByID(t.Context(), newID()); !errors.Is(err, domain.ErrAttemptNotFound) {
			t.Errorf("FindByID(unknown) = %v, want %v", err, domain.ErrAttemptNotFound)
		}
	})
}

func TestAttemptListAndLatest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		o := newOrder(t, db)
		first := newAttempt(t, s, o, "req-1", t0)
		second := newAttempt(t, s, o, "req-1", t0.Add(time.Millisecond))
		other := newAttempt(t, s, o, "req-2", t0.Add(2*time.Millisecond))
		newAttempt(t, s, newOrder(t, db), "req-1", t0.Add(time.Hour)) // another order's

		list, err := s.ListByOrder(t.Context(), o.ID)
		if err != nil || len(list) != 3 || list[0].ID != first.ID || list[1].ID != second.ID || list[2].ID != other.ID {
			t.Errorf("ListByOrder(%q) = %v, %v, want [%s %s %s]", o.ID, ids(list), err, first.ID, second.ID, other.ID)
		}
		if got, err := s.Latest(t.Context(), o.ID, "req-1"); err != nil || got.ID != second.ID {
			t.Errorf("Latest(req-1) = %s, %v, want %s", got.ID, err, second.ID)
		}
		if _, err := s.Latest(t.Context(), o.ID, "req-3"); !errors.Is(err, domain.ErrAttemptNotFound) {
			t.Errorf("Latest(req-3) = %v, want %v", err, domain.ErrAttemptNotFound)
		}
	})
}

func TestAttemptFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		a := newAttempt(t, s, newOrder(t, db), "req-1", t0)
		later := t0.Add(time.Second)

		if ok, err := s.MarkUnknown(t.Context(), a.ID, "ch_1", later); !ok || err != nil {
			t.Errorf("MarkUnknown(started→unknown) = %v, %v, want true", ok, err)
		}
		// The recoverer settles it; an empty charge ID keeps the one learned before.
		if ok, err := s.Succeed(t.Context(), a.ID, "", later); !ok || err != nil {
			t.Errorf("Succeed(unknown→succeeded) = %v, %v, want true", ok, err)
		}
		got := findAttempt(t, s, a.ID)
		if got.Status != domain.AttemptSucceeded || got.ProviderChargeID != "ch_1" || got.FailureCode != "" || !got.UpdatedAt.Equal(later) {
			t.Errorf("after Succeed: status %s, charge %q, failure %q, updated %v; want succeeded, ch_1, \"\", %v",
				got.Status, got.ProviderChargeID, got.FailureCode, got.UpdatedAt, later)
		}
		// A late webhook saying "failed" finds it settled and changes nothing.
		if ok, err := s.Fail(t.Context(), a.ID, "", "card_declined", later); ok || err != nil {
			t.Errorf("Fail(succeeded→failed) = %v, %v, want false", ok, err)
		}
		if again := findAttempt(t, s, a.ID); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Errorf("refused Fail changed the attempt: %+v, want %+v", again, got)
		}

		// The failure code describes the outcome now recorded: a held
		// attempt's amount_mismatch is cleared when it is adopted.
		b := newAttempt(t, s, newOrder(t, db), "req-2", t0)
		if ok, err := s.Hold(t.Context(), b.ID, "ch_2", later); !ok || err != nil {
			t.Errorf("Hold(started→held) = %v, %v, want true", ok, err)
		}
		if got := findAttempt(t, s, b.ID); got.Status != domain.AttemptHeld || got.FailureCode != string(domain.AmountMismatch) {
			t.Errorf("after Hold: status %s, failure %q; want held, amount_mismatch", got.Status, got.FailureCode)
		}
		// Adopt moves the attempt only from the status its caller read.
		if ok, err := s.Adopt(t.Context(), b.ID, domain.AttemptFailed, "", later); ok || err != nil {
			t.Errorf("Adopt(held, read as failed) = %v, %v, want false", ok, err)
		}
		if ok, err := s.Adopt(t.Context(), b.ID, domain.AttemptHeld, "", later); !ok || err != nil {
			t.Errorf("Adopt(held→succeeded) = %v, %v, want true", ok, err)
		}
		if got := findAttempt(t, s, b.ID); got.Status != domain.AttemptSucceeded || got.ProviderChargeID != "ch_2" || got.FailureCode != "" {
			t.Errorf("after Adopt: status %s, charge %q, failure %q; want succeeded, ch_2, \"\"", got.Status, got.ProviderChargeID, got.FailureCode)
		}
	})
}

func TestAttemptListUnsettled(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		o := newOrder(t, db)
		oldest := newAttempt(t, s, o, "r1", t0)
		unknown := newAttempt(t, s, o, "r2", t0.Add(time.Second))
		s.MarkUnknown(t.Context(), unknown.ID, "", t0.Add(2*time.Second))
		settled := newAttempt(t, s, o, "r3", t0)
		s.Fail(t.Context(), settled.ID, "", "card_declined", t0)
		newAttempt(t, s, o, "r4", t0.Add(time.Minute)) // too recent

		cutoff := t0.Add(30 * time.Second)
		got, err := s.ListUnsettled(t.Context(), cutoff, 10)
		if err != nil || len(got) != 2 || got[0].ID != oldest.ID || got[1].ID != unknown.ID {
			t.Errorf("ListUnsettled(%v) = %v, %v, want [%s %s]", cutoff, ids(got), err, oldest.ID, unknown.ID)
		}
		if got, err := s.ListUnsettled(t.Context(), cutoff, 1); err != nil || len(got) != 1 || got[0].ID != oldest.ID {
			t.Errorf("ListUnsettled(limit 1) = %v, %v, want [%s]", ids(got), err, oldest.ID)
		}
	})
}

// TestAttemptLease: a lease holds until it runs out — no other worker
// gets the attempt before then, anyone may after — and only unsettled
// attempts can be leased.
func TestAttemptLease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		a := newAttempt(t, s, newOrder(t, db), "req-1", t0)
		until := t0.Add(30 * time.Second)
		if ok, err := s.Lease(t.Context(), a.ID, t0, until); !ok || err != nil {
			t.Fatalf("Lease(free) = %v, %v, want true", ok, err)
		}
		for _, now := range []time.Time{t0.Add(time.Second), until.Add(-time.Microsecond), until} {
			if ok, err := s.Lease(t.Context(), a.ID, now, now.Add(time.Minute)); ok || err != nil {
				t.Errorf("Lease(at %v, held until %v) = %v, %v, want false", now, until, ok, err)
			}
		}
		after := until.Add(time.Microsecond)
		if ok, err := s.Lease(t.Context(), a.ID, after, after.Add(time.Minute)); !ok || err != nil {
			t.Errorf("Lease(after it ran out) = %v, %v, want true", ok, err)
		}
		if got := findAttempt(t, s, a.ID); !got.UpdatedAt.Equal(t0) || got.Status != domain.AttemptStarted {
			t.Errorf("a lease changed the attempt: updated %v, status %s; want %v, started", got.UpdatedAt, got.Status, t0)
		}

		later := after.Add(2 * time.Minute)
		if ok, err := s.MarkUnknown(t.Context(), a.ID, "", later); !ok || err != nil {
			t.Fatalf("MarkUnknown(started→unknown) = %v, %v", ok, err)
		}
		if ok, err := s.Lease(t.Context(), a.ID, later, later.Add(time.Minute)); !ok || err != nil {
			t.Errorf("Lease(unknown) = %v, %v, want true", ok, err)
		}
		if ok, err := s.Succeed(t.Context(), a.ID, "ch_1", later); !ok || err != nil {
			t.Fatalf("Succeed(unknown→succeeded) = %v, %v", ok, err)
		}
		before := findAttempt(t, s, a.ID)
		end := later.Add(time.Hour)
		if ok, err := s.Lease(t.Context(), a.ID, end, end.Add(time.Minute)); ok || err != nil {
			t.Errorf("Lease(succeeded) = %v, %v, want false", ok, err)
		}
		if after := findAttempt(t, s, a.ID); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("refused Lease changed the attempt: %+v, want %+v", after, before)
		}
	})
}

// TestAttemptLeaseConcurrent: 20 recoverers that read the same attempt
// race to lease it; exactly one wins.
func TestAttemptLeaseConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		a := newAttempt(t, s, newOrder(t, db), "req-1", t0)
		var won atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				ok, err := s.Lease(t.Context(), a.ID, t0, t0.Add(time.Duration(i+1)*time.Second))
				if err != nil {
					t.Errorf("Lease #%d = %v", i, err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Errorf("%d of 20 concurrent Leases won, want 1", won.Load())
		}
	})
}

func ids(list []domain.Attempt) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

// TestAttemptResendAndUnlease: only the holder of a lease (known by its end)
// may record a new charge request or give the lease up; a lease someone
// else took since is left alone, and a settled attempt takes no resend.
func TestAttemptResendAndUnlease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		// Created leased, with its charge deadline, as a claim creates it.
		held, other := t0.Add(time.Minute), t0.Add(2*time.Minute)
		o := newOrder(t, db)
		a := domain.Attempt{
			ID: newID(), OrderID: o.ID, RequestID: "req-1", Status: domain.AttemptStarted, PaymentMethod: "pm_ok",
			Amount: o.Amount, Currency: o.Currency, CreatedAt: t0, UpdatedAt: t0, LeasedUntil: held, InFlightUntil: held,
		}
		if err := s.Create(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		if got := findAttempt(t, s, a.ID); !got.LeasedUntil.Equal(held) || !got.InFlightUntil.Equal(held) {
			t.Errorf("created attempt: lease %v in flight until %v, want %v for both", got.LeasedUntil, got.InFlightUntil, held)
		}
		if ok, err := s.Lease(t.Context(), a.ID, t0, other); ok || err != nil {
			t.Errorf("Lease(created leased) = %v, %v, want false", ok, err)
		}
		until := t0.Add(15 * time.Second)
		if ok, err := s.Resend(t.Context(), a.ID, other, until); ok || err != nil {
			t.Errorf("Resend(not our lease) = %v, %v, want false", ok, err)
		}
		if ok, err := s.Resend(t.Context(), a.ID, held, until); !ok || err != nil {
			t.Errorf("Resend(our lease) = %v, %v, want true", ok, err)
		}
		got, err := s.FindByID(t.Context(), a.ID)
		if err != nil || !got.InFlightUntil.Equal(until) || !got.LeasedUntil.Equal(until) {
			t.Errorf("after Resend: in flight until %v, lease %v (%v), want %v for both", got.InFlightUntil, got.LeasedUntil, err, until)
		}
		if ok, err := s.Unlease(t.Context(), a.ID, held); ok || err != nil {
			t.Errorf("Unlease(an old lease) = %v, %v, want false", ok, err)
		}
		if ok, err := s.Unlease(t.Context(), a.ID, until); !ok || err != nil {
			t.Errorf("Unlease(our lease) = %v, %v, want true", ok, err)
		}
		if got, _ := s.FindByID(t.Context(), a.ID); !got.LeasedUntil.IsZero() {
			t.Errorf("after Unlease: leased until %v, want none", got.LeasedUntil)
		}
		if ok, err := s.Lease(t.Context(), a.ID, t0, held); !ok || err != nil {
			t.Errorf("Lease after Unlease = %v, %v, want true", ok, err)
		}
		if _, err := s.Succeed(t.Context(), a.ID, "ch_1", t0); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Resend(t.Context(), a.ID, held, until); ok || err != nil {
			t.Errorf("Resend(settled) = %v, %v, want false", ok, err)
		}
	})
}

// TestAttemptRecordChargeID: a charge ID learned after the reply was lost
// is stored on a started or unknown attempt that has none, never over a
// stored one nor on a settled attempt.
func TestAttemptRecordChargeID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewAttemptStore(db)
		for _, st := range domain.AttemptStatuses {
			a := attemptIn(t, db, s, st)
			ok, err := s.RecordChargeID(t.Context(), a.ID, "pi_learned")
			want := st == domain.AttemptStarted || st == domain.AttemptUnknown
			if err != nil || ok != want {
				t.Errorf("RecordChargeID(%s, none stored) = %v, %v, want %v", st, ok, err, want)
			}
			got := findAttempt(t, s, a.ID)
			if (got.ProviderChargeID == "pi_learned") != want || got.Status != st || !got.UpdatedAt.Equal(a.UpdatedAt) {
				t.Errorf("after RecordChargeID(%s): %+v", st, got)
			}
			if ok, err := s.RecordChargeID(t.Context(), a.ID, "pi_other"); ok || err != nil {
				t.Errorf("RecordChargeID(%s) again = %v, %v, want false", st, ok, err)
			}
			if got := findAttempt(t, s, a.ID); got.ProviderChargeID == "pi_other" {
				t.Errorf("RecordChargeID replaced a stored id on %s", st)
			}
		}
	})
}
