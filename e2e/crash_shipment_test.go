package e2e

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// shipmentFaultPoints are where PAYD_TEST_FAULT can kill payd while the
// merchant ships: inside the shipment's transaction, after every write and
// before the commit (order_shipped, a repository point); and after the
// commit, before the answer is stored or sent (shipment_made, a service
// point).
var shipmentFaultPoints = []string{"order_shipped", "shipment_made"}

// TestCrashShipment: payd is killed (kill -9) at each point of a shipment
// of 2 of an order's 3 units, restarted on the same database, and the
// merchant retries with the same key. Whatever the point, the order holds
// exactly one shipment under the key, its line shipped 2, and one
// order.shipped event tells of it: the rerun after the kill past the
// commit finds the shipment it made instead of shipping again. The retry
// answers 201 with that shipment, and a further replay the same bytes.
func TestCrashShipment(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range shipmentFaultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				crashShipment(t, point, dbtest.NewURL(t, migrations.Dialect(dialect)))
			})
		}
	})
}

func crashShipment(t *testing.T, point, url string) {
	prov := startProcProvider(t, "")
	p := startPaydProc(t, "payd-"+point, paydEnv(url, prov.url, env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms", "PAYD_TEST_FAULT": point}))
	p.newProduct("kettle", "30.00", nil)
	_, token := p.register(newEmail())
	created := p.do(request{method: "POST", path: "/v1/orders", token: token, key: uuid.NewString(), body: `{"items":[{"sku":"kettle","quantity":3}]}`})
	if created.Status != http.StatusCreated {
		t.Fatalf("create order = %d %s", created.Status, created.Body)
	}
	id := created.json(t)["id"].(string)
	if r := p.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("pay = %d %s", r.Status, r.Body)
	}
	key, body := uuid.NewString(), `{"items":[{"sku":"kettle","quantity":2}],"carrier":"DHL"}`
	ship := request{method: "POST", path: "/v1/orders/" + id + "/shipments", token: testMerchantKey, key: key, body: body}
	if r, err := p.send(ship); err == nil {
		t.Fatalf("ship with fault %s = %d %s, want the connection to die", point, r.Status, r.Body)
	}
	p.waitKilled()
	db := openDB(t, url)
	want := map[string]int64{"order_shipped": 0, "shipment_made": 1}[point]
	if n := countRows(t, db, "shipments WHERE order_id = ?", id); n != want {
		t.Fatalf("after %s: shipments = %d, want %d", point, n, want)
	}

	restarted := startPaydProc(t, "payd-restarted", paydEnv(url, prov.url, env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"}))
	final := sendUntilFinal(t, restarted, ship)
	if final.Status != http.StatusCreated {
		t.Fatalf("ship after restart = %d %s, want 201", final.Status, final.Body)
	}
	var ids []string
	scanRows(t, db, &ids, "SELECT id FROM shipments WHERE order_id = ? AND request_key = ?", id, key)
	var shipped []int64
	scanRows(t, db, &shipped, "SELECT shipped FROM order_items WHERE order_id = ?", id)
	if len(ids) != 1 || ids[0] != final.json(t)["id"] || countRows(t, db, "shipments WHERE order_id = ?", id) != 1 ||
		len(shipped) != 1 || shipped[0] != 2 || countRows(t, db, "notify_events WHERE order_id = ? AND type = 'order.shipped'", id) != 1 {
		t.Fatalf("after the retry: shipments under the key %v (answered %s), line shipped %v, %d order.shipped events; want one shipment, 2 shipped, one event",
			ids, final.Body, shipped, countRows(t, db, "notify_events WHERE order_id = ? AND type = 'order.shipped'", id))
	}
	replay, err := restarted.send(ship)
	if err != nil || replay.Status != http.StatusCreated || !bytes.Equal(replay.Body, final.Body) || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replayed shipment = %d %s (replayed %q, err %v), want the answer %s replayed", replay.Status, replay.Body, replay.Header.Get("Idempotent-Replayed"), err, final.Body)
	}
}
