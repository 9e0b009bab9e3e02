package repository_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// seedOrders stores n pending orders for customerID, created a minute
// apart from t0, and returns their IDs newest first.
func seedOrders(t *testing.T, db *repository.DB, customerID string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		o := pendingOrder(customerID)
		o.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
		createOrder(t, db, o)
		ids[n-1-i] = o.ID
	}
	return ids
}

// walk lists every page of f and returns the IDs in the order seen.
func walk(t *testing.T, s *repository.OrderStore, f domain.OrderFilter) (ids []string, pages int) {
	t.Helper()
	for {
		page, err := s.List(t.Context(), f)
		if err != nil {
			t.Fatalf("List(%+v) = %v", f, err)
		}
		pages++
		for _, o := range page.Orders {
			ids = append(ids, o.ID)
			if len(o.Items) != 2 {
				t.Errorf("List(%+v): order %s has %d items, want 2", f, o.ID, len(o.Items))
			}
		}
		if page.NextCursor == "" || pages > 100 {
			return ids, pages
		}
		f.Cursor = page.NextCursor
	}
}

func TestOrderList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		ada, bob := newCustomer(t, db), newCustomer(t, db)
		adas := seedOrders(t, db, ada.ID, 25)
		bobs := seedOrders(t, db, bob.ID, 3)
		for _, id := range adas[:4] {
			if ok, err := s.Cancel(t.Context(), id, testCause, t0); !ok || err != nil {
				t.Fatalf("Cancel(%s) = %v, %v", id, ok, err)
			}
		}

		tests := []struct {
			name      string
			f         domain.OrderFilter
			want      []string
			wantPages int
		}{
			{"customer, 7 a page", domain.OrderFilter{CustomerID: ada.ID, Limit: 7}, adas, 4},
			{"page size divides the total", domain.OrderFilter{CustomerID: ada.ID, Limit: 5}, adas, 5},
			{"one page", domain.OrderFilter{CustomerID: bob.ID}, bobs, 1},
			{"all customers, default limit", domain.OrderFilter{}, append(slices.Clone(bobs), adas...), 2},
			{"limit above max is clamped", domain.OrderFilter{Limit: 1000}, append(slices.Clone(bobs), adas...), 1},
			{"status", domain.OrderFilter{CustomerID: ada.ID, Status: domain.StatusCancelled, Limit: 3}, adas[:4], 2},
			{"no match", domain.OrderFilter{CustomerID: bob.ID, Status: domain.StatusPaid}, nil, 1},
			{"created in [From, To)", domain.OrderFilter{CustomerID: ada.ID, From: t0.Add(10 * time.Minute), To: t0.Add(15 * time.Minute)}, adas[10:15], 1},
		}
		for _, tt := range tests {
			got, pages := walk(t, s, tt.f)
			if !slices.Equal(got, tt.want) || pages != tt.wantPages {
				t.Errorf("%s: walk(List) = %d orders in %d pages, want %d in %d\n got %v\nwant %v",
					tt.name, len(got), pages, len(tt.want), tt.wantPages, got, tt.want)
			}
		}
	})
}

// TestOrderListDefaultLimit: without a limit a page holds 20 orders.
func TestOrderListDefaultLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		seedOrders(t, db, newCustomer(t, db).ID, 21)
		page, err := repository.NewOrderStore(db).List(t.Context(), domain.OrderFilter{Limit: -1})
		if err != nil || len(page.Orders) != 20 || page.NextCursor != page.Orders[19].ID {
			t.Errorf("List(limit -1) = %d orders, cursor %q, %v; want 20 and the last one's ID", len(page.Orders), page.NextCursor, err)
		}
	})
}

// TestOrderExpireDue: pending orders due at or before now expire in
// batches; processing and future ones are left alone; several replicas
// running it at once expire each order exactly once.
func TestOrderExpireDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		customer := newCustomer(t, db)
		now := t0.Add(time.Hour)
		due := func(expires time.Time) domain.Order {
			o := pendingOrder(customer.ID)
			o.ExpiresAt = expires
			createOrder(t, db, o)
			return o
		}
		atNow, justBefore := due(now), due(now.Add(-time.Microsecond))
		justAfter := due(now.Add(time.Microsecond))
		claimed := due(now.Add(-time.Hour))
		if ok, _ := s.Claim(t.Context(), claimed.ID, "req-1", domain.AnyVersion, t0.Add(-time.Minute)); !ok { // before it was due
			t.Fatalf("Claim(%s) = false", claimed.ID)
		}

		// The oldest due first: justBefore, then atNow.
		if got, err := s.ExpireDue(t.Context(), testCause, now, 1); !slices.Equal(got, []string{justBefore.ID}) || err != nil {
			t.Errorf("ExpireDue(limit 1) = %v, %v, want [%s]", got, err, justBefore.ID)
		}
		if got, err := s.ExpireDue(t.Context(), testCause, now, 10); !slices.Equal(got, []string{atNow.ID}) || err != nil {
			t.Errorf("ExpireDue(limit 10) = %v, %v, want [%s] (the rest)", got, err, atNow.ID)
		}
		if got, err := s.ExpireDue(t.Context(), testCause, now, 10); len(got) != 0 || err != nil {
			t.Errorf("ExpireDue(again) = %v, %v, want none", got, err)
		}
		want := map[string]domain.OrderStatus{
			atNow.ID: domain.StatusExpired, justBefore.ID: domain.StatusExpired,
			justAfter.ID: domain.StatusPending, claimed.ID: domain.StatusProcessing,
		}
		for id, status := range want {
			if got := findOrder(t, db, id); got.Status != status {
				t.Errorf("order %s after ExpireDue: %s, want %s", id, got.Status, status)
			}
		}
	})
}

func TestOrderExpireDueConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		customer := newCustomer(t, db)
		const orders, replicas = 30, 5
		for range orders {
			o := pendingOrder(customer.ID)
			o.ExpiresAt = t0
			createOrder(t, db, o)
		}
		// Each expired ID is reported by exactly one replica.
		var mu sync.Mutex
		reported := map[string]int{}
		var wg sync.WaitGroup
		for range replicas {
			wg.Go(func() {
				for {
					ids, err := s.ExpireDue(t.Context(), testCause, t0, 4)
					if err != nil {
						t.Errorf("ExpireDue = %v", err)
						return
					}
					if len(ids) == 0 {
						return
					}
					mu.Lock()
					for _, id := range ids {
						reported[id]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(reported) != orders {
			t.Errorf("replicas reported %d distinct expired orders, want %d", len(reported), orders)
		}
		for id, n := range reported {
			if n != 1 {
				t.Errorf("order %s reported expired %d times, want 1", id, n)
			}
		}
		page, _ := s.List(t.Context(), domain.OrderFilter{Status: domain.StatusExpired, Limit: 100})
		for _, o := range page.Orders {
			if o.Version != 2 {
				t.Errorf("order %s expired with version %d, want 2 (expired once)", o.ID, o.Version)
			}
		}
	})
}

// TestOrderListWindow: a time window pages by created_at, newest first,
// even where the orders' IDs sort the other way (an ID's clock is not
// what the window asks about), and orders created in the same instant
// are neither repeated nor skipped across a page boundary.
func TestOrderListWindow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		customer := newCustomer(t, db)
		// IDs grow with each order; created_at falls, in pairs that share
		// an instant: newest by created_at is the first order stored.
		var want []string
		for i := range 12 {
			o := pendingOrder(customer.ID)
			o.CreatedAt = t0.Add(time.Duration(12-i/2) * time.Minute)
			createOrder(t, db, o)
			want = append(want, o.ID)
		}
		// Within one instant, the larger ID first.
		for i := 0; i < len(want); i += 2 {
			want[i], want[i+1] = want[i+1], want[i]
		}
		inWindow := want[2:10] // minutes 11 down to 8
		f := domain.OrderFilter{From: t0.Add(8 * time.Minute), To: t0.Add(12 * time.Minute), Limit: 3}
		if got, pages := walk(t, s, f); !slices.Equal(got, inWindow) || pages != 3 {
			t.Errorf("walk(window, 3 a page) = %v in %d pages, want %v in 3", got, pages, inWindow)
		}
		f.Limit, f.From = 1, time.Time{} // only To: every order before it
		if got, _ := walk(t, s, f); !slices.Equal(got, want[2:]) {
			t.Errorf("walk(To only, 1 a page) = %v, want %v", got, want[2:])
		}
		f.Cursor = newID() // no order has it
		if page, err := s.List(t.Context(), f); err != nil || len(page.Orders) != 0 {
			t.Errorf("List(window, unknown cursor) = %d orders, %v; want none", len(page.Orders), err)
		}
	})
}

// TestOrderListByAttempt: attempt=failed keeps the orders with a failed
// attempt, newest first, each once however many attempts failed, over
// more than one batch of the attempts' index and with the other filters
// dropping most of each batch.
func TestOrderListByAttempt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s, attempts := repository.NewOrderStore(db), repository.NewAttemptStore(db)
		ada, bob := newCustomer(t, db), newCustomer(t, db)
		fail := func(o domain.Order, times int) {
			for i := range times {
				a := newAttempt(t, attempts, o, fmt.Sprintf("req-%d", i), t0)
				if ok, err := attempts.Fail(t.Context(), a.ID, "", "card_declined", t0); !ok || err != nil {
					t.Fatalf("Fail(%s) = %v, %v", a.ID, ok, err)
				}
			}
		}
		var all, adas []string // newest first
		for i := range 40 {
			owner := bob
			if i%7 == 0 {
				owner = ada
			}
			o := pendingOrder(owner.ID)
			createOrder(t, db, o)
			switch i % 3 {
			case 0:
				fail(o, 1+i%2) // one or two failed attempts
			case 1:
				newAttempt(t, attempts, o, "req-ok", t0) // started, not failed
				continue
			default:
				continue // never tried
			}
			all = append([]string{o.ID}, all...)
			if owner == ada {
				adas = append([]string{o.ID}, adas...)
			}
		}
		f := domain.OrderFilter{Attempt: domain.AttemptFailed, Limit: 4}
		if got, _ := walk(t, s, f); !slices.Equal(got, all) {
			t.Errorf("walk(attempt=failed) = %v, want %v", got, all)
		}
		f.CustomerID, f.Limit = ada.ID, 1
		if got, _ := walk(t, s, f); !slices.Equal(got, adas) {
			t.Errorf("walk(attempt=failed, Ada's, 1 a page) = %v, want %v", got, adas)
		}
		f.Status = domain.StatusPaid
		if got, _ := walk(t, s, f); len(got) != 0 {
			t.Errorf("walk(attempt=failed, paid) = %v, want none", got)
		}
	})
}
