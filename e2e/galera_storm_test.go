package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/migrations"
)

// galeraTally counts the answers of a Galera storm.
type galeraTally struct {
	mu                              sync.Mutex
	pays, executed, replays, inUse  int
	alreadyPaid, inProgress, fivexx int
}

// TestGaleraStorm runs three payd replicas, each on its own node of a
// three-node Galera cluster, sharing one sandbox. 20 orders are each paid
// by 30 concurrent requests spread over the replicas: the same key on even
// orders, 30 different keys on odd ones. Galera reports the losers of a
// cross-node race as deadlocks at COMMIT; payd must still answer as on one
// database: no 5xx, one charge per order, the same paid answer (or 409 in
// use) for one key, one 200 and 409s for competing keys, and every replica
// reading the order as paid right away. The sandbox's webhooks reach any
// replica. Then payments whose replies were lost (pm_timeout) are settled
// by the recoverer running on all three, each exactly once.
func TestGaleraStorm(t *testing.T) {
	startGalera(t, withEnv(stormEnv)).storm()
}

// TestReplicaStorm is TestGaleraStorm's storm with the three replicas on
// one database: SQLite, and MariaDB when PAYD_TEST_MYSQL_DSN is set. What
// holds across Galera nodes must hold on one server too.
func TestReplicaStorm(t *testing.T) {
	testdeps.RequireFull(t, "a storm on three replicas")
	eachDialect(t, func(t *testing.T, dialect string) {
		u := dbtest.NewURL(t, migrations.Dialect(dialect))
		startTrio(t, onNodes([galeratest.Nodes]string{u, u, u}), withEnv(stormEnv)).storm()
	})
}

// stormEnv configures the storm's replicas. A provider call may take long
// on a busy machine (-race): a lease of 10s lets the recoverer take over
// lost replies soon, not live pays.
var stormEnv = env{"PAYD_LEASE": "10s", "PAYD_PROVIDER_TIMEOUT": "4s"}

// storm is the body of TestGaleraStorm and TestReplicaStorm.
func (g *galeraSet) storm() {
	t := g.t
	const orders, perOrder, lost = 20, 30, 6
	_, token := g.reps[0].register(newEmail())
	ids := make([]string, orders)
	for i := range ids {
		ids[i] = g.at(i).order(token, fmt.Sprintf("%d.00", 10+i))
	}

	var tally galeraTally
	var lat latencies
	start := time.Now()
	forEach(4, orders, func(i int) {
		keys := make([]string, perOrder)
		same := uuid.NewString()
		for j := range keys {
			keys[j] = map[bool]string{true: same, false: uuid.NewString()}[i%2 == 0]
		}
		replies := parallel(perOrder, func(j int) reply {
			began := time.Now()
			r, err := g.at(i+j).tryPay(token, ids[i], keys[j], "pm_ok")
			lat.add(time.Since(began))
			if err != nil {
				t.Errorf("Pay(%q) on %s: %v", keys[j], g.at(i+j).name, err)
			}
			return r
		})
		if i%2 == 0 {
			g.checkSameKey(&tally, i, ids[i], same, replies)
		} else {
			g.checkCompetingKeys(&tally, i, ids[i], keys, replies)
		}
		if n := g.succeededCharges(ids[i]); n != 1 {
			t.Errorf("order %d (%s): provider charges = %d, want 1", i, ids[i], n)
		}
		for _, r := range g.reps {
			if status, s := g.orderStatus(r, token, ids[i]); status != http.StatusOK || s != "paid" {
				t.Errorf("GET order %d on %s right after the storm = %d %s, want 200 paid", i, r.name, status, s)
			}
		}
	})
	elapsed := time.Since(start)
	if n := g.count("payment_attempts"); n != orders {
		t.Errorf("attempts = %d, want one per order (%d)", n, orders)
	}

	retries, ok := g.retries()
	retried := "0 (no payd_db_retries_total sample)"
	if ok {
		retried = fmt.Sprintf("%.0f", retries)
	}
	t.Logf("%d pays in %v: %d executed, %d replays, %d 409 in use, %d 409 already paid, %d 409 in progress, %d 5xx; p50 %v p99 %v; database retries %s",
		tally.pays, elapsed.Round(time.Millisecond), tally.executed, tally.replays, tally.inUse, tally.alreadyPaid, tally.inProgress, tally.fivexx,
		lat.quantile(0.5).Round(time.Millisecond), lat.quantile(0.99).Round(time.Millisecond), retried)

	g.settleLostReplies(token, lost)
	eventually(t, time.Minute, "the sandbox's webhooks were not all delivered", func() bool { return g.outboxDrained() })
	delivered := g.hooks[0].Load() + g.hooks[1].Load() + g.hooks[2].Load()
	if n := g.count("webhook_events WHERE processed_at IS NULL"); n != 0 {
		t.Errorf("unprocessed webhook events = %d, want 0", n)
	}
	for i := range g.hooks {
		if g.hooks[i].Load() == 0 {
			t.Errorf("no webhook reached %s, want them spread over all replicas", g.reps[i].name)
		}
	}
	if n := g.count("discrepancies"); n != 0 {
		t.Errorf("discrepancies = %d, want none", n)
	}
	t.Logf("%d webhooks delivered over the replicas: %d/%d/%d", delivered, g.hooks[0].Load(), g.hooks[1].Load(), g.hooks[2].Load())

}

// checkSameKey holds the answers to 30 requests with one key: each is the
// same 200 paid (one executed, the rest replays) or 409 in use, never 5xx.
func (g *galeraSet) checkSameKey(tally *galeraTally, i int, id, key string, replies []reply) {
	t := g.t
	var first []byte
	executed := 0
	tally.mu.Lock()
	defer tally.mu.Unlock()
	for j, r := range replies {
		tally.pays++
		switch {
		case r.Status >= 500:
			tally.fivexx++
			t.Errorf("order %d: Pay(%q) on %s = %d %s, want 200 or 409 in use", i, key, g.at(i+j).name, r.Status, r.Body)
		case r.Status == http.StatusConflict && r.problemCode() == "idempotency_key_in_use" && r.Header.Get("Retry-After") != "":
			tally.inUse++
		case r.Status != http.StatusOK:
			t.Errorf("order %d: Pay(%q) on %s = %d %s, want 200 or 409 in use", i, key, g.at(i+j).name, r.Status, r.Body)
		default:
			if first == nil {
				first = r.Body
			}
			if !bytes.Equal(r.Body, first) {
				t.Errorf("order %d: Pay(%q) on %s = %s, want the same body as the others %s", i, key, g.at(i+j).name, r.Body, first)
			}
			if r.Header.Get("Idempotent-Replayed") == "true" {
				tally.replays++
			} else {
				executed++
			}
		}
	}
	tally.executed += executed
	if executed != 1 || !bytes.Contains(first, []byte(`"status":"paid"`)) {
		t.Errorf("order %d (%s): executed answers = %d (body %s), want exactly one 200 paid, the rest replays", i, id, executed, first)
	}
}

// checkCompetingKeys holds the answers to 30 requests with 30 keys: one
// 200 paid, the rest 409 already paid or in progress, never 5xx.
func (g *galeraSet) checkCompetingKeys(tally *galeraTally, i int, id string, keys []string, replies []reply) {
	t := g.t
	paid := 0
	tally.mu.Lock()
	defer tally.mu.Unlock()
	for j, r := range replies {
		tally.pays++
		switch code := r.problemCode(); {
		case r.Status == http.StatusOK && r.Header.Get("Idempotent-Replayed") != "true" && bytes.Contains(r.Body, []byte(`"status":"paid"`)):
			paid++
		case r.Status == http.StatusConflict && code == "order_already_paid":
			tally.alreadyPaid++
		case r.Status == http.StatusConflict && code == "order_payment_in_progress":
			tally.inProgress++
		default:
			if r.Status >= 500 {
				tally.fivexx++
			}
			t.Errorf("order %d: Pay(%q) on %s = %d %s, want 200 paid or 409 already paid/in progress", i, keys[j], g.at(i+j).name, r.Status, r.Body)
		}
	}
	tally.executed += paid
	if paid != 1 {
		t.Errorf("order %d (%s): paid answers = %d, want 1", i, id, paid)
	}
}

// settleLostReplies pays n orders with pm_timeout, whose replies the
// sandbox loses (202, outcome unknown), and waits for the recoverer on the
// three replicas to settle each once (the sandbox's webhooks are held back
// meanwhile, and arrive after): paid at version 3, one charge, one
// recovery over all replicas' logs, and a replay anywhere tells the truth.
func (g *galeraSet) settleLostReplies(token string, n int) {
	t := g.t
	type payment struct{ order, key string }
	ps := make([]payment, n)
	g.hold.Store(true)
	defer g.hold.Store(false)
	for i := range ps {
		ps[i] = payment{order: g.at(i).order(token, "3.00"), key: uuid.NewString()}
		r, err := g.at(i+1).tryPay(token, ps[i].order, ps[i].key, "pm_timeout")
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("Pay(%q) pm_timeout on %s = %d %s (err %v), want 202", ps[i].key, g.at(i+1).name, r.Status, r.Body, err)
		}
	}
	before := g.jobRows("recover_payments")
	settled := func() bool {
		for _, p := range ps {
			if readOrder(t, g.db, p.order).Status != "paid" {
				return false
			}
		}
		return g.jobRows("recover_payments")-before >= int64(n)
	}
	if !within(time.Minute, settled) {
		for _, p := range ps {
			t.Logf("order %s = %+v", p.order, readOrder(t, g.db, p.order))
		}
		t.Fatalf("after 1m the replicas' recoverers settled %d of %d lost replies", g.jobRows("recover_payments")-before, n)
	}
	for i, p := range ps {
		if o := readOrder(t, g.db, p.order); o.Version != 3 {
			t.Errorf("order %s = %+v, want paid at version 3 (settled once)", p.order, o)
		}
		if c := g.succeededCharges(p.order); c != 1 {
			t.Errorf("order %s: provider charges = %d, want 1", p.order, c)
		}
		r, err := g.at(i+2).tryPay(token, p.order, p.key, "pm_timeout")
		if err != nil || r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Contains(r.Body, []byte(`"status":"paid"`)) {
			t.Errorf("replay Pay(%q) on %s = %d %s (err %v), want 200 paid replayed", p.key, g.at(i+2).name, r.Status, r.Body, err)
		}
	}
	// Give a replica that ran a batch at the last moment time to log it.
	time.Sleep(time.Second)
	if got := g.jobRows("recover_payments") - before; got != int64(n) {
		t.Errorf("recover_payments settled %d attempts over the replicas, want %d (each once)", got, n)
	}
}

// outboxDrained reports whether the sandbox delivered every event.
func (g *galeraSet) outboxDrained() bool {
	ds, err := g.sandbox.Deliveries(g.t.Context())
	if err != nil {
		g.t.Fatal(err)
	}
	for _, d := range ds {
		if !d.Delivered() {
			return false
		}
	}
	return true
}
