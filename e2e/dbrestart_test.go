package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// envDBRestart asks for the database restart test, which stops and starts
// the shared MariaDB server and so may not run beside other tests.
const envDBRestart = "PAYD_TEST_DB_RESTART"

// TestDatabaseRestart is "exactly one charge per order under a
// database restart": the MariaDB server is shut down and started again
// under a running payd process (the provider runs in the test process and
// keeps its own store), with payments in flight, and every payment still
// ends as one charge, an order paid once and a record that replays the
// truth. payd is never restarted: its connection pool has to find the
// server again by itself.
func TestDatabaseRestart(t *testing.T) {
	if os.Getenv(envDBRestart) != "1" {
		t.Skip("stops and starts the MariaDB server every test package shares: set " + envDBRestart +
			"=1 to run it alone, as .ci/run does after the other tests")
	}
	askedFor(t)
	if os.Getenv(dbtest.EnvMySQL) == "" {
		t.Fatalf("%s=1 needs %s naming the local server (mysql://root:@127.0.0.1:3306/test)", envDBRestart, dbtest.EnvMySQL)
	}
	m := localMariaDB(t)
	t.Run("payments_in_flight", func(t *testing.T) { testOutageInFlight(t, m) })
	t.Run("outage_after_charge", func(t *testing.T) { testOutageAfterCharge(t, m) })
	t.Run("pays_racing_the_restart", func(t *testing.T) { testPaysRacingRestart(t, m) })
	t.Run("notify_outage", func(t *testing.T) { testNotifyOutage(t, m) })
}

// testOutageInFlight: three pm_async payments and one pm_timeout payment
// are in flight (202) when the database goes down. While it is down, payd
// refuses every webhook of their outcomes with a 5xx (so the provider
// keeps them and retries), a new pay request gets a prompt 5xx problem
// instead of a hang, and /readyz says 503. Once the server is back, with
// payd untouched: /readyz is 200, the retried webhooks pay the four orders,
// the customer's retry of the refused pay request (same key) pays its
// order, and each order was charged exactly once and nothing refunded.
//
// payd's lease is longer than the test, so its recoverer stays out: every
// outcome here arrives by webhook or by the client's retry, and exactly one
// call per attempt reaches the provider.
func testOutageInFlight(t *testing.T, m *mariaDB) {
	relay := startHookRelay(t)
	prov := startProcProvider(t, relay.url)
	dbURL := dbtest.NewURL(t, migrations.MySQL)
	p := startPaydProc(t, "payd", paydEnv(dbURL, prov.url, env{"PAYD_LEASE": "5m"}))
	customer, token := p.register(newEmail())
	newPayment := func(method string) *dbPayment {
		// The charge, and the provider asked once more when its webhook
		// arrives: a success is applied only as the provider confirms it
		// (ADR 0031).
		c := &dbPayment{method: method, calls: [][]string{{"POST"}, {"POST", "GET"}}, crashCase: &crashCase{t: t, dbURL: dbURL, prov: prov,
			customer: customer, token: token, order: p.order(token, "12.30"), key: uuid.NewString()}}
		if method == "pm_timeout" {
			// net/http may resend a POST whose reply was lost on a reused
			// connection (it carries an Idempotency-Key): the same charge.
			c.calls = append(c.calls, []string{"POST", "POST"}, []string{"POST", "POST", "GET"})
		}
		return c
	}
	var inFlight []*dbPayment
	for _, method := range []string{"pm_async", "pm_async", "pm_async", "pm_timeout"} {
		c := newPayment(method)
		r, err := p.tryPay(token, c.order, c.key, method)
		if err != nil || r.Status != http.StatusAccepted || r.json(t)["status"] != "processing" {
			t.Fatalf("Pay(%q, %s) = %d %s (err %v), want 202 processing", c.key, method, r.Status, r.Body, err)
		}
		inFlight = append(inFlight, c)
	}
	late := newPayment("pm_ok") // ordered now, paid while the database is down

	m.restoreOnCleanup(t)
	m.mustStop(t)
	// Webhooks reach payd only now (the relay answered 502 so far), so every
	// outcome of the four payments arrives while its database is down.
	relay.point(p.base)

	for _, c := range []*dbPayment{late, inFlight[0]} {
		r, err := p.tryPay(token, c.order, c.key, c.method)
		if err != nil || r.Status < 500 || r.code(t) == "" {
			t.Errorf("Pay(%q, %s) while the database is down = %d %s (err %v), want a 5xx problem", c.key, c.method, r.Status, r.Body, err)
		}
	}
	if ch := prov.chargesOf(late.order); len(ch) != 0 {
		t.Errorf("provider charges of the order paid during the outage = %+v, want none", ch)
	}
	if got := readyStatus(p); got != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while the database is down = %d, want 503", got)
	}
	refused := map[string]bool{} // event IDs payd itself refused while its database was down
	eventually(t, 30*time.Second, "payd did not refuse each of the 4 webhooks with its own 503", func() bool {
		ds, err := prov.sb.Deliveries(context.Background())
		for _, d := range ds {
			if !d.Delivered() && d.LastStatus == http.StatusServiceUnavailable {
				refused[d.EventID] = true
			}
		}
		return err == nil && len(ds) == len(inFlight) && len(refused) == len(inFlight)
	})

	m.mustStart(t)
	eventually(t, 30*time.Second, "GET /readyz is not 200 after the restart", func() bool { return readyStatus(p) == http.StatusOK })
	r, err := p.tryPay(token, late.order, late.key, late.method)
	if err != nil || r.Status != http.StatusOK || r.json(t)["status"] != "paid" || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry Pay(%q) after the restart = %d %s (err %v), want 200 paid, executed", late.key, r.Status, r.Body, err)
	}
	db := openDB(t, dbURL)
	all := append(inFlight, late)
	for _, c := range all {
		c.db = db
	}
	eventually(t, 30*time.Second, "the retried webhooks did not pay every order", func() bool {
		return !slices.ContainsFunc(all, func(c *dbPayment) bool { return c.orderState().Status != "paid" })
	})
	for _, c := range all {
		c.checkSettled(p)
	}
	if n := prov.refundCalls(); n != 0 {
		t.Errorf("refunds asked of the provider = %d, want 0", n)
	}
	// Every webhook payd refused was delivered in the end; so was the one
	// the late payment queued after the restart.
	ds, err := prov.sb.Deliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if !d.Delivered() {
			t.Errorf("webhook %s: delivered %v after %d attempts (last status %d), want delivered",
				d.EventID, d.Delivered(), d.Attempts, d.LastStatus)
		}
		delete(refused, d.EventID)
	}
	if len(ds) != len(all) || len(refused) != 0 {
		t.Errorf("webhook deliveries = %d (refused ones missing: %v), want one per order (%d)", len(ds), refused, len(all))
	}
}

// testOutageAfterCharge: the database goes down at the worst moment of a
// payment, after the provider charged and before payd could write it down
// (the charge gate stops the server before payd hears the provider). payd
// answers a 5xx problem, and the payment is left exactly as a crash at
// that point leaves it: claimed, the attempt started, the record
// processing, one charge at the provider. Once the server is back, the
// customer retries with the same key until payd answers for good: 200
// paid, found by asking the provider, with no second charge.
func testOutageAfterCharge(t *testing.T, m *mariaDB) {
	prov := startProcProvider(t, "") // no webhooks: only asking the provider can settle it
	gate := startChargeGate(t, prov.url, 0)
	c := newCrashCase(t, "mysql", "after_charge", prov)
	// The lease outlasts the restart, so the state checkCrashed inspects
	// is still what the outage left; then a retry or the recoverer takes over.
	p := startPaydProc(t, "payd", paydEnv(c.dbURL, gate.url, env{"PAYD_LEASE": "10s", "PAYD_PROVIDER_TIMEOUT": "5s", "PAYD_INFLIGHT_WAIT": "100ms"}))
	c.customer, c.token = p.register(newEmail())
	c.order = p.order(c.token, "12.30")

	m.restoreOnCleanup(t)
	stopped := gate.arm(c.order, m.stop)
	r, err := p.tryPay(c.token, c.order, c.key, "pm_ok")
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop MariaDB after the charge: %v", err)
		}
	default:
		t.Fatalf("Pay(%q) = %d %s (err %v) without the charge passing the gate", c.key, r.Status, r.Body, err)
	}
	if err != nil || r.Status < 500 || r.code(t) == "" {
		t.Fatalf("Pay(%q) with the database gone after the charge = %d %s (err %v), want a 5xx problem", c.key, r.Status, r.Body, err)
	}

	m.mustStart(t)
	eventually(t, 30*time.Second, "GET /readyz is not 200 after the restart", func() bool { return readyStatus(p) == http.StatusOK })
	c.db = openDB(t, c.dbURL)
	c.checkCrashed()

	final, waits := c.payUntilFinal(p)
	t.Logf("told to wait %d times; recoverer settled %d attempts", waits, p.jobRows("recover_payments"))
	if final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
		t.Fatalf("retry Pay(%q) after the restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
	}
	// The retry (or the recoverer, whichever took the attempt's lease) asked
	// the provider and never charged again.
	stored := c.checkPaid(p, 3, []string{"POST", "GET"})
	if !bytes.Equal(final.Body, stored) {
		t.Errorf("final answer %s, stored %s: want the same bytes", final.Body, stored)
	}
}

// dbPayment is one payment of the restart test: what a crashCase knows
// (database, provider, customer, order, key), the payment method and the
// sequences of provider calls its attempt may have made.
type dbPayment struct {
	*crashCase
	method string
	calls  [][]string
	// released allows what a restart under the claim may rightly cause:
	// the claim committed while payd never heard so, its charge was never
	// sent, the recoverer asked the provider (GET only), found nothing and
	// released the attempt as not_charged, and the same key then paid
	// with a new attempt. Each such attempt adds two order versions.
	released bool
}

// checkSettled: one successful charge at the provider; the order paid
// once (version 3: created, claimed, paid) under the payment's key; one
// attempt, succeeded with that charge, whose calls to the provider are one
// of c.calls (when c.released, it may follow attempts released as never
// charged, each only asked about); the record completed with 200 paid; and
// a replay of the pay call answers those bytes.
func (c *dbPayment) checkSettled(p *paydProc) {
	t := c.t
	t.Helper()
	charges := c.prov.chargesOf(c.order)
	if len(charges) != 1 || charges[0].Status != "succeeded" {
		t.Errorf("%s: provider charges of order %s = %+v, want exactly one succeeded", c.method, c.order, charges)
		return
	}
	atts := c.attemptStates()
	if c.released {
		for len(atts) > 1 && atts[0].Status == "failed" && atts[0].FailureCode.String == "not_charged" &&
			slices.Equal(c.prov.callsFor(atts[0].ID), []string{"GET"}) {
			atts = atts[1:]
		}
	}
	wantVersion := int64(3 + 2*(len(c.attemptStates())-len(atts)))
	if o := c.orderState(); o.Status != "paid" || o.Version != wantVersion || o.PayRequestID.String != c.key {
		t.Errorf("%s: order = %+v, want paid, version %d, pay_request_id %s", c.method, o, wantVersion, c.key)
	}
	if len(atts) != 1 || atts[0].Status != "succeeded" || atts[0].ProviderChargeID.String != charges[0].ID {
		t.Errorf("%s: attempts = %+v, want one succeeded with charge %s", c.method, atts, charges[0].ID)
		return
	}
	calls := c.prov.callsFor(atts[0].ID)
	if !slices.ContainsFunc(c.calls, func(want []string) bool { return slices.Equal(calls, want) }) {
		t.Errorf("%s: provider calls for the attempt = %v, want one of %v", c.method, calls, c.calls)
	}
	c.checkStoredPaid(p, c.method, c.method+": ")
}

// readyStatus is what GET /readyz answers, 0 if nothing does.
func readyStatus(p *paydProc) int {
	r, err := p.send(request{method: http.MethodGet, path: "/readyz"})
	if err != nil {
		return 0
	}
	return r.Status
}
