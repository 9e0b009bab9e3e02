package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestOrdersCreate: a buyer's lines are priced from the catalogue, the
// merchant's custom lines at their own price; the amount is the exact sum
// of the lines, the order starts pending and expires after the TTL; an
// invalid cart is refused field by field and stores nothing.
func TestOrdersCreate(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		w.product(t, "tea", "0.10", "EUR", nil)
		w.product(t, "pot", "19.90", "EUR", nil)
		before := w.clock.Now()
		o, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "", item("tea", 3), item("pot", 1)))
		if err != nil {
			t.Fatalf("Create = %v", err)
		}
		if !o.Amount.Equal(decimal.RequireFromString("20.20")) || o.Status != domain.StatusPending || o.Currency != "EUR" || o.Items[1].Name != "pot's name" {
			t.Fatalf("Create = %s %s %s %+v, want 20.20 EUR pending, priced and named from the catalogue", o.Amount, o.Currency, o.Status, o.Items)
		}
		if o.ExpiresAt.Before(before.Add(orderTTL)) || o.ExpiresAt.After(w.clock.Now().Add(orderTTL)) {
			t.Errorf("ExpiresAt = %v, want created + %v", o.ExpiresAt, orderTTL)
		}
		got := w.get(t, cust, o.ID)
		if !got.Amount.Equal(o.Amount) || len(got.Items) != 2 || got.Creator != domain.CustomerScope(cust) {
			t.Fatalf("stored order = %s with %d items by %q, want %s with 2 by the customer", got.Amount, len(got.Items), got.Creator, o.Amount)
		}

		price := "1"
		_, err = w.orders.Create(ctx, service.Keyed{}, service.NewOrder{CustomerID: cust, Currency: "XXX",
			Items: []service.NewItem{{SKU: "", Quantity: 0, UnitPrice: &price}}})
		var invalid domain.ValidationErrors
		if !errors.As(err, &invalid) || len(invalid) < 3 {
			t.Fatalf("Create(invalid cart) = %v, want a validation error per field", err)
		}
		page, err := w.orders.List(ctx, domain.OrderFilter{CustomerID: cust, Limit: 10})
		if err != nil || len(page.Orders) != 1 {
			t.Fatalf("List = %d orders, %v, want only the valid one", len(page.Orders), err)
		}
	})
}

// TestOrdersCreateKeyedReplay: the same key and cart returns the order it
// created, never a second one; the key with another cart is ErrKeyReused.
func TestOrdersCreateKeyedReplay(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		w.product(t, "tea", "3.00", "EUR", nil)
		w.product(t, "pot", "9.00", "EUR", nil)
		cart := buyerOrder(cust, "EUR", item("tea", 2))
		key := service.Keyed{Key: newKey(), Fingerprint: "fp-cart-1"}

		first, err := w.orders.Create(ctx, key, cart)
		if err != nil {
			t.Fatalf("Create = %v", err)
		}
		again, err := w.orders.Create(ctx, key, cart)
		if err != nil || again.ID != first.ID {
			t.Fatalf("Create again = %s, %v, want %s", again.ID, err, first.ID)
		}
		other := service.Keyed{Key: key.Key, Fingerprint: "fp-cart-2"}
		if _, err := w.orders.Create(ctx, other, buyerOrder(cust, "EUR", item("pot", 1))); !errors.Is(err, domain.ErrKeyReused) {
			t.Fatalf("Create, same key, other cart = %v, want ErrKeyReused", err)
		}
		page, err := w.orders.List(ctx, domain.OrderFilter{CustomerID: cust, Limit: 10})
		if err != nil || len(page.Orders) != 1 {
			t.Fatalf("List = %d orders, %v, want 1", len(page.Orders), err)
		}
	})
}

// TestOrdersCancel: a pending order cancels (twice answers the same), a
// cancelled order cannot be paid, a paid one cannot be cancelled, and
// another customer's order is not found.
func TestOrdersCancel(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust, stranger := w.customer(t), w.customer(t)
		o := w.order(t, cust, "4.00")

		if _, err := w.orders.Cancel(ctx, stranger, o.ID); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("Cancel by another customer = %v, want ErrOrderNotFound", err)
		}
		for i := range 2 {
			got, err := w.orders.Cancel(ctx, cust, o.ID)
			if err != nil || got.Status != domain.StatusCancelled {
				t.Fatalf("Cancel #%d = %v, %v, want cancelled", i+1, got.Status, err)
			}
		}
		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); !errors.Is(err, domain.ErrOrderNotPayable) {
			t.Fatalf("Pay cancelled = %v, want ErrOrderNotPayable", err)
		}
		if n := len(w.charges(t, o.ID)); n != 0 {
			t.Fatalf("charges = %d, want 0", n)
		}

		paid := w.paidOrder(t, cust, "4.00")
		if _, err := w.orders.Cancel(ctx, cust, paid.ID); !errors.Is(err, domain.ErrOrderAlreadyPaid) {
			t.Fatalf("Cancel paid = %v, want ErrOrderAlreadyPaid", err)
		}
		if st := w.get(t, cust, paid.ID).Status; st != domain.StatusPaid {
			t.Fatalf("status = %v, want paid", st)
		}
	})
}

// TestExpireOrdersJob: the job expires pending orders past their TTL and
// nothing else, each exactly once even when two replicas run it at once.
func TestExpireOrdersJob(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		due1, due2 := w.order(t, cust, "1.00"), w.order(t, cust, "2.00")
		paid := w.paidOrder(t, cust, "3.00")
		w.clock.Advance(orderTTL + time.Second)
		fresh := w.order(t, cust, "4.00")

		other := w.replica()
		var wg sync.WaitGroup
		counts := make([]int64, 2)
		for i, job := range []func(context.Context) (int64, error){w.expire, other.expire} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := job(context.Background())
				if err != nil {
					t.Errorf("expire job = %v", err)
				}
				counts[i] = n
			}()
		}
		wg.Wait()
		if counts[0]+counts[1] != 2 {
			t.Fatalf("orders expired = %v, want 2 in all", counts)
		}
		for _, c := range []struct {
			o    domain.Order
			want domain.OrderStatus
		}{{due1, domain.StatusExpired}, {due2, domain.StatusExpired}, {paid, domain.StatusPaid}, {fresh, domain.StatusPending}} {
			if st := w.get(t, cust, c.o.ID).Status; st != c.want {
				t.Errorf("order %s = %v, want %v", c.o.ID, st, c.want)
			}
		}
		if n, err := w.expire(context.Background()); err != nil || n != 0 {
			t.Fatalf("expire again = %d, %v, want 0", n, err)
		}
	})
}
