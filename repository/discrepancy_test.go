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

// newDiscrepancy builds (without storing) an open amount mismatch on charge ref.
func newDiscrepancy(ref, orderID string, detected time.Time) domain.Discrepancy {
	return domain.Discrepancy{
		ID: newID(), Type: domain.AmountMismatch, Reference: ref, OrderID: orderID, AttemptID: newID(),
		ChargeID: ref, ProviderAmount: dec("12.01"), LocalAmount: dec("12.00"), Currency: "USD",
		Status: domain.DiscrepancyOpen, DetectedAt: detected,
	}
}

func record(t *testing.T, s *repository.DiscrepancyStore, d domain.Discrepancy) domain.Discrepancy {
	t.Helper()
	got, isNew, err := s.Record(t.Context(), d)
	if err != nil || !isNew {
		t.Fatalf("Record(%s %s) = %v, %v, want new", d.Type, d.Reference, isNew, err)
	}
	return got
}

// TestDiscrepancyMoney: amounts round-trip exactly in every currency
// scale, and a discrepancy without amounts has none.
func TestDiscrepancyMoney(t *testing.T) {
	tests := []struct {
		currency        domain.Currency
		provider, local string
		wantErr         bool
	}{
		{"USD", "0.30", "0.10", false},
		{"JPY", "1501", "1500", false},
		{"KWD", "1.235", "0.001", false},
		{"USD", "9999999999999.99", "0", false},
		{"", "0", "0", false},
		{"USD", "0.305", "0", true}, // a fraction of a cent
		{"", "1.00", "0", true},     // an amount in no currency
		{"XXX", "1", "1", true},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		for i, tt := range tests {
			in := newDiscrepancy(fmt.Sprintf("ch_money_%d", i), newID(), t0)
			in.Currency, in.ProviderAmount, in.LocalAmount = tt.currency, dec(tt.provider), dec(tt.local)
			got, isNew, err := s.Record(t.Context(), in)
			if tt.wantErr {
				if err == nil {
					t.Errorf("Record(%s %s/%s) = nil error, want an error", tt.currency, tt.provider, tt.local)
				}
				continue
			}
			stored, ferr := s.FindByID(t.Context(), in.ID)
			if err != nil || ferr != nil || !isNew || fmt.Sprint(stored) != fmt.Sprint(got) ||
				!stored.ProviderAmount.Equal(dec(tt.provider)) || !stored.LocalAmount.Equal(dec(tt.local)) || stored.Currency != tt.currency {
				t.Errorf("Record then FindByID(%s %s/%s) = %+v (%v, %v, new %v)", tt.currency, tt.provider, tt.local, stored, err, ferr, isNew)
			}
		}
	})
}

func TestDiscrepancyRecordAndFind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		in := newDiscrepancy("ch_1", newID(), t0)
		in.RunID, in.Status = newID(), ""
		first := record(t, s, in)
		want := in
		want.Status = domain.DiscrepancyOpen // the default
		if got, err := s.FindByID(t.Context(), in.ID); err != nil || fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(first) != fmt.Sprint(want) {
			t.Errorf("FindByID = %+v, %v; Record returned %+v; want %+v", got, err, first, want)
		}
		// Found again (another ID, another run): nothing new, the stored one back.
		again := newDiscrepancy("ch_1", in.OrderID, t0.Add(time.Hour))
		if got, isNew, err := s.Record(t.Context(), again); err != nil || isNew || got.ID != in.ID {
			t.Errorf("Record(same type and reference) = %s, %v, %v, want %s, false", got.ID, isNew, err, in.ID)
		}
		// A retried Record with the same ID is the same discrepancy.
		if got, isNew, err := s.Record(t.Context(), in); err != nil || isNew || got.ID != in.ID {
			t.Errorf("Record(same ID) = %s, %v, %v, want %s, false", got.ID, isNew, err, in.ID)
		}
		// The same reference under another type is another discrepancy.
		other := newDiscrepancy("ch_1", in.OrderID, t0)
		other.Type = domain.DuplicateCharge
		record(t, s, other)
		if _, err := s.FindByID(t.Context(), newID()); !errors.Is(err, domain.ErrDiscrepancyNotFound) {
			t.Errorf("FindByID(unknown) = %v, want %v", err, domain.ErrDiscrepancyNotFound)
		}
		bad := newDiscrepancy("ch_2", "", t0)
		bad.Type = "bogus"
		if _, _, err := s.Record(t.Context(), bad); err == nil {
			t.Errorf("Record(type bogus) = nil error, want an error")
		}
	})
}

// TestDiscrepancyRecordConcurrent: a webhook redelivered 20 times at once
// records its discrepancy once; everyone gets the same one back.
func TestDiscrepancyRecordConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		orderID := newID()
		var fresh atomic.Int64
		ids := make([]string, 20)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				got, isNew, err := s.Record(t.Context(), newDiscrepancy("ch_race", orderID, t0))
				if err != nil {
					t.Errorf("Record #%d = %v", i, err)
				}
				if isNew {
					fresh.Add(1)
				}
				ids[i] = got.ID
			})
		}
		wg.Wait()
		if fresh.Load() != 1 {
			t.Errorf("%d of 20 concurrent Records were new, want 1", fresh.Load())
		}
		for i, id := range ids {
			if id != ids[0] {
				t.Errorf("Record #%d returned %s, #0 returned %s; want one discrepancy", i, id, ids[0])
			}
		}
	})
}

func TestDiscrepancyResolve(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		dsc := record(t, s, newDiscrepancy("ch_1", newID(), t0))
		now := t0.Add(time.Minute)
		if ok, err := s.Resolve(t.Context(), dsc.ID, "refund", "customer asked", now); !ok || err != nil {
			t.Errorf("Resolve = %v, %v, want true", ok, err)
		}
		got, err := s.FindByID(t.Context(), dsc.ID)
		if err != nil || got.Status != domain.DiscrepancyResolved || got.Resolution != "refund" ||
			got.Note != "customer asked" || got.ResolvedAt == nil || !got.ResolvedAt.Equal(now) {
			t.Errorf("after Resolve: %+v, %v; want resolved, refund, customer asked, %v", got, err, now)
		}
		if ok, err := s.Resolve(t.Context(), dsc.ID, "ignore", "second operator", now.Add(time.Minute)); ok || err != nil {
			t.Errorf("second Resolve = %v, %v, want false", ok, err)
		}
		if again, _ := s.FindByID(t.Context(), dsc.ID); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Errorf("refused Resolve changed the discrepancy: %+v, want %+v", again, got)
		}
		if ok, err := s.Resolve(t.Context(), newID(), "ignore", "", now); ok || err != nil {
			t.Errorf("Resolve(unknown) = %v, %v, want false", ok, err)
		}
	})
}

func TestDiscrepancyLists(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		orderID := newID()
		second := record(t, s, newDiscrepancy("ch_2", orderID, t0.Add(time.Second)))
		first := record(t, s, newDiscrepancy("ch_1", orderID, t0))
		stuck := newDiscrepancy(newID(), newID(), t0.Add(2*time.Second))
		stuck.Type, stuck.Currency, stuck.ProviderAmount, stuck.LocalAmount = domain.StuckProcessing, "", dec("0"), dec("0")
		stuck = record(t, s, stuck)
		resolved := record(t, s, newDiscrepancy("ch_3", orderID, t0.Add(-time.Hour)))
		if ok, err := s.Resolve(t.Context(), resolved.ID, "ignore", "", t0); !ok || err != nil {
			t.Fatalf("Resolve = %v, %v", ok, err)
		}

		check := func(name string, got []domain.Discrepancy, err error, want ...string) {
			t.Helper()
			ids := make([]string, len(got))
			for i, g := range got {
				ids[i] = g.ID
			}
			if err != nil || fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("%s = %v, %v, want %v", name, ids, err, want)
			}
		}
		got, err := s.ListByOrder(t.Context(), orderID)
		check("ListByOrder", got, err, resolved.ID, first.ID, second.ID)
		got, err = s.ListOpen(t.Context(), "", 10)
		check("ListOpen(all)", got, err, first.ID, second.ID, stuck.ID)
		got, err = s.ListOpen(t.Context(), domain.StuckProcessing, 10)
		check("ListOpen(stuck_processing)", got, err, stuck.ID)
		got, err = s.ListOpen(t.Context(), "", 2)
		check("ListOpen(limit 2)", got, err, first.ID, second.ID)
	})
}
