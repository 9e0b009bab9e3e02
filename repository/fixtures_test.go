package repository_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// t0 is the tests' "now": UTC with microseconds, as the database stores it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)

var seq atomic.Int64

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// newCustomer stores a customer with a unique email and token hash.
func newCustomer(t *testing.T, db *repository.DB) domain.Customer {
	t.Helper()
	n := seq.Add(1)
	c := domain.Customer{
		ID:        newID(),
		Email:     fmt.Sprintf("ada%d@example.com", n),
		Name:      "Ada Lovelace",
		TokenHash: fmt.Sprintf("%064x", n),
		CreatedAt: t0,
	}
	if err := repository.NewCustomerStore(db).Create(t.Context(), c); err != nil {
		t.Fatalf("Create(customer) = %v", err)
	}
	return c
}

// pendingOrder builds (without storing) a pending USD order of two items
// for customerID, expiring an hour after t0.
func pendingOrder(customerID string) domain.Order {
	items := []domain.Item{
		{SKU: "tea", Name: "Green tea", Quantity: 2, UnitPrice: dec("4.50")},
		{SKU: "cup", Name: "Cup", Quantity: 1, UnitPrice: dec("3.00")},
	}
	return domain.Order{
		ID:         newID(),
		CustomerID: customerID,
		Creator:    domain.CustomerScope(customerID),
		Status:     domain.StatusPending, CaptureMethod: domain.CaptureAutomatic,
		Fulfillment: domain.FulfillmentUnfulfilled,
		Amount:      domain.Total(items),
		Currency:    "USD",
		Items:       items,
		Version:     1,
		ExpiresAt:   t0.Add(time.Hour),
		CreatedAt:   t0,
		UpdatedAt:   t0,
	}
}

// newOrder stores a pending order for a new customer and returns it.
func newOrder(t *testing.T, db *repository.DB) domain.Order {
	t.Helper()
	o := pendingOrder(newCustomer(t, db).ID)
	createOrder(t, db, o)
	return o
}

func createOrder(t *testing.T, db *repository.DB, o domain.Order) {
	t.Helper()
	if err := repository.NewOrderStore(db).Create(t.Context(), o); err != nil {
		t.Fatalf("Create(order %s) = %v", o.ID, err)
	}
}

func findOrder(t *testing.T, db *repository.DB, id string) domain.Order {
	t.Helper()
	o, err := repository.NewOrderStore(db).FindByID(t.Context(), id)
	if err != nil {
		t.Fatalf("FindByID(%q) = %v", id, err)
	}
	return o
}
