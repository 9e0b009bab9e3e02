package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReplicaJobsOnce runs the background jobs in three payd processes on
// one database (docs/guarantees.md#operations: safe with several replicas) and checks that each
// unit of work was done exactly once: every due order expired once (one
// version step, and the replicas' logs together report each once), and
// every payment left unknown was resolved once, by asking the provider —
// never by charging again.
func TestReplicaJobsOnce(t *testing.T) {
	const toExpire, toRecover = 30, 6
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Parallel() // mostly waiting for the jobs' ticks
		rs := startReplicas(t, 3, on(dialect), premigrated(), withEnv(env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms", "PAYD_ORDER_TTL": "3s"}))
		_, token := rs.procs[0].register(newEmail())

		// Payments whose reply the provider loses: 202, attempt unknown.
		// Paid right after creation, well within the order TTL.
		type payment struct{ order, key string }
		var unknown []payment
		for i := range toRecover {
			p := payment{order: rs.at(i).order(token, "3.00"), key: uuid.NewString()}
			r, err := rs.at(i+1).tryPay(token, p.order, p.key, "pm_timeout")
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("Pay(%q) pm_timeout = %d %s (err %v), want 202", p.key, r.Status, r.Body, err)
			}
			unknown = append(unknown, p)
		}
		// What payd asked of the provider so far, per attempt: from here on
		// only GETs may come.
		sent := map[string][]string{}
		var attempts []struct{ ID, OrderID string }
		scanRows(t, rs.db, &attempts, "SELECT id, order_id FROM payment_attempts")
		for _, a := range attempts {
			sent[a.ID] = rs.prov.callsFor(a.ID)
		}

		var due []string
		for i := range toExpire {
			due = append(due, rs.at(i).order(token, "1.00"))
		}

		// A job logs each batch after it ends, so wait for the lines too.
		eventually(t, time.Minute, "the replicas' jobs did not expire every order and resolve every payment", func() bool {
			return rs.count("orders WHERE status = 'expired'") == toExpire &&
				rs.count("payment_attempts WHERE status = 'succeeded'") == toRecover &&
				rs.jobRows("expire_orders") >= toExpire && rs.jobRows("recover_payments") >= toRecover
		})

		for _, id := range due {
			if o := rs.order(id); o.Status != "expired" || o.Version != 2 {
				t.Errorf("order %s = %+v, want expired at version 2 (one transition)", id, o)
			}
		}
		if n := rs.prov.refundCalls(); n != 0 {
			t.Errorf("refunds asked of the provider = %d, want 0", n)
		}
		for _, a := range attempts {
			calls := rs.prov.callsFor(a.ID)
			asked := calls[len(sent[a.ID]):]
			if !slices.Equal(calls[:len(sent[a.ID])], sent[a.ID]) || len(asked) == 0 || slices.Contains(asked, "POST") {
				t.Errorf("provider calls for attempt %s = %v after %v at pay time, want only GETs added", a.ID, calls, sent[a.ID])
			}
		}
		for i, p := range unknown {
			if o := rs.order(p.order); o.Status != "paid" || o.Version != 3 {
				t.Errorf("order %s = %+v, want paid at version 3", p.order, o)
			}
			if n := rs.succeededCharges(p.order); n != 1 {
				t.Errorf("provider charges of order %s = %d, want 1", p.order, n)
			}
			// The recoverer completed the record: a replay tells the truth.
			r, err := rs.at(i).tryPay(token, p.order, p.key, "pm_timeout")
			if err != nil || r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "true" || r.json(t)["status"] != "paid" {
				t.Errorf("replay Pay(%q) = %d %s (err %v), want 200 paid replayed", p.key, r.Status, r.Body, err)
			}
		}

		// Stopped, the replicas have logged every batch they ran: each
		// unit of work appears exactly once across the three.
		for _, p := range rs.procs {
			p.stop()
		}
		if n := rs.jobRows("expire_orders"); n != toExpire {
			t.Errorf("expire_orders expired %d orders over the replicas, want %d", n, toExpire)
		}
		if n := rs.jobRows("recover_payments"); n != toRecover {
			t.Errorf("recover_payments settled %d attempts over the replicas, want %d", n, toRecover)
		}
	})
}

// order is one order's row in the shared database.
func (rs *replicaSet) order(id string) orderState {
	rs.t.Helper()
	return readOrder(rs.t, rs.db, id)
}
