package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// product puts sku in the catalogue at price in cur, with stock (nil:
// unlimited); its name is "<sku>'s name".
func (w *world) product(t *testing.T, sku, price, cur string, stock *int64) {
	t.Helper()
	if _, err := w.catalogue.Create(context.Background(), domain.NewProduct{SKU: sku, Name: sku + "'s name", UnitPrice: price, Currency: cur, Stock: stock}); err != nil {
		t.Fatalf("create product %s: %v", sku, err)
	}
}

// stockOf is what is left of sku (-1: unlimited).
func (w *world) stockOf(t *testing.T, sku string) int64 {
	t.Helper()
	p, err := w.catalogue.Get(context.Background(), sku)
	if err != nil {
		t.Fatalf("get product %s: %v", sku, err)
	}
	if p.Stock == nil {
		return -1
	}
	return *p.Stock
}

func item(sku string, quantity int64) service.NewItem {
	return service.NewItem{SKU: sku, Quantity: quantity}
}

// buyerOrder is customer's order of items, from the catalogue.
func buyerOrder(customer, cur string, items ...service.NewItem) service.NewOrder {
	return service.NewOrder{CustomerID: customer, Currency: cur, Items: items}
}

func count(n int64) *int64 { return &n }

// TestOrdersPriceIsTheMerchants: a buyer cannot name a price (the field,
// per line, nothing written); the merchant can, on a custom line that
// takes no stock; a price change applies to orders created after it; an
// unknown or inactive SKU and a line in another currency are refused.
func TestOrdersPriceIsTheMerchants(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		w.product(t, "mug", "12.00", "EUR", count(3))
		w.product(t, "hidden", "1.00", "EUR", nil)
		w.product(t, "dollar", "1.00", "USD", nil)
		if _, err := w.catalogue.Update(ctx, "hidden", domain.ProductChange{Active: new(false)}); err != nil {
			t.Fatal(err)
		}

		cheap := "0.01"
		_, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "EUR", item("mug", 1), service.NewItem{SKU: "mug", Quantity: 1, UnitPrice: &cheap}))
		if !hasField(err, "items[1].unit_price") {
			t.Fatalf("a buyer's price = %v, want validation_failed naming items[1].unit_price", err)
		}
		var many domain.ValidationErrors
		if _, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "", service.NewItem{SKU: "mug", Quantity: 1, UnitPrice: &cheap})); !hasField(err, "items[0].unit_price") || errors.As(err, &many) {
			t.Fatalf("a buyer's priced line without a currency = %v, want its price alone named", err)
		}
		for name, n := range map[string]service.NewOrder{
			"items[0].sku": buyerOrder(cust, "EUR", item("nosuch", 1)),
			"items[1].sku": buyerOrder(cust, "EUR", item("mug", 1), item("hidden", 1)),
			"items[2].sku": buyerOrder(cust, "EUR", item("mug", 1), item("mug", 1), item("dollar", 1)),
		} {
			if _, err := w.orders.Create(ctx, service.Keyed{}, n); !hasField(err, name) {
				t.Errorf("Create(%s bad) = %v, want validation_failed naming it", name, err)
			}
		}
		if got := w.stockOf(t, "mug"); got != 3 {
			t.Fatalf("stock after refused orders = %d, want 3 (nothing taken)", got)
		}

		o, err := w.orders.Create(ctx, service.Keyed{}, service.NewOrder{Merchant: true, Currency: "EUR",
			Items: []service.NewItem{item("mug", 1), {Name: "Gift wrap", Quantity: 2, UnitPrice: new("1.50")}}})
		if err != nil || !o.Amount.Equal(decimal.RequireFromString("15.00")) || o.CustomerID != "" || o.Creator != domain.ScopeMerchant {
			t.Fatalf("merchant's guest order = %+v, %v; want 15.00 EUR, no customer, by the merchant", o, err)
		}
		if got := w.stockOf(t, "mug"); got != 2 {
			t.Fatalf("stock after a merchant's order = %d, want 2 (the custom line takes none)", got)
		}
		if _, err := w.orders.Create(ctx, service.Keyed{}, service.NewOrder{Merchant: true, CustomerID: "0193d9a0-1c2b-7e4f-8a10-5b6c7d8e9f01", Currency: "EUR",
			Items: []service.NewItem{item("mug", 1)}}); !hasField(err, "customer_id") {
			t.Errorf("merchant's order for an unknown customer = %v, want validation_failed naming customer_id", err)
		}

		if _, err := w.catalogue.Update(ctx, "mug", domain.ProductChange{UnitPrice: new("14.00")}); err != nil {
			t.Fatal(err)
		}
		after, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "", item("mug", 1)))
		if err != nil || !after.Amount.Equal(decimal.RequireFromString("14.00")) || after.Currency != "EUR" {
			t.Fatalf("order after the price change = %+v, %v; want 14.00 EUR", after, err)
		}
		if before := w.get(t, domain.AnyCustomer, o.ID); !before.Amount.Equal(decimal.RequireFromString("15.00")) {
			t.Errorf("the order before the change = %s, want it kept at 15.00", before.Amount)
		}
	})
}

// hasField reports whether err is a validation failure naming field.
func hasField(err error, field string) bool {
	var invalid domain.ValidationErrors
	if errors.As(err, &invalid) {
		for _, e := range invalid {
			if e.Field == field {
				return true
			}
		}
		return false
	}
	var one *domain.ValidationError
	return errors.As(err, &one) && one.Field == field
}

// TestOrdersTakeStock: all lines or none (a short line names its SKU and
// takes nothing, the other lines included); a replayed creation takes
// stock once; a cancel gives it back once, and so does an expiry.
func TestOrdersTakeStock(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		w.product(t, "mug", "12.00", "EUR", count(5))
		w.product(t, "cup", "4.00", "EUR", count(1))
		w.product(t, "tea", "3.00", "EUR", nil)

		_, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "EUR", item("mug", 2), item("cup", 2), item("tea", 9)))
		var short *domain.OutOfStockError
		if !errors.As(err, &short) || short.SKU != "cup" || !errors.Is(err, domain.ErrOutOfStock) {
			t.Fatalf("an order beyond cup's stock = %v, want out of stock naming cup", err)
		}
		if m, c := w.stockOf(t, "mug"), w.stockOf(t, "cup"); m != 5 || c != 1 {
			t.Fatalf("stock after a refused order = mug %d, cup %d; want 5, 1 (nothing taken)", m, c)
		}

		key := service.Keyed{Key: newKey(), Fingerprint: "fp-1"}
		cart := buyerOrder(cust, "EUR", item("mug", 2), item("cup", 1), item("mug", 1), item("tea", 9))
		first, err := w.orders.Create(ctx, key, cart)
		if err != nil {
			t.Fatalf("Create = %v", err)
		}
		again, err := w.orders.Create(ctx, key, cart)
		if err != nil || again.ID != first.ID {
			t.Fatalf("replayed Create = %s, %v; want %s", again.ID, err, first.ID)
		}
		if m, c, tea := w.stockOf(t, "mug"), w.stockOf(t, "cup"), w.stockOf(t, "tea"); m != 2 || c != 0 || tea != -1 {
			t.Fatalf("stock after an order and its replay = mug %d, cup %d, tea %d; want 2, 0, unlimited", m, c, tea)
		}

		// Cancels race: one moves the order, and the stock comes back once.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { _, _ = w.orders.Cancel(ctx, cust, first.ID) })
		}
		wg.Wait()
		if got := w.get(t, cust, first.ID); got.Status != domain.StatusCancelled {
			t.Fatalf("status after the cancels = %s, want cancelled", got.Status)
		}
		if m, c := w.stockOf(t, "mug"), w.stockOf(t, "cup"); m != 5 || c != 1 {
			t.Fatalf("stock after 8 cancels = mug %d, cup %d; want 5, 1 (given back once)", m, c)
		}

		// An expiry gives back too, once, however many passes run.
		o, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "EUR", item("mug", 4)))
		if err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(orderTTL + 1)
		for range 3 {
			if _, err := w.expire(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := w.get(t, cust, o.ID); got.Status != domain.StatusExpired || w.stockOf(t, "mug") != 5 {
			t.Fatalf("after the expiry: %s, mug %d; want expired, 5", got.Status, w.stockOf(t, "mug"))
		}
	})
}

// TestStockLastUnits: 50 buyers race for the last 5 units, on each
// database: exactly 5 orders, 45 out of stock, and the stock ends at 0,
// never below.
func TestStockLastUnits(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		w.product(t, "last", "12.00", "EUR", count(5))
		w.product(t, "plenty", "1.00", "EUR", count(1000))
		buyers := make([]string, 50)
		for i := range buyers {
			buyers[i] = w.customer(t)
		}
		var (
			mu       sync.Mutex
			sold     int
			refused  int
			failures []error
			wg       sync.WaitGroup
		)
		for i, cust := range buyers {
			wg.Go(func() {
				// Half the carts take the rows in the other order.
				cart := buyerOrder(cust, "EUR", item("plenty", 1), item("last", 1))
				if i%2 == 0 {
					cart = buyerOrder(cust, "EUR", item("last", 1), item("plenty", 1))
				}
				_, err := w.orders.Create(ctx, service.Keyed{Key: newKey(), Fingerprint: fmt.Sprint(i)}, cart)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					sold++
				case errors.Is(err, domain.ErrOutOfStock):
					refused++
				default:
					failures = append(failures, err)
				}
			})
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("unexpected errors: %v", failures)
		}
		if sold != 5 || refused != 45 || w.stockOf(t, "last") != 0 || w.stockOf(t, "plenty") != 995 {
			t.Fatalf("sold %d, refused %d, last %d, plenty %d; want 5, 45, 0, 995", sold, refused, w.stockOf(t, "last"), w.stockOf(t, "plenty"))
		}
	})
}

// TestExpiryRacesCancels: orders past their TTL are cancelled by their
// buyers while expiry passes run beside them, on each database. Each
// order ends either cancelled or expired, never both and never back, and
// every unit comes back exactly once, whichever won.
func TestExpiryRacesCancels(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		const orders = 12
		w.product(t, "mug", "12.00", "EUR", count(orders*2))
		type bought struct{ cust, id string }
		list := make([]bought, orders)
		for i := range list {
			cust := w.customer(t)
			o, err := w.orders.Create(ctx, service.Keyed{}, buyerOrder(cust, "EUR", item("mug", 2)))
			if err != nil {
				t.Fatal(err)
			}
			list[i] = bought{cust, o.ID}
		}
		if got := w.stockOf(t, "mug"); got != 0 {
			t.Fatalf("stock after %d orders = %d, want 0", orders, got)
		}
		w.clock.Advance(orderTTL + 1)

		var wg sync.WaitGroup
		errs := make(chan error, orders*2+3)
		for _, b := range list {
			for range 2 {
				wg.Go(func() {
					// The cancel loses to an expiry that got there first:
					// the order is no longer pending, a conflict, not a fault.
					if _, err := w.orders.Cancel(ctx, b.cust, b.id); err != nil && !errors.Is(err, domain.ErrOrderNotCancelable) {
						errs <- err
					}
				})
			}
		}
		for range 3 {
			wg.Go(func() {
				if _, err := w.expire(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("unexpected error: %v", err)
		}
		if _, err := w.expire(ctx); err != nil { // whatever no cancel reached
			t.Fatal(err)
		}
		var cancelled, expired int
		for _, b := range list {
			switch st := w.get(t, b.cust, b.id).Status; st {
			case domain.StatusCancelled:
				cancelled++
			case domain.StatusExpired:
				expired++
			default:
				t.Errorf("order %s = %s, want cancelled or expired", b.id, st)
			}
		}
		if got := w.stockOf(t, "mug"); got != orders*2 {
			t.Fatalf("stock after %d cancelled and %d expired = %d, want %d (every unit back once)", cancelled, expired, got, orders*2)
		}
		t.Logf("%d cancelled, %d expired", cancelled, expired)
	})
}
