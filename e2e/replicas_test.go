package e2e

import (
	"bytes"
	"cmp"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// replicaSet is several payd processes on one database, with a handle on
// that database and the provider they share.
type replicaSet struct {
	t     *testing.T
	procs []*paydProc
	db    *repository.DB
	prov  *procProvider
}

// startReplicas starts payd as n OS processes at once (startPaydProc n
// times) on one fresh database of on's dialect (default: SQLite), against
// one sandbox without webhooks, each with withEnv's settings on top.
// Unless premigrated, they also migrate the database at once.
func startReplicas(t *testing.T, n int, opts ...option) *replicaSet {
	t.Helper()
	o := options(opts)
	if o.stackOnly() || o.nodes != nil {
		t.Fatalf("startReplicas takes on, withEnv and premigrated (given: %+v)", o)
	}
	rs := &replicaSet{t: t, prov: startProcProvider(t, ""), procs: make([]*paydProc, n)}
	dbURL := dbtest.NewURL(t, migrations.Dialect(cmp.Or(o.dialect, "sqlite")))
	exe := paydExecutable(t)
	if o.premigrated {
		cmd := exec.Command(exe, "migrate", "up")
		cmd.Dir, cmd.Env = t.TempDir(), childEnv(env{"PAYD_DATABASE_URL": dbURL})
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("migrations applied")) {
			t.Fatalf("payd migrate up: %v\n%s", err, out)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rs.procs[i], errs[i] = launchPaydProc(t, exe, fmt.Sprintf("payd-%d", i+1), paydEnv(dbURL, rs.prov.url, o.env))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rs.db = openDB(t, dbURL)
	return rs
}

// at is the replica serving the i-th request, round robin.
func (rs *replicaSet) at(i int) *paydProc { return rs.procs[i%len(rs.procs)] }

// payAll sends one pay request per key at once, spread over the replicas.
// A request that got no answer comes back with status 0.
func (rs *replicaSet) payAll(token, orderID string, keys []string) []reply {
	return parallel(len(keys), func(i int) reply {
		r, err := rs.at(i).tryPay(token, orderID, keys[i], "pm_ok")
		if err != nil {
			return reply{Body: []byte(err.Error())}
		}
		return r
	})
}

// count runs SELECT COUNT(*) FROM query on the shared database.
func (rs *replicaSet) count(query string, args ...any) int64 {
	rs.t.Helper()
	return countRows(rs.t, rs.db, query, args...)
}

// jobRows sums what the named job reported handling over every replica.
func (rs *replicaSet) jobRows(job string) int64 {
	var n int64
	for _, p := range rs.procs {
		n += p.jobRows(job)
	}
	return n
}

// succeededCharges counts the provider's successful charges of an order.
func (rs *replicaSet) succeededCharges(orderID string) int {
	rs.t.Helper()
	return len(chargesAt(rs.t, rs.prov.sb, orderID, domain.ChargeSucceeded))
}

// TestReplicasPayOnce runs three payd processes on one database (docs/guarantees.md#one-charge-per-order:
// also across several payd processes). 60 identical pay requests, spread
// over the three at once, charge once and all get the same answer; 30
// requests with 30 different keys for another order charge once, and all
// but one are refused with a conflict.
func TestReplicasPayOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rs := startReplicas(t, 3, on(dialect))
		_, token := rs.procs[0].register(newEmail())

		t.Run("same key", func(t *testing.T) {
			id := rs.procs[1].order(token, "7.00")
			key := uuid.NewString()
			keys := make([]string, 60)
			for i := range keys {
				keys[i] = key
			}
			var first []byte
			executed, inUse := 0, 0
			for i, r := range rs.payAll(token, id, keys) {
				switch {
				case r.Status == http.StatusConflict && r.code(t) == "idempotency_key_in_use" && r.Header.Get("Retry-After") != "":
					inUse++
				case r.Status != http.StatusOK:
					t.Fatalf("Pay(%q) on %s = %d %s, want 200 (or 409 in use)", key, rs.at(i).name, r.Status, r.Body)
				case first == nil:
					first = r.Body
					fallthrough
				default:
					if !bytes.Equal(r.Body, first) {
						t.Errorf("Pay(%q) on %s = %s, want the same body as the others %s", key, rs.at(i).name, r.Body, first)
					}
					if r.Header.Get("Idempotent-Replayed") != "true" {
						executed++
					}
				}
			}
			t.Logf("60 requests: %d executed, %d in use, the rest replayed", executed, inUse)
			if executed != 1 || first == nil || !bytes.Contains(first, []byte(`"status":"paid"`)) {
				t.Errorf("answers executed = %d (body %s), want exactly one 200 paid, the rest replays", executed, first)
			}
			if n := rs.succeededCharges(id); n != 1 {
				t.Errorf("provider charges = %d, want 1", n)
			}
			if n := rs.count("payment_attempts WHERE order_id = ?", id); n != 1 {
				t.Errorf("attempts = %d, want 1", n)
			}
		})

		t.Run("different keys", func(t *testing.T) {
			id := rs.procs[2].order(token, "8.00")
			keys := make([]string, 30)
			for i := range keys {
				keys[i] = uuid.NewString()
			}
			paid := 0
			for i, r := range rs.payAll(token, id, keys) {
				switch {
				case r.Status == http.StatusOK && r.json(t)["status"] == "paid" && r.json(t)["pay_request_id"] == keys[i]:
					paid++
				case r.Status == http.StatusConflict && (r.code(t) == "order_payment_in_progress" || r.code(t) == "order_already_paid"):
				default:
					t.Errorf("Pay(%q) on %s = %d %s, want 200 paid or 409 in progress/already paid", keys[i], rs.at(i).name, r.Status, r.Body)
				}
			}
			if paid != 1 {
				t.Errorf("paid answers = %d, want 1", paid)
			}
			if n := rs.succeededCharges(id); n != 1 {
				t.Errorf("provider charges = %d, want 1", n)
			}
			if n := rs.count("payment_attempts WHERE order_id = ?", id); n != 1 {
				t.Errorf("attempts = %d, want 1", n)
			}
		})
	})
}

// TestReplicasLastUnits is TestGaleraLastUnits's race (lastUnitsRace) on
// three payd processes on one database, SQLite and MariaDB: 50 buyers for
// the last 5 units sell exactly 5 (45 × 409 out_of_stock, stock 0, never
// below), and cancels racing from every replica give them back once.
func TestReplicasLastUnits(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rs := startReplicas(t, 3, on(dialect))
		lastUnitsRace(t, rs.db, func(i int) *driver { return rs.at(i).driver })
	})
}
