package repository_test

import (
	"maps"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestMerchantOrdersMigration: migration 00022 keeps every order, item
// and attempt stored before it (SQLite builds the three tables again),
// gives each order its customer as creator and each line nothing taken
// from stock, keeps the other indexes, and keeps a creation key unique per
// creator: the same customer's key twice is refused, another customer's
// same key is not.
func TestMerchantOrdersMigration(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db, err := repository.Open(t.Context(), dbtest.NewURL(t, d))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := repository.MigrateTo(t.Context(), db, 21); err != nil {
			t.Fatal(err)
		}
		cust, order := newID(), newID()
		force(t, db, `INSERT INTO customers (id, email, name, token_hash, created_at) VALUES (?, ?, 'n', ?, ?)`, cust, cust+"@example.com", cust, checkTime)
		force(t, db, `INSERT INTO orders (id, customer_id, status, currency, amount_minor, expires_at, created_at, updated_at, create_request_id)
			VALUES (?, ?, 'paid', 'USD', 900, ?, ?, ?, 'key-1')`, order, cust, checkTime, checkTime, checkTime)
		force(t, db, `INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price_minor) VALUES (?, 0, 'tea', 'Tea', 2, 450)`, order)
		force(t, db, `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method, currency, amount_minor, created_at, updated_at)
			VALUES (?, ?, 'pay-1', 'succeeded', 'pm_ok', 'USD', 900, ?, ?)`, newID(), order, checkTime, checkTime)
		tables := []string{"orders", "order_items", "payment_attempts"}
		rows, idx := map[string]int64{}, map[string][]string{}
		for _, table := range tables {
			rows[table], idx[table] = countRows(t, db, table), indexesOf(t, db, d, table)
		}

		if err := repository.MigrateTo(t.Context(), db, 22); err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			if got := countRows(t, db, table); got != rows[table] {
				t.Errorf("%s: %d rows after 00022, want %d", table, got, rows[table])
			}
		}
		for _, table := range []string{"order_items", "payment_attempts"} {
			if got := indexesOf(t, db, d, table); !maps.Equal(setOf(got), setOf(idx[table])) {
				t.Errorf("%s indexes after 00022 = %v, want %v", table, got, idx[table])
			}
		}
		// Read with today's statements, which need today's schema: the
		// later migrations keep the order too.
		if err := repository.Migrate(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		o := findOrder(t, db, order)
		if o.Creator != domain.CustomerScope(cust) || o.CustomerID != cust || len(o.Items) != 1 || o.Items[0].StockTaken != 0 || o.Items[0].Quantity != 2 {
			t.Fatalf("order after 00022 = %+v, want its customer as creator and its line taking no stock", o)
		}
		if o.Fulfillment != domain.FulfillmentUnfulfilled || o.Items[0].Shipped != 0 {
			t.Errorf("order after 00032 = %+v, want unfulfilled with nothing shipped", o)
		}

		other := newID()
		force(t, db, `INSERT INTO customers (id, email, name, token_hash, created_at) VALUES (?, ?, 'n', ?, ?)`, other, other+"@example.com", other, checkTime)
		insert := `INSERT INTO orders (id, customer_id, creator, status, currency, amount_minor, expires_at, created_at, updated_at, create_request_id)
			VALUES (?, ?, ?, 'pending', 'USD', 100, ?, ?, ?, 'key-1')`
		if err := db.Gorm().Exec(insert, newID(), cust, domain.CustomerScope(cust), checkTime, checkTime, checkTime).Error; err == nil {
			t.Error("the same creator's key twice was stored")
		}
		force(t, db, insert, newID(), other, domain.CustomerScope(other), checkTime, checkTime, checkTime)
		force(t, db, insert, newID(), nil, domain.ScopeMerchant, checkTime, checkTime, checkTime) // a guest order: no customer
	})
}

func setOf(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}
