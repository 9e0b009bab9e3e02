package repository_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestOrderRoundTrip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := pendingOrder(newCustomer(t, db).ID)
		o.CreatedAt = t0.Add(987 * time.Nanosecond) // below the stored microsecond
		createOrder(t, db, o)

		got := findOrder(t, db, o.ID)
		want := o
		want.CreatedAt = t0
		if !equalOrders(got, want) {
			t.Errorf("FindByID(%q) = %+v, want %+v", o.ID, got, want)
		}
		if _, err := repository.NewOrderStore(db).FindByID(t.Context(), newID()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("FindByID(unknown) = %v, want %v", err, domain.ErrOrderNotFound)
		}
	})
}

// TestOrderMoney: amounts come back exactly as they went in, in every
// currency scale, because they are stored as integer minor units.
func TestOrderMoney(t *testing.T) {
	tests := []struct {
		currency domain.Currency
		prices   []string
		want     string
	}{
		{"USD", []string{"0.10", "0.20"}, "0.30"}, // 0.1+0.2 != 0.3 in floats
		{"JPY", []string{"1500", "1"}, "1501"},
		{"KWD", []string{"1.234", "0.001"}, "1.235"},
		{"USD", []string{"999999.99", "0.01"}, "1000000.00"},
		{"USD", []string{"9999999999999.99"}, "9999999999999.99"}, // beyond float64's exact cents
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		customer := newCustomer(t, db)
		for _, tt := range tests {
			o := pendingOrder(customer.ID)
			o.Currency, o.Items = tt.currency, nil
			for _, p := range tt.prices {
				o.Items = append(o.Items, domain.Item{SKU: "x", Name: "x", Quantity: 1, UnitPrice: dec(p)})
			}
			o.Amount = domain.Total(o.Items)
			createOrder(t, db, o)
			got := findOrder(t, db, o.ID)
			if s := domain.FormatAmount(got.Amount, got.Currency); s != tt.want || !got.Amount.Equal(dec(tt.want)) {
				t.Errorf("FindByID(%s %v).Amount = %s, want %s", tt.currency, tt.prices, s, tt.want)
			}
			for i, it := range got.Items {
				if !it.UnitPrice.Equal(dec(tt.prices[i])) {
					t.Errorf("FindByID(%s).Items[%d].UnitPrice = %s, want %s", tt.currency, i, it.UnitPrice, tt.prices[i])
				}
			}
		}
	})
}

// TestOrderCreateRefusesInexactMoney: a fraction of a minor unit would be
// silently cut by the conversion; the store refuses it and writes nothing.
func TestOrderCreateRefusesInexactMoney(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := pendingOrder(newCustomer(t, db).ID)
		o.Items[1].UnitPrice = dec("3.005")
		o.Amount = domain.Total(o.Items)
		if err := s.Create(t.Context(), o); err == nil {
			t.Fatalf("Create(unit price 3.005 USD) = nil, want an error")
		}
		if _, err := s.FindByID(t.Context(), o.ID); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("FindByID after refused Create = %v, want %v", err, domain.ErrOrderNotFound)
		}
	})
}

// TestOrderCreateIsAtomic: when the items cannot be stored, neither is the order.
func TestOrderCreateIsAtomic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := pendingOrder(newCustomer(t, db).ID)
		o.Items[0].SKU = string(make([]byte, 65)) // longer than order_items.sku allows on MySQL
		if d == migrations.SQLite {
			o.CustomerID = newID() // SQLite does not check lengths: break the foreign key instead
		}
		if err := s.Create(t.Context(), o); err == nil {
			t.Fatalf("Create(bad order) = nil, want an error")
		}
		if _, err := s.FindByID(t.Context(), o.ID); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("FindByID after failed Create = %v, want %v", err, domain.ErrOrderNotFound)
		}
	})
}

// equalOrders compares orders by value: decimals and times print in a
// canonical form, so equal amounts of different scale compare equal.
func equalOrders(a, b domain.Order) bool { return orderString(a) == orderString(b) }

func orderString(o domain.Order) string {
	paid := "never"
	if o.PaidAt != nil {
		paid = o.PaidAt.UTC().String()
	}
	o.PaidAt = nil
	return fmt.Sprintf("%+v paid:%s", o, paid)
}
