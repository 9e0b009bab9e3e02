package e2e

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// orderFaultPoints are where PAYD_TEST_FAULT can kill payd while a buyer's
// order takes counted stock: inside the creation's transaction, after the
// order, its lines and the guarded stock statements and before the commit
// (order_stock_taken, a repository point); and after the commit, before
// the answer is stored or sent (order_created, a service point).
var orderFaultPoints = []string{"order_stock_taken", "order_created"}

// TestCrashOrderStock: payd is killed (kill -9) at each point of a buyer's
// order of a product with counted stock, restarted on the same database,
// and the buyer retries with the same key. Whatever the point, no stock is
// taken without an order and no order exists without the stock it took
// (stock + the stock_taken of every live order = the stock received), and
// the retry answers 201 with exactly one order under the key, which took
// the stock once; a further replay answers the same bytes.
func TestCrashOrderStock(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range orderFaultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				u := dbtest.NewURL(t, migrations.Dialect(dialect))
				crashOrderStock(t, point, [3]string{u, u, u})
			})
		}
	})
}

// TestGaleraCrashOrderStock is TestCrashOrderStock on the Galera cluster:
// payd is killed on node 1 at each point of a buyer's order of counted
// stock, the buyer retries on a payd of node 2, and node 3 is read. What a
// killed node's transaction left behind (nothing, or all of it, as the
// cluster certified it) is what every node sees.
func TestGaleraCrashOrderStock(t *testing.T) {
	c := galeratest.Require(t)
	for _, point := range orderFaultPoints {
		t.Run(point, func(t *testing.T) {
			crashOrderStock(t, point, c.NewDatabase(t))
		})
	}
}

// crashOrderStock kills payd (kill -9) at point while a buyer orders 3
// units of a product with 10, the payd on urls[0]; then checks on urls[2]
// that the stock and the orders agree, restarts payd on urls[1], and has
// the buyer retry with the same key there.
func crashOrderStock(t *testing.T, point string, urls [3]string) {
	const initial, qty = 10, 3
	prov := startProcProvider(t, "")
	key := uuid.NewString()
	body := `{"items":[{"sku":"kettle","quantity":` + strconv.Itoa(qty) + `}]}`

	p := startPaydProc(t, "payd-"+point, paydEnv(urls[0], prov.url, env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms", "PAYD_TEST_FAULT": point}))
	p.newProduct("kettle", "30.00", initial)
	customer, token := p.register(newEmail())
	if r, err := p.send(request{method: "POST", path: "/v1/orders", token: token, key: key, body: body}); err == nil {
		t.Fatalf("create order with fault %s = %d %s, want the connection to die", point, r.Status, r.Body)
	}
	p.waitKilled()
	db := openDB(t, urls[2])

	wantOrders := map[string]int64{"order_stock_taken": 0, "order_created": 1}[point]
	if n := countRows(t, db, "orders WHERE create_request_id = ?", key); n != wantOrders {
		t.Fatalf("after %s: orders under the key = %d, want %d", point, n, wantOrders)
	}
	checkStockHeld(t, db, "kettle", initial, initial-qty*wantOrders)

	restarted := startPaydProc(t, "payd-restarted", paydEnv(urls[1], prov.url, env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"}))
	final := sendUntilFinal(t, restarted, request{method: "POST", path: "/v1/orders", token: token, key: key, body: body})
	if final.Status != http.StatusCreated {
		t.Fatalf("create order (%q) after restart = %d %s, want 201", key, final.Status, final.Body)
	}
	id, _ := final.json(t)["id"].(string)
	var ids []string
	scanRows(t, db, &ids, "SELECT id FROM orders WHERE creator = ? AND create_request_id = ?", domain.CustomerScope(customer), key)
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("orders under the key = %v, want exactly the answered %s", ids, id)
	}
	if n := countRows(t, db, "orders"); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
	checkStockHeld(t, db, "kettle", initial, initial-qty)

	replay, err := restarted.send(request{method: "POST", path: "/v1/orders", token: token, key: key, body: body})
	if err != nil || replay.Status != http.StatusCreated || !bytes.Equal(replay.Body, final.Body) ||
		replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replayed creation = %d %s (Idempotent-Replayed %q, err %v), want the answer %s replayed",
			replay.Status, replay.Body, replay.Header.Get("Idempotent-Replayed"), err, final.Body)
	}
	checkStockHeld(t, db, "kettle", initial, initial-qty)
}

// checkStockHeld asserts the stock invariant for sku: what is left plus
// what the live orders (neither cancelled nor expired) took is what was
// received, and what is left is want.
func checkStockHeld(t *testing.T, db *repository.DB, sku string, received, want int64) {
	t.Helper()
	var left []int64
	scanRows(t, db, &left, "SELECT stock FROM products WHERE sku = ?", sku)
	var taken []int64
	scanRows(t, db, &taken, `SELECT COALESCE(SUM(i.stock_taken), 0) FROM order_items i JOIN orders o ON o.id = i.order_id
		WHERE i.sku = ? AND o.status NOT IN ('cancelled', 'expired')`, sku)
	if len(left) != 1 || len(taken) != 1 {
		t.Fatalf("stock of %s = %v, taken by live orders = %v: want one row each", sku, left, taken)
	}
	if left[0]+taken[0] != received || left[0] != want {
		t.Errorf("stock of %s = %d, taken by live orders = %d: want %d left and %d in all", sku, left[0], taken[0], want, received)
	}
}
