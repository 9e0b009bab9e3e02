package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// nodeOp is one create-and-pay of the node-death load.
type nodeOp struct {
	replica       int
	phase         string // "before", "down" or "rejoined": where node 3 stood when it was answered
	order, key    string
	create, pay   reply
	createE, payE error
}

// TestGaleraNodeDeath kills node 3's mariadbd (SIGKILL, through the
// script's pid file) while each replica creates and pays orders in a loop.
// The replicas on nodes 1 and 2 keep serving; the one on node 3 answers
// 503 with Retry-After, never 500, and serves again once the node has
// rejoined. Every pay answered 503 is retried with its key until it
// answers: nothing is charged twice, nothing is lost.
func TestGaleraNodeDeath(t *testing.T) {
	const victim = 2 // node 3, and the replica on it
	g := startGalera(t, withEnv(env{"PAYD_LEASE": "10s", "PAYD_PROVIDER_TIMEOUT": "5s"}))
	_, token := g.reps[0].register(newEmail())

	var phase atomic.Value
	phase.Store("before")
	var mu sync.Mutex
	var ops []nodeOp
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range g.reps {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				op := g.createAndPay(w, token)
				op.phase = phase.Load().(string) // where node 3 stood when the answer came
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
				if op.pay.Status == http.StatusServiceUnavailable || op.create.Status == http.StatusServiceUnavailable {
					time.Sleep(100 * time.Millisecond) // Retry-After, shortened
				}
			}
		})
	}
	served := func(replica int, ph string) (ok, unavailable int) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range ops {
			if op.replica == replica && op.phase == ph {
				switch {
				case op.pay.Status == http.StatusOK:
					ok++
				case op.create.Status == http.StatusServiceUnavailable || op.pay.Status == http.StatusServiceUnavailable:
					unavailable++
				}
			}
		}
		return ok, unavailable
	}

	eventually(t, time.Minute, "no replica paid an order before the kill", func() bool {
		a, _ := served(0, "before")
		b, _ := served(victim, "before")
		return a > 5 && b > 5
	})
	killed := time.Now()
	phase.Store("down")
	g.cluster.Kill(t, victim+1)
	eventually(t, time.Minute, "the replicas did not serve on two nodes and refuse on the third", func() bool {
		a, _ := served(0, "down")
		b, _ := served(1, "down")
		_, c := served(victim, "down")
		return a >= 10 && b >= 10 && c >= 3
	})
	t.Logf("node%d killed; the others served on after %v", victim+1, time.Since(killed).Round(time.Millisecond))
	rejoin := time.Now()
	g.cluster.Start(t, victim+1)
	phase.Store("rejoined")
	t.Logf("node%d rejoined after %v", victim+1, time.Since(rejoin).Round(time.Millisecond))
	eventually(t, time.Minute, "the replica on the rejoined node did not pay again", func() bool {
		ok, _ := served(victim, "rejoined")
		return ok >= 5
	})
	close(stop)
	wg.Wait()

	g.checkNodeDeath(token, ops, victim)
}

// createAndPay creates an order on replica w and pays it there with a new key.
func (g *galeraSet) createAndPay(w int, token string) nodeOp {
	r := g.reps[w]
	op := nodeOp{replica: w, key: uuid.NewString()}
	op.create, op.createE = r.send(request{method: http.MethodPost, path: "/v1/orders", token: token, body: map[string]any{
		"items": []map[string]any{{"sku": r.priced("4.00"), "quantity": 1}},
	}})
	if op.createE != nil || op.create.Status != http.StatusCreated {
		return op
	}
	op.order, _ = op.create.json(g.t)["id"].(string)
	began := time.Now()
	op.pay, op.payE = r.tryPay(token, op.order, op.key, "pm_ok")
	g.payLat.add(time.Since(began))
	return op
}

// checkNodeDeath holds every answer of the load and then retries each pay
// refused with 503 until it answers, and counts the charges.
func (g *galeraSet) checkNodeDeath(token string, ops []nodeOp, victim int) {
	t := g.t
	counts := map[string]int{}
	for _, op := range ops {
		for _, a := range []struct {
			what string
			r    reply
			err  error
			want int
		}{{"create", op.create, op.createE, http.StatusCreated}, {"pay", op.pay, op.payE, http.StatusOK}} {
			if a.what == "pay" && op.order == "" {
				continue
			}
			key := fmt.Sprintf("%s %s %s %d", g.reps[op.replica].name, op.phase, a.what, a.r.Status)
			counts[key]++
			switch {
			case a.err != nil:
				t.Errorf("%s on %s (%s): no answer: %v", a.what, g.reps[op.replica].name, op.phase, a.err)
			case a.r.Status == a.want:
			case a.what == "pay" && a.r.Status == http.StatusAccepted:
				// The provider's reply was not back within payd's timeout:
				// the payment is processing, never failed; retried below
				// with its key, it must end paid, charged once.
			case a.r.Status == http.StatusServiceUnavailable && op.replica == victim && op.phase != "before":
				if a.r.Header.Get("Retry-After") == "" || a.r.problemCode() != "service_unavailable" {
					t.Errorf("%s on %s = 503 %s with Retry-After %q, want problem service_unavailable with Retry-After",
						a.what, g.reps[op.replica].name, a.r.Body, a.r.Header.Get("Retry-After"))
				}
			default:
				t.Errorf("%s on %s (%s) = %d %s, want %d (202 for a slow provider; 503 only on node%d's replica while it is down)",
					a.what, g.reps[op.replica].name, op.phase, a.r.Status, a.r.Body, a.want, victim+1)
			}
		}
	}
	t.Logf("answers: %v", counts)

	// A refused pay may have been refused before or after its claim or its
	// charge: retried with its key anywhere, it ends paid, charged once.
	retried := 0
	for i, op := range ops {
		if op.order == "" || op.pay.Status == http.StatusOK {
			continue
		}
		retried++
		r := g.at(i)
		var last reply
		if !within(time.Minute, func() bool {
			last, _ = r.tryPay(token, op.order, op.key, "pm_ok")
			return last.Status == http.StatusOK
		}) {
			t.Errorf("retry Pay(%q) on %s = %d %s, want 200 paid in the end", op.key, r.name, last.Status, last.Body)
		} else if !bytes.Contains(last.Body, []byte(`"status":"paid"`)) {
			t.Errorf("retry Pay(%q) on %s = %s, want paid", op.key, r.name, last.Body)
		}
	}
	all, err := g.sandbox.Charges(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	charged := map[string]int{}
	for _, c := range all {
		if c.Status == "succeeded" {
			charged[c.OrderID]++
		}
	}
	paid, reclaimed := 0, 0
	for _, op := range ops {
		if op.order == "" {
			continue
		}
		paid++
		if n := charged[op.order]; n != 1 {
			t.Errorf("order %s (%s on %s): provider charges = %d, want 1", op.order, op.phase, g.reps[op.replica].name, n)
		}
		o := readOrder(t, g.db, op.order)
		won := countRows(t, g.db, "payment_attempts WHERE order_id = ? AND status = 'succeeded'", op.order)
		if o.Status != "paid" || won != 1 {
			t.Errorf("order %s (%s on %s) = %+v with %d succeeded attempts, want paid by one; its timeline: %+v",
				op.order, op.phase, g.reps[op.replica].name, o, won, g.reps[0].timeline(op.order).Timeline)
		}
		if o.Version != 3 { // created, claimed, paid: more steps mean a refused pay was claimed again
			reclaimed++
		}
	}
	if len(all) != paid {
		t.Errorf("provider charges = %d, want one per order created (%d)", len(all), paid)
	}
	retries, _ := g.retries()
	t.Logf("%d orders created and paid, %d pays retried after a 503 (%d of them claimed again), %d charges; first pays p50 %v p99 %v; database retries %.0f",
		paid, retried, reclaimed, len(all), g.payLat.quantile(0.5).Round(time.Millisecond), g.payLat.quantile(0.99).Round(time.Millisecond), retries)
}
