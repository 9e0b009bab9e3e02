package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/app"
	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// Jobs exactly once, by hand. Three payd replicas are wired as run wires
// them (wire), each on its own database handle: its own Galera node, or
// one database named three times. Their background jobs do not tick: the
// test seeds many due rows, then starts the same job on all three replicas
// at the same instant and lets each run passes until one finds nothing.
// What each pass returned is the number of rows that replica acted on, so
// "exactly once" is arithmetic: the three sums add up to the rows that were
// due, and the rows show one change each.
//
// Why by hand and not through the job loops: the loops tick on fixed
// intervals (purge every minute), so a test of them waits and reads counts
// back from logs; the property under test is the guarded statement each
// pass runs per row, which the loop only repeats. Job.Loop itself is
// covered by TestReplicaJobsOnce (three payd processes, real ticks).
//
// A job is found by the name run gives it (app.Parts.Jobs), so a new job is one
// more jobCase — its name, how to make rows due, and what "done once" means
// for them — plus, when it is off by default, its setting in jobsEnv. The
// reconciliation schedule (PAYD_RECONCILE_EVERY, ADR 0021) is such a case:
// its "row" is a window, and a replica's count is the windows it ran.

// jobCase is one background job under test.
type jobCase struct {
	job service.JobName // the name wire gives the job
	// seed makes rows due for the job through replica 0's API and returns
	// how long until they are due. want, called once they are, is how
	// many rows the job must act on; check, after the run, holds the rows.
	seed func(h *jobTrio) (due time.Duration, want func() int64, check func())
}

// jobCases are the jobs of run, in the order they run: the recoverer first
// (its payments would otherwise expire or lose their records), the purge
// last (every record of the earlier cases is gone by then).
var jobCases = []jobCase{
	{job: "recover_payments", seed: (*jobTrio).seedUnknown},
	{job: "expire_orders", seed: (*jobTrio).seedDue},
	{job: "reconcile_schedule", seed: (*jobTrio).seedWindow},
	{job: "purge_idempotency", seed: (*jobTrio).seedRecords},
	{job: "retention", seed: (*jobTrio).seedRetained},
}

// jobsEnv keeps every deadline short: a lost reply is the recoverer's after
// 1s, a record is gone after 4s, an order expires after 10s (long enough
// to pay a released order again on a busy machine), and a reconciliation
// window closes every 5s (off by default, so it is set here).
var jobsEnv = env{"PAYD_PROVIDER_TIMEOUT": "500ms", "PAYD_LEASE": "1s", "PAYD_ORDER_TTL": "10s", "PAYD_IDEMPOTENCY_TTL": "4s",
	"PAYD_RECONCILE_EVERY": jobsReconcileEvery.String(), "PAYD_RETENTION": "1d"}

// jobsReconcileEvery is the schedule's period in jobsEnv: short, so the
// test waits little for a window to close, and long enough that the one
// window under test is reconciled well before the next one closes.
const jobsReconcileEvery = 5 * time.Second

// TestGaleraJobsOnce runs each background job on three replicas on three
// Galera nodes at once: a row two nodes both act on is a certification
// conflict at COMMIT for one of them, which must retry and then find the
// row done, not count it twice.
func TestGaleraJobsOnce(t *testing.T) {
	c := galeratest.Require(t)
	nodes := c.NewDatabase(t)
	h := startJobTrio(t, onNodes(nodes))
	h.conflicts = galeraConflicts(t, nodes)
	h.runCases(jobCases)
}

// galeraConflicts sums, over the nodes, the transactions Galera failed in
// certification or aborted for a replicated write (wsrep_local_cert_failures,
// wsrep_local_bf_aborts): the conflicts between nodes, including those
// Galera settled itself by retrying an autocommit statement, which payd
// never sees as errors. The counters are the node's, so the test is
// alone on the cluster when it reads them.
func galeraConflicts(t *testing.T, urls [galeratest.Nodes]string) func() int64 {
	var pools []*sql.DB
	for _, u := range urls {
		pools = append(pools, openDB(t, u).Pools()["payd"])
	}
	return func() int64 {
		var sum int64
		for _, p := range pools {
			rows, err := p.QueryContext(t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var name string
				var v int64
				if err := rows.Scan(&name, &v); err != nil {
					t.Fatal(err)
				}
				sum += v
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil { //nolint:sqlclosecheck // closed here, in the loop, and its error checked
				t.Fatal(err)
			}
		}
		return sum
	}
}

// TestReplicaJobsAtOnce is TestGaleraJobsOnce on one database: SQLite, and
// MariaDB when PAYD_TEST_MYSQL_DSN is set.
func TestReplicaJobsAtOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Parallel() // mostly waiting for rows to fall due
		u := dbtest.NewURL(t, migrations.Dialect(dialect))
		startJobTrio(t, onNodes([galeratest.Nodes]string{u, u, u})).runCases(jobCases)
	})
}

// jobTrio is three wired payd apps whose jobs the test runs by hand, each
// with an HTTP front (the test seeds through replica 0's), and the provider
// they share (it records webhooks but delivers none: the jobs resolve by
// asking), behind a front that can lose charge requests.
type jobTrio struct {
	t     *testing.T
	apps  [galeratest.Nodes]*app.Parts
	apis  [galeratest.Nodes]*driver
	api   *driver // apis[0]
	token string
	db    *repository.DB
	prov  *procProvider
	drop  sync.Map // order IDs whose next charge request the front drops unsent (once)
	// busy counts the requests the front is carrying to the provider: 0
	// once the provider has finished every request payd sent.
	busy atomic.Int64
	// conflicts, on Galera, counts the cluster's conflicts so far
	// (galeraConflicts); nil on one database.
	conflicts func() int64
}

// startJobTrio wires three payds by app.Wire, replica i on the i-th URL
// of onNodes, with jobsEnv's settings, and serves their APIs but not their
// job loops: the test runs the jobs by hand (runAtOnce). It is not start
// because start serves payd whole, loops included, and hands back no
// app.Parts to run a job from.
func startJobTrio(t *testing.T, opts ...option) *jobTrio {
	t.Helper()
	o := options(opts)
	if o.stackOnly() || o.dialect != "" || o.premigrated || len(o.env) > 0 || o.nodes == nil {
		t.Fatalf("startJobTrio takes onNodes (required) and nothing else (given: %+v)", o)
	}
	urls := *o.nodes
	h := &jobTrio{t: t, prov: startProcProvider(t, "")}
	provURL := h.startDropFront()
	log := slog.New(slog.DiscardHandler)
	for i, u := range urls {
		cfg, err := loadConfig("serve", nil, paydEnv(u, provURL, jobsEnv).get, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		db := openDB(t, u)
		if i == 0 {
			if err := repository.Migrate(t.Context(), db); err != nil {
				t.Fatal(err)
			}
		}
		h.apps[i], err = app.Wire(cfg, db, provider.NewClient(provURL, provider.WithTimeout(cfg.ProviderTimeout)), log)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h.apps[i].Echo)
		t.Cleanup(srv.Close)
		h.apis[i] = newDriver(t, fmt.Sprintf("payd-%d", i+1), srv.URL)
	}
	h.api = h.apis[0]
	_, h.token = h.api.register(newEmail())
	h.db = openDB(t, urls[0])
	return h
}

// startDropFront puts a front before the provider that drops, unsent and
// unanswered, the next charge request of each order in h.drop: to payd
// that is a lost reply like any other (the outcome is unknown), but the
// provider never saw the attempt. Later requests reach the provider.
func (h *jobTrio) startDropFront() string {
	target, err := url.Parse(h.prov.url)
	if err != nil {
		h.t.Fatal(err)
	}
	hangUp := func(w http.ResponseWriter) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// The sandbox hung up (pm_timeout): so does the front.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { hangUp(w) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.busy.Add(1)
		defer h.busy.Add(-1)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			body, _ := io.ReadAll(r.Body)
			var in struct {
				OrderID string `json:"order_id"`
			}
			_ = json.Unmarshal(body, &in)
			if _, drop := h.drop.LoadAndDelete(in.OrderID); drop {
				hangUp(w)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// A provider carries out a request it has received, also when payd
		// has given up waiting (its provider timeout, 500ms here): payd's
		// hanging up does not reach the provider. (A context that can
		// never be cancelled would make the proxy watch the connection
		// instead: this one is cancelled only once the proxy is done.)
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		proxy.ServeHTTP(w, r.WithContext(ctx))
	}))
	h.t.Cleanup(srv.Close)
	return srv.URL
}

// waitProviderIdle waits until the front carries no request to the
// provider.
func (h *jobTrio) waitProviderIdle() {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for h.busy.Load() != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("the provider still had %d requests of payd's in hand after a minute", h.busy.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runCases seeds and runs each case in turn.
func (h *jobTrio) runCases(cases []jobCase) {
	for _, c := range cases {
		due, want, check := c.seed(h)
		time.Sleep(due)
		w := want()
		retries, conflicts := h.retries(), h.conflictCount()
		counts := h.runAtOnce(c.job)
		var total int64
		for _, n := range counts {
			total += n
		}
		h.t.Logf("%s: %d rows due, acted on per replica %v; payd retried %v statements or transactions%s",
			c.job, w, counts, h.retries()-retries, h.conflictsSince(conflicts))
		if total != w {
			h.t.Errorf("%s acted on %d rows over the replicas (%v), want the %d due, each once", c.job, total, counts, w)
		}
		check()
	}
}

// conflictCount is h.conflicts(), 0 without it.
func (h *jobTrio) conflictCount() int64 {
	if h.conflicts == nil {
		return 0
	}
	return h.conflicts()
}

// conflictsSince says how many Galera conflicts there were since before.
func (h *jobTrio) conflictsSince(before int64) string {
	if h.conflicts == nil {
		return ""
	}
	return fmt.Sprintf(", Galera conflicts (certification failures, brute-force aborts) %d", h.conflicts()-before)
}

// retries sums payd_db_retries_total over the replicas: the conflicts
// (a certification failure at COMMIT on Galera, SQLITE_BUSY, a deadlock)
// they ran a statement or transaction again for.
func (h *jobTrio) retries() float64 {
	var sum float64
	for _, d := range h.apis {
		v, _ := scrapeSum(h.t, d.base+"/metrics", "payd_db_retries_total")
		sum += v
	}
	return sum
}

// runAtOnce starts the named job on every replica at the same instant;
// each runs passes until one acts on nothing. It returns how many rows
// each replica's passes reported.
func (h *jobTrio) runAtOnce(name service.JobName) [galeratest.Nodes]int64 {
	t := h.t
	var counts [galeratest.Nodes]int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range h.apps {
		k := slices.IndexFunc(a.Jobs, func(j service.Job) bool { return j.Name == name })
		if k < 0 {
			t.Fatalf("run wires no job %q", name)
		}
		job := a.Jobs[k]
		wg.Go(func() {
			<-start
			for pass := 0; pass < 10; pass++ {
				n, err := job.Run(context.Background())
				counts[i] += n
				if err != nil {
					t.Errorf("%s pass %d on replica %d: %v", name, pass, i+1, err)
				}
				if n == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return counts
}

// seedUnknown pays orders with pm_timeout: the provider charges each and
// loses the reply, so each attempt is unknown until the recoverer asks.
// Every fourth charge request is dropped before the provider: the
// recoverer asks the provider by replaying the create under the attempt's
// key (ADR 54), which charges it then, once, and pays the order; the
// customer's retry with the same key, on another replica, is answered
// paid — one charge in all, one attempt per order.
func (h *jobTrio) seedUnknown() (time.Duration, func() int64, func()) {
	const n = 40
	t := h.t
	ids, keys, methods := make([]string, n), make([]string, n), make([]string, n)
	forEach(8, n, func(i int) {
		ids[i], keys[i], methods[i] = h.api.order(h.token, "3.00"), uuid.NewString(), "pm_timeout"
		if i%4 == 0 {
			h.drop.Store(ids[i], true)
			methods[i] = "pm_ok" // never reaches the provider this time
		}
		if r, err := h.api.tryPay(h.token, ids[i], keys[i], methods[i]); err != nil || r.Status != http.StatusAccepted {
			t.Errorf("Pay pm_timeout = %d %s (err %v), want 202", r.Status, r.Body, err)
		}
	})
	// payd gives up on a charge request after its provider timeout, but the
	// provider carries it out (startDropFront): on a loaded machine it may
	// record the charge after that. A look-up before then finds nothing, and the create the
	// recoverer then replays loses its reply again (pm_timeout): the
	// outcome stays unknown for that pass, rightly. So the recoverer runs
	// once the provider has finished every pay-time request.
	h.waitProviderIdle()
	// What payd asked of the provider at pay time; from here on only one
	// question per attempt may come, from the replica that leased it.
	var attempts []struct{ ID, OrderID string }
	scanRows(t, h.db, &attempts, "SELECT id, order_id FROM payment_attempts WHERE status = 'unknown'")
	if len(attempts) != n {
		t.Fatalf("unknown attempts = %d, want %d", len(attempts), n)
	}
	sent := map[string]int{}
	wasDropped := map[string]bool{}
	for _, a := range attempts {
		sent[a.ID] = len(h.prov.callsFor(a.ID))
		wasDropped[a.OrderID] = slices.Index(ids, a.OrderID)%4 == 0
	}
	// Unknown attempts are the recoverer's once the lease has passed since
	// the charge request, and once no such request can still be in flight.
	return 1500 * time.Millisecond, func() int64 { return n }, func() {
		for _, a := range attempts {
			// Paid, charged once: by the charge the provider made at pay
			// time, found by the recoverer's look-up, or by the create the
			// recoverer replayed under the attempt's key when the provider
			// had nothing under it (dropped, or cut short by payd's own
			// timeout before the provider recorded it).
			o := readOrder(t, h.db, a.OrderID)
			charges := len(chargesAt(t, h.prov.sb, a.OrderID, "succeeded"))
			if o.Version != 3 || o.Status != "paid" || charges != 1 {
				t.Errorf("order %s (charge request dropped: %v) = %+v with %d provider charges, want paid at version 3, charged once",
					a.OrderID, wasDropped[a.OrderID], o, charges)
			}
			calls := h.prov.callsFor(a.ID)
			asked := calls[sent[a.ID]:]
			// One question, by one replica: a look-up, and when the
			// provider has nothing under the key, the replayed create.
			if !slices.Equal(asked, []string{"GET"}) && !slices.Equal(asked, []string{"GET", "POST"}) || slices.Contains(calls[:sent[a.ID]], "GET") {
				t.Errorf("provider calls for attempt %s = %v (%d at pay time), want one question added: asked once, by one replica", a.ID, calls, sent[a.ID])
			}
		}
		// The same key again, on the next replica: a replay of the answer
		// the recoverer stored on the key's record (PayRecords), as long as
		// that record lives: the record TTL here is 4s, and on a busy
		// machine (SQLite above all, one writer) the seeding and the
		// recovery can outlast it. A record past its TTL is absent
		// (docs/guarantees.md#key-expiry), so the retry then runs anew and
		// resolves through the order's pay_request_id to the same 200
		// paid, without Idempotent-Replayed: by design, not a lost update
		// of the record. Only a retry whose record outlived it must be a
		// replay.
		var recs []struct{ IdemKey, ExpiresAt, Status string }
		scanRows(t, h.db, &recs, "SELECT idem_key, expires_at, status FROM idempotency_records")
		expires, recStatus := map[string]time.Time{}, map[string]string{}
		for _, r := range recs {
			expires[r.IdemKey], recStatus[r.IdemKey] = dbTime(t, r.ExpiresAt), r.Status
		}
		var replayed, expired sync.Map
		forEach(4, n, func(i int) {
			r, err := h.apis[(i+1)%len(h.apis)].tryPay(h.token, ids[i], keys[i], methods[i])
			live := expires[keys[i]].After(time.Now()) // so it was when payd read it
			if err != nil || r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"status":"paid"`)) {
				t.Errorf("Pay(%q) again on payd-%d = %d %s (err %v), want 200 paid", keys[i], (i+1)%len(h.apis)+1, r.Status, r.Body, err)
			}
			if !live {
				expired.Store(i, true)
				return
			}
			replayed.Store(i, true)
			if recStatus[keys[i]] != "succeeded" || r.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("Pay(%q) again on payd-%d, its record live (%s until %v) = %d (Idempotent-Replayed %q), want the recoverer's stored 200 replayed",
					keys[i], (i+1)%len(h.apis)+1, recStatus[keys[i]], expires[keys[i]], r.Status, r.Header.Get("Idempotent-Replayed"))
			}
		})
		count := func(m *sync.Map) (k int) {
			m.Range(func(any, any) bool { k++; return true })
			return k
		}
		t.Logf("recover_payments: paid orders' retries by the same key: %d replayed from the record the recoverer completed, %d after the record expired (order read back as paid)",
			count(&replayed), count(&expired))
		for i, id := range ids {
			won := countRows(t, h.db, "payment_attempts WHERE order_id = ? AND status = 'succeeded'", id)
			tries := countRows(t, h.db, "payment_attempts WHERE order_id = ?", id)
			if c := len(chargesAt(t, h.prov.sb, id, "succeeded")); c != 1 || won != 1 || tries != 1 {
				t.Errorf("order %d (%s) = %d attempts, %d succeeded, %d provider charges; want paid by its one attempt, charged once", i, id, tries, won, c)
			}
		}
	}
}

// seedDue creates orders nobody pays: due for expiry after the order TTL.
func (h *jobTrio) seedDue() (time.Duration, func() int64, func()) {
	const n = 150
	t := h.t
	ids := make([]string, n)
	forEach(8, n, func(i int) { ids[i] = h.api.order(h.token, "1.00") })
	// Due: these, and any order of an earlier case released unpaid.
	return 10500 * time.Millisecond, func() int64 { return countRows(t, h.db, "orders WHERE status = 'pending'") }, func() {
		for _, id := range ids {
			if o := readOrder(t, h.db, id); o.Status != "expired" || o.Version != 2 {
				t.Errorf("order %s = %+v, want expired at version 2 (one transition)", id, o)
			}
		}
		if n := countRows(t, h.db, "orders WHERE status = 'pending'"); n != 0 {
			t.Errorf("pending orders left = %d, want 0", n)
		}
	}
}

// seedRecords registers customers, each under its own idempotency key:
// their records, and every record of the earlier cases, are gone after
// the record TTL.
func (h *jobTrio) seedRecords() (time.Duration, func() int64, func()) {
	const n = 120
	t := h.t
	forEach(8, n, func(int) { h.api.register(newEmail()) })
	// Every record was written more than the TTL ago: the purge has all of
	// them to delete, these and the earlier cases'.
	return 4500 * time.Millisecond, func() int64 {
			all := countRows(t, h.db, "idempotency_records")
			if all < n {
				t.Errorf("idempotency records = %d before the purge, want at least the %d registrations'", all, n)
			}
			return all
		}, func() {
			if left := countRows(t, h.db, "idempotency_records"); left != 0 {
				t.Errorf("idempotency records left after the purge = %d, want 0", left)
			}
		}
}

// seedRetained writes, a year before the retention, n provider events
// applied, n order events fanned out, each with a delivery that ended and
// its one attempt: 4n rows for retention, done once when each of them is
// gone and was counted once. What the earlier cases left (recent provider
// events, order events not fanned out: nothing tells the shop here) is
// younger than the retention or not yet told, and stays.
func (h *jobTrio) seedRetained() (time.Duration, func() int64, func()) {
	const n = 60
	t := h.t
	old := time.Now().UTC().AddDate(-1, 0, 0).Format("2006-01-02 15:04:05.000000")
	exec := func(q string, args ...any) {
		if err := h.db.Gorm().Exec(q, args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	keptInbox, keptEvents := countRows(t, h.db, "webhook_events"), countRows(t, h.db, "notify_events")
	forEach(4, n, func(i int) {
		ev, d := uuid.NewString(), uuid.NewString()
		exec(`INSERT INTO webhook_events (id, type, payload, outcome, received_at, processed_at) VALUES (?, 'charge.succeeded', ?, 'applied', ?, ?)`,
			"evt_old_"+ev, []byte(`{}`), old, old)
		exec(`INSERT INTO notify_events (id, order_id, seq, type, cause, order_status, refunded_minor, order_updated_at, charged_minor,
			books_refunded_minor, disputed_minor, lost_minor, fanned_out, created_at)
			VALUES (?, ?, 1, 'order.paid', 'pay_request', 'paid', 0, ?, 400, 0, 0, 0, 1, ?)`, ev, uuid.NewString(), old, old)
		exec(`INSERT INTO notify_deliveries (id, endpoint_id, event_id, order_id, seq, status, attempts, next_attempt_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, 1, 'delivered', 1, ?, ?, ?)`, d, uuid.NewString(), ev, uuid.NewString(), old, old, old)
		exec(`INSERT INTO notify_attempts (id, delivery_id, n, started_at, duration_us, status, request_head, response)
			VALUES (?, ?, 1, ?, 1000, 204, 'POST /', '')`, uuid.NewString(), d, old)
	})
	return 0, func() int64 { return 4 * n }, func() {
		for table, want := range map[string]int64{"webhook_events": keptInbox, "notify_events": keptEvents, "notify_deliveries": 0, "notify_attempts": 0} {
			if left := countRows(t, h.db, table); left != want {
				t.Errorf("%s after retention = %d rows, want the %d younger or not yet told", table, left, want)
			}
		}
	}
}

// seedWindow charges orders behind payd's back at the provider, each
// under a key payd never used, so the window they fall in has that many
// discrepancies to find (missing_local_payment), and waits until the
// window closes. Done once means: one claim of that window (the other
// replicas lose the claim, on another Galera node a certification
// conflict, and reconcile nothing), one scheduled run, which is the
// window's, each discrepancy recorded once and linked once to that run,
// and the run's counts agreeing with what it linked.
func (h *jobTrio) seedWindow() (time.Duration, func() int64, func()) {
	const n = 12
	t := h.t
	every := jobsReconcileEvery
	orders, charges := make([]string, n), make([]string, n)
	prov := provider.NewClient(h.prov.url)
	forEach(4, n, func(i int) {
		orders[i] = h.api.order(h.token, "4.00")
		ch, err := prov.Charge(t.Context(), domain.ChargeRequest{IdempotencyKey: uuid.NewString(), OrderID: orders[i],
			Amount: decimal.RequireFromString("4.00"), Currency: "USD", PaymentMethod: "pm_ok"})
		if err != nil || ch.Status != domain.ChargeSucceeded {
			t.Errorf("Charge behind payd's back = %+v, %v; want succeeded", ch, err)
		}
		charges[i] = ch.ID
	})
	// The window ending at the next multiple of the period covers the two
	// periods before it, so every charge above (seeding takes far less
	// than a period); it is the schedule's from then until the period after.
	to := time.Now().UTC().Truncate(every).Add(every)
	from := to.Add(-2 * every)
	for i, c := range charges {
		if c == "" {
			t.Fatalf("charge %d was not made", i)
		}
	}
	return time.Until(to) + 300*time.Millisecond, func() int64 { return 1 }, func() {
		var windows []struct {
			To        string
			ClaimedBy string
			Claims    int
			RunID     *string
		}
		scanRows(t, h.db, &windows, "SELECT window_to AS `to`, claimed_by, claims, run_id FROM reconcile_windows")
		if len(windows) != 1 || !dbTime(t, windows[0].To).Equal(to) || windows[0].Claims != 1 || windows[0].RunID == nil {
			t.Fatalf("reconcile windows = %+v, want the one ending %v, claimed once and finished", windows, to)
		}
		var runs []struct {
			ID, Source, From, To string
			Found, NewFound      int64
		}
		scanRows(t, h.db, &runs, "SELECT id, source, window_from AS `from`, window_to AS `to`, found, new_found FROM reconciliation_runs")
		if len(runs) != 1 || runs[0].ID != *windows[0].RunID || runs[0].Source != "schedule" ||
			!dbTime(t, runs[0].From).Equal(from) || !dbTime(t, runs[0].To).Equal(to) {
			t.Fatalf("reconciliation runs = %+v, want one, the schedule's run %s of [%v, %v)", runs, *windows[0].RunID, from, to)
		}
		run := runs[0]
		for i, c := range charges {
			if got := countRows(t, h.db, "discrepancies WHERE type = 'missing_local_payment' AND reference = ? AND order_id = ?", c, orders[i]); got != 1 {
				t.Errorf("missing_local_payment discrepancies for charge %s = %d, want 1", c, got)
			}
		}
		// Besides the charges, the run may find payments still unsettled
		// from the first case (a slow run's 202, stuck_processing): every
		// finding is new (no run came before), recorded once and linked
		// once.
		linked := countRows(t, h.db, "reconciliation_findings WHERE run_id = ?", run.ID)
		recorded := countRows(t, h.db, "discrepancies WHERE run_id = ?", run.ID)
		all := countRows(t, h.db, "discrepancies")
		missing := countRows(t, h.db, "discrepancies WHERE type = 'missing_local_payment'")
		if run.Found < n || run.NewFound != run.Found || linked != run.Found || recorded != run.Found || all != run.Found || missing != n {
			t.Errorf("run found %d (%d new), linked %d findings, recorded %d discrepancies (%d in all, %d missing_local_payment); want all the same, at least %d, the %d charges behind payd's back among them, once each",
				run.Found, run.NewFound, linked, recorded, all, missing, n, n)
		}
		t.Logf("reconcile_schedule: window [%v, %v) reconciled once by run %s: %d found, %d new, %d linked", from, to, run.ID, run.Found, run.NewFound, linked)
	}
}
