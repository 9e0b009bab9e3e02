package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/repository"
)

// TestGaleraLastUnits: three payd replicas, each on its own node of the
// Galera cluster, and 50 buyers ordering one unit each of a product with
// 5 left, at once and spread over the replicas (lastUnitsRace). Galera
// tells the losers of a cross-node race at COMMIT; the guarded stock
// statement must still sell exactly 5 units. TestReplicasLastUnits runs
// the same race on one SQLite or MariaDB database.
func TestGaleraLastUnits(t *testing.T) {
	g := startGalera(t, withEnv(stormEnv))
	lastUnitsRace(t, g.db, func(i int) *driver { return g.at(i).driver })
}

// lastUnitsRace is the race for the last units on three replicas, at(i)
// being the replica serving the i-th request and db the database (a node
// of it) for the test's own reads:
//
//   - 50 buyers, each with their own token and key, order one unit of a
//     product with stock 5 at once: exactly 5 are 201, the other 45 are 409
//     out_of_stock naming the SKU, nothing else (no 5xx), and the stock is
//     0, read by every replica; the 5 orders hold the 5 units taken;
//   - each of the 5 orders is then cancelled 6 times at once, by its buyer
//     and by the merchant on every replica: every cancel answers 200
//     cancelled, and the stock comes back exactly once, to 5.
func lastUnitsRace(t *testing.T, db *repository.DB, at func(i int) *driver) {
	const sku, stock, buyers = "last-units", 5, 50
	at(0).newProduct(sku, "9.99", stock)
	tokens := make([]string, buyers)
	forEach(8, buyers, func(i int) { _, tokens[i] = at(i).register(newEmail()) })

	body := `{"items":[{"sku":"` + sku + `","quantity":1}]}`
	replies := parallel(buyers, func(i int) reply {
		r, err := at(i).send(request{method: "POST", path: "/v1/orders", token: tokens[i], key: uuid.NewString(), body: body})
		if err != nil {
			return reply{Body: []byte(err.Error())}
		}
		return r
	})
	var sold []int // the buyers whose order was created
	var ids []string
	short := 0
	for i, r := range replies {
		switch {
		case r.Status == http.StatusCreated:
			sold = append(sold, i)
			ids = append(ids, r.json(t)["id"].(string))
		case r.Status == http.StatusConflict && r.problemCode() == "out_of_stock" && r.json(t)["sku"] == sku:
			short++
		default:
			t.Errorf("buyer %d's order on %s = %d %s, want 201 or 409 out_of_stock naming %s", i, at(i).name, r.Status, r.Body, sku)
		}
	}
	t.Logf("%d buyers: %d orders created, %d out of stock", buyers, len(sold), short)
	if len(sold) != stock || short != buyers-stock {
		t.Fatalf("%d orders created and %d out of stock, want %d and %d", len(sold), short, stock, buyers-stock)
	}
	checkStockHeld(t, db, sku, stock, 0)
	if n := countRows(t, db, "orders"); n != stock {
		t.Errorf("orders = %d, want %d", n, stock)
	}
	checkReplicaStock(t, at, sku, 0)

	// Every order cancelled at once from every replica, by its buyer and by
	// the merchant: one cancel moves it, and only that one gives back.
	const perOrder = 6
	cancels := parallel(len(ids)*perOrder, func(j int) reply {
		k, n := j/perOrder, j%perOrder
		token := tokens[sold[k]]
		if n%2 == 1 {
			token = testMerchantKey
		}
		r, err := at(n / 2).send(request{method: "POST", path: "/v1/orders/" + ids[k] + "/cancel", token: token, key: uuid.NewString()})
		if err != nil {
			return reply{Body: []byte(err.Error())}
		}
		return r
	})
	for j, r := range cancels {
		if r.Status != http.StatusOK || r.json(t)["status"] != "cancelled" {
			t.Errorf("cancel %d of order %s on %s = %d %s, want 200 cancelled", j%perOrder, ids[j/perOrder], at((j%perOrder)/2).name, r.Status, r.Body)
		}
	}
	checkStockHeld(t, db, sku, stock, stock)
	if n := countRows(t, db, "orders WHERE status = 'cancelled'"); n != stock {
		t.Errorf("cancelled orders = %d, want %d", n, stock)
	}
	checkReplicaStock(t, at, sku, stock)
}

// checkReplicaStock asserts that each of the three replicas reads sku's
// stock as want, soon (a Galera node applies another node's commit
// shortly after it).
func checkReplicaStock(t *testing.T, at func(i int) *driver, sku string, want int64) {
	t.Helper()
	for i := range 3 {
		var last []byte
		if !within(10*time.Second, func() bool {
			r := at(i).do(request{method: "GET", path: "/v1/products/" + sku})
			last = r.Body
			p := decode[product](t, r)
			return r.Status == http.StatusOK && p.Stock != nil && *p.Stock == want
		}) {
			t.Errorf("%s reads %s as %s, want stock %d", at(i).name, sku, last, want)
		}
	}
}
