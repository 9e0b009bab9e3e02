package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// racePayers is how many customers pay at once while the server restarts.
const racePayers = 4

// testPaysRacingRestart: four checkout pages keep paying orders (pm_ok, one
// key per order) while the database server shuts down and starts again, so
// pay requests meet the outage at every stage: mid-transaction, between
// the provider's charge and its settlement (the gate holds each charge's
// answer 50ms to widen that window), refused while the server is down, and
// after. Every first answer is 200, 202 or a 5xx, never a 4xx that would
// make a page give up or call it a decline. Each page then retries its
// unfinished payments with the same key until payd answers for good, as
// the checkout page does. In the end every order paid for is paid exactly
// once, by one attempt that never charged without asking first (earlier
// attempts of the key, if any, released only after the provider said it
// never saw them), nothing
// was refunded, and no order nobody paid for was charged.
func testPaysRacingRestart(t *testing.T, m *mariaDB) {
	prov := startProcProvider(t, "") // no webhooks: retries and the recoverer settle what is left open
	gate := startChargeGate(t, prov.url, 50*time.Millisecond)
	dbURL := dbtest.NewURL(t, migrations.MySQL)
	p := startPaydProc(t, "payd", paydEnv(dbURL, gate.url, env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"}))
	customer, token := p.register(newEmail())
	orders := make([]*dbPayment, 200)
	queue := make(chan *dbPayment, len(orders))
	for i := range orders {
		orders[i] = &dbPayment{method: "pm_ok", calls: [][]string{{"POST"}, {"POST", "GET"}, {"GET", "POST"}}, released: true,
			crashCase: &crashCase{t: t, dbURL: dbURL, prov: prov, customer: customer, token: token,
				order: p.order(token, "12.30"), key: uuid.NewString()}}
		queue <- orders[i]
	}
	close(queue)

	m.restoreOnCleanup(t)
	r := &racePay{p: p, token: token, first: map[*dbPayment]string{}, stop: make(chan struct{})}
	for range racePayers {
		r.wg.Go(func() { r.payFrom(queue) })
	}
	defer r.finish() // also when a wait below fails: no payer outlives the test

	eventually(t, 30*time.Second, "8 pay requests were not answered before the outage", func() bool { return r.answered.Load() >= 8 })
	m.mustStop(t)
	eventually(t, 30*time.Second, "no pay request was refused while the database was down", func() bool { return r.refused.Load() >= racePayers })
	m.mustStart(t)
	r.restarted.Store(true)
	eventually(t, 30*time.Second, "8 payments did not succeed after the restart", func() bool { return r.paidAfter.Load() >= 8 })
	r.finish()

	counts := map[string]int{}
	for c, first := range r.first {
		if first == "5xx" && len(prov.chargesOf(c.order)) > 0 {
			first = "5xx after the charge"
		}
		counts[first]++
	}
	t.Logf("first answers while the server restarted: %v", counts)
	db := openDB(t, dbURL)
	for _, c := range orders {
		c.db = db
		first, tried := r.first[c]
		switch {
		case !tried:
			if ch := prov.chargesOf(c.order); len(ch) != 0 {
				t.Errorf("provider charges of order %s nobody paid for = %+v, want none", c.order, ch)
			}
			continue
		case first != "200" && first != "202" && first != "5xx":
			t.Errorf("Pay(%q) while the server restarted = %s, want 200, 202 or a 5xx problem", c.key, first)
		}
		if final, _ := c.payUntilFinal(p); final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
			t.Errorf("retry Pay(%q) after the restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
			continue
		}
		c.checkSettled(p)
	}
	if n := prov.refundCalls(); n != 0 {
		t.Errorf("refunds asked of the provider = %d, want 0", n)
	}
}

// racePay is the payers of testPaysRacingRestart and what they saw. The
// payers never touch the test's T: they record, the test goroutine checks.
type racePay struct {
	p     *paydProc
	token string
	wg    sync.WaitGroup
	stop  chan struct{}
	once  sync.Once

	answered, refused, paidAfter atomic.Int64
	restarted                    atomic.Bool

	mu    sync.Mutex
	first map[*dbPayment]string // each tried payment's first answer: "200", "5xx", "no answer: ..."
}

// payFrom pays the queued orders one after the other until told to stop.
// After a 5xx it waits a little before the next order, as a page would.
func (r *racePay) payFrom(queue <-chan *dbPayment) {
	for c := range queue {
		select {
		case <-r.stop:
			return
		default:
		}
		rep, err := r.p.tryPay(r.token, c.order, c.key, c.method)
		first := fmt.Sprint(rep.Status)
		switch {
		case err != nil:
			first = "no answer: " + err.Error()
		case rep.Status >= 500 && rep.problemCode() != "":
			first = "5xx"
			r.refused.Add(1)
		case rep.Status == http.StatusOK && r.restarted.Load():
			r.paidAfter.Add(1)
		}
		r.mu.Lock()
		r.first[c] = first
		r.mu.Unlock()
		r.answered.Add(1)
		if first == "5xx" {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// finish stops the payers and waits for them.
func (r *racePay) finish() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}
