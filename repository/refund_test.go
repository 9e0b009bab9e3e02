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

// newRefund builds (without storing) a pending manual refund of 5.00 USD on
// orderID, created at created.
func newRefund(orderID string, created time.Time) domain.Refund {
	id := newID()
	return domain.Refund{
		ID: id, OrderID: orderID, ChargeID: "ch_1", RequestID: "admin-req-" + id, Kind: domain.RefundManual,
		ProviderKey: id, Amount: dec("5.00"), Currency: "USD", Status: domain.RefundPending,
		Reason: "customer asked", CreatedAt: created, UpdatedAt: created,
	}
}

func createRefund(t *testing.T, s *repository.RefundStore, r domain.Refund) domain.Refund {
	t.Helper()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatalf("Create(refund %s) = %v", r.ID, err)
	}
	return r
}

func findRefund(t *testing.T, s *repository.RefundStore, key string) domain.Refund {
	t.Helper()
	r, err := s.FindByProviderKey(t.Context(), key)
	if err != nil {
		t.Fatalf("FindByProviderKey(%q) = %v", key, err)
	}
	return r
}

// TestRefundMoney: amounts round-trip exactly in every currency scale; a
// fraction of a minor unit, zero and negative amounts are refused.
func TestRefundMoney(t *testing.T) {
	tests := []struct {
		currency domain.Currency
		amount   string
		wantErr  bool
	}{
		{"USD", "0.30", false},
		{"JPY", "1501", false},
		{"KWD", "1.235", false},
		{"USD", "9999999999999.99", false},
		{"USD", "0.305", true},
		{"USD", "0", true},
		{"USD", "-1.00", true},
		{"XXX", "1", true},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		for _, tt := range tests {
			r := newRefund(newID(), t0)
			r.Currency, r.Amount = tt.currency, dec(tt.amount)
			err := s.Create(t.Context(), r)
			if tt.wantErr {
				if err == nil {
					t.Errorf("Create(%s %s) = nil error, want an error", tt.amount, tt.currency)
				}
				continue
			}
			if got := findRefund(t, s, r.ProviderKey); err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
				t.Errorf("Create then FindByProviderKey(%s %s) = %+v, %v, want %+v", tt.amount, tt.currency, got, err, r)
			}
		}
	})
}

func TestRefundCreate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		in := newRefund(newID(), t0)
		in.Status = domain.RefundSucceeded // ignored: a refund starts pending
		createRefund(t, s, in)
		if got := findRefund(t, s, in.ProviderKey); got.Status != domain.RefundPending {
			t.Errorf("Create(status succeeded) stored %s, want pending", got.Status)
		}
		auto := newRefund(in.OrderID, t0)
		auto.Kind, auto.RequestID, auto.ProviderKey = domain.RefundAuto, "", "auto-ch_2"
		createRefund(t, s, auto)
		if got := findRefund(t, s, "auto-ch_2"); fmt.Sprint(got) != fmt.Sprint(auto) {
			t.Errorf("FindByProviderKey(auto-ch_2) = %+v, want %+v", got, auto)
		}

		dup := newRefund(newID(), t0)
		dup.ProviderKey = "auto-ch_2"
		if err := s.Create(t.Context(), dup); !errors.Is(err, domain.ErrRefundExists) {
			t.Errorf("Create(same provider key) = %v, want %v", err, domain.ErrRefundExists)
		}
		if _, err := s.FindByProviderKey(t.Context(), "nope"); !errors.Is(err, domain.ErrRefundNotFound) {
			t.Errorf("FindByProviderKey(unknown) = %v, want %v", err, domain.ErrRefundNotFound)
		}
	})
}

// TestRefundCreateConcurrent: 20 automatic refunds of one duplicate charge
// at once; the provider key lets exactly one through.
func TestRefundCreateConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		orderID := newID()
		var created, exists atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				r := newRefund(orderID, t0)
				r.Kind, r.ProviderKey = domain.RefundAuto, "auto-ch_dup"
				switch err := s.Create(t.Context(), r); {
				case err == nil:
					created.Add(1)
				case errors.Is(err, domain.ErrRefundExists):
					exists.Add(1)
				default:
					t.Errorf("Create #%d = %v", i, err)
				}
			})
		}
		wg.Wait()
		if created.Load() != 1 || exists.Load() != 19 {
			t.Errorf("concurrent Create: %d created, %d told it exists; want 1 and 19", created.Load(), exists.Load())
		}
	})
}

func TestRefundFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		r := createRefund(t, s, newRefund(newID(), t0))
		now := t0.Add(time.Second)
		if ok, err := s.Finish(t.Context(), r.ID, domain.RefundSucceeded, "re_1", now); !ok || err != nil {
			t.Errorf("Finish(succeeded) = %v, %v, want true", ok, err)
		}
		got := findRefund(t, s, r.ProviderKey)
		if got.Status != domain.RefundSucceeded || got.ProviderRefundID != "re_1" || !got.UpdatedAt.Equal(now) {
			t.Errorf("after Finish: %s, %q, %v; want succeeded, re_1, %v", got.Status, got.ProviderRefundID, got.UpdatedAt, now)
		}
		// A late failure report finds it settled and changes nothing.
		if ok, err := s.Finish(t.Context(), r.ID, domain.RefundFailed, "", now.Add(time.Second)); ok || err != nil {
			t.Errorf("second Finish = %v, %v, want false", ok, err)
		}
		if again := findRefund(t, s, r.ProviderKey); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Errorf("refused Finish changed the refund: %+v, want %+v", again, got)
		}
		// An empty provider refund ID keeps the one learned before.
		failed := createRefund(t, s, newRefund(newID(), t0))
		if ok, err := s.Finish(t.Context(), failed.ID, domain.RefundFailed, "", now); !ok || err != nil {
			t.Errorf("Finish(failed) = %v, %v, want true", ok, err)
		}
		if got := findRefund(t, s, failed.ProviderKey); got.Status != domain.RefundFailed || got.ProviderRefundID != "" {
			t.Errorf("after Finish(failed): %s, %q; want failed, \"\"", got.Status, got.ProviderRefundID)
		}
		if _, err := s.Finish(t.Context(), r.ID, domain.RefundPending, "", now); err == nil {
			t.Errorf("Finish(to pending) = nil error, want an error")
		}
	})
}

func TestRefundLists(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		orderID := newID()
		second := createRefund(t, s, newRefund(orderID, t0.Add(time.Second)))
		first := createRefund(t, s, newRefund(orderID, t0))
		done := createRefund(t, s, newRefund(orderID, t0.Add(2*time.Second)))
		s.Finish(t.Context(), done.ID, domain.RefundSucceeded, "re_1", t0.Add(2*time.Second))
		createRefund(t, s, newRefund(newID(), t0.Add(time.Hour))) // too recent for ListPending

		ids := func(list []domain.Refund) string {
			out := make([]string, len(list))
			for i, r := range list {
				out[i] = r.ID
			}
			return fmt.Sprint(out)
		}
		if got, err := s.ListByOrder(t.Context(), orderID); err != nil || ids(got) != fmt.Sprint([]string{first.ID, second.ID, done.ID}) {
			t.Errorf("ListByOrder = %s, %v, want [%s %s %s]", ids(got), err, first.ID, second.ID, done.ID)
		}
		cutoff := t0.Add(time.Minute)
		if got, err := s.ListPending(t.Context(), cutoff, 10); err != nil || ids(got) != fmt.Sprint([]string{first.ID, second.ID}) {
			t.Errorf("ListPending(%v) = %s, %v, want [%s %s]", cutoff, ids(got), err, first.ID, second.ID)
		}
		if got, err := s.ListPending(t.Context(), cutoff, 1); err != nil || ids(got) != fmt.Sprint([]string{first.ID}) {
			t.Errorf("ListPending(limit 1) = %s, %v, want [%s]", ids(got), err, first.ID)
		}
	})
}

// TestRefundListSucceededBetween: only succeeded refunds created in the
// window are listed, by creation time then ID, a page at a time after the
// cursor.
func TestRefundListSucceededBetween(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		succeed := func(created time.Time) domain.Refund {
			r := createRefund(t, s, newRefund(newID(), created))
			if ok, err := s.Finish(t.Context(), r.ID, domain.RefundSucceeded, "re_"+r.ID, created.Add(time.Second)); err != nil || !ok {
				t.Fatalf("Finish(%s) = %v, %v", r.ID, ok, err)
			}
			return r
		}
		b, a := succeed(t0.Add(time.Minute)), succeed(t0)           // a is older, its ID larger
		succeed(t0.Add(time.Hour))                                  // at to: outside
		succeed(t0.Add(-time.Nanosecond * 1000))                    // before from
		createRefund(t, s, newRefund(newID(), t0.Add(time.Second))) // pending
		failed := createRefund(t, s, newRefund(newID(), t0.Add(time.Second)))
		s.Finish(t.Context(), failed.ID, domain.RefundFailed, "", t0.Add(2*time.Second))

		got, err := s.ListSucceededBetween(t.Context(), t0, t0.Add(time.Hour), "", 10)
		if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID || got[0].ProviderRefundID != "re_"+a.ID {
			t.Fatalf("ListSucceededBetween = %+v, %v; want %s and %s", got, err, a.ID, b.ID)
		}
		if got, err := s.ListSucceededBetween(t.Context(), t0, t0.Add(time.Hour), a.ID, 10); err != nil || len(got) != 1 || got[0].ID != b.ID {
			t.Errorf("ListSucceededBetween(after %s) = %+v, %v; want only %s", a.ID, got, err, b.ID)
		}
		if _, err := s.ListSucceededBetween(t.Context(), t0, t0.Add(time.Hour), newID(), 10); err == nil {
			t.Errorf("ListSucceededBetween(after an ID no refund has) took it")
		}
	})
}
