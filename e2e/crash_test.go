package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestCrashThenRetry is the crash matrix (docs/guarantees.md#faults): payd is killed (kill -9)
// at each point of a payment, restarted on the same database, and the
// customer retries with the same key. Whatever the point, the provider
// charged once, the order is paid, and the retry's answer is what every
// later replay says.
//
// The restarted payd has a longer lease than the crashed one, so its
// recoverer leaves the attempt alone: this is the retry's own path, the
// takeover of the expired record and Checkout.recover asking the provider
// before anything (TestCrashRecoverer covers the recoverer).
func TestCrashThenRetry(t *testing.T) {
	eachCrashProvider(t, func(t *testing.T, dialect string, newProv func(*testing.T) crashProvider) {
		for _, point := range faultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				c := crashPayment(t, dialect, point, newProv(t), env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"})

				final, waits := c.payUntilFinal(p)
				t.Logf("told to wait %d times before the final answer", waits)
				if final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
					t.Fatalf("Pay(%q) after restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
				}
				// Never charge without asking first: the recovery asks the
				// provider about the attempt, and charges (under the same key)
				// only when the provider never saw it.
				stored := c.checkPaid(p, 3, c.prov.recoveryCalls(point))
				if !bytes.Equal(final.Body, stored) {
					t.Errorf("final answer %s, stored %s: want the same bytes", final.Body, stored)
				}
				if atts := c.attemptStates(); len(atts) != 1 {
					t.Errorf("attempts = %+v, want the one the crashed payd started", atts)
				}
			})
		}
	})
}

// TestCrashRecoverer: payd is killed mid-payment and nobody retries. The
// restarted payd's background recoverer alone resolves the attempt by
// asking the provider: a charge the provider made pays the order (and
// completes the record, so a later replay says 200 paid). An attempt the
// provider has nothing under is asked by replaying its create under its
// key (ADR 0054): that replay is the customer's one charge, and pays the
// order; a look-up's "not found" never releases it, since the request
// payd sent may still be carried out late.
func TestCrashRecoverer(t *testing.T) {
	eachCrashProvider(t, func(t *testing.T, dialect string, newProv func(*testing.T) crashProvider) {
		for _, point := range faultPoints {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				c := crashPayment(t, dialect, point, newProv(t), env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				// The job logs its batch after the batch: wait for the line too.
				eventually(t, 30*time.Second, "the recoverer did not settle the attempt", func() bool {
					s := c.attemptStates()[0].Status
					return s != "started" && s != "unknown" && p.jobRows("recover_payments") > 0
				})
				if n := p.jobRows("recover_payments"); n != 1 {
					t.Errorf("recover_payments settled %d attempts, want 1", n)
				}
				c.checkPaid(p, 3, c.prov.recoveryCalls(point))
			})
		}
	})
}

// TestCrashWebhook: payd is killed after the provider charged, and the
// provider's payment.succeeded webhook, retried until a payd answers, is
// what settles the payment: nobody retries, and the only question to the
// provider is the webhook's own, confirming the success (ADR 0031).
func TestCrashWebhook(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range faultPoints[1:] {
			t.Run(point, func(t *testing.T) {
				t.Parallel()
				relay := startHookRelay(t)
				c := crashPayment(t, dialect, point, startProcProvider(t, relay.url), env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})
				p := c.start("payd-restarted", env{"PAYD_LEASE": "1m"})
				relay.point(p.base)
				// The order commits first; the pay request's record is
				// completed right after, from the same settlement.
				eventually(t, 30*time.Second, "the webhook did not settle the payment", func() bool {
					return c.orderState().Status != "processing" && c.recordState().Status != "processing"
				})
				c.checkPaid(p, 3, []string{"POST", "GET"})
				p.stop() // every batch its jobs ran is in the log now
				if n := p.jobRows("recover_payments"); n != 0 {
					t.Errorf("recover_payments settled %d attempts, want 0 (the webhook did)", n)
				}
			})
		}
	})
}

// faultPoints are where PAYD_TEST_FAULT can kill payd during a payment.
var faultPoints = []string{"after_claim", "after_charge", "before_settle_commit"}

// crashCase is one payment whose payd process was killed at a fault point:
// its database, its provider and what the client knows (token, order, key).
type crashCase struct {
	t        *testing.T
	point    string
	dbURL    string
	db       *repository.DB
	prov     crashProvider
	customer string
	token    string
	order    string
	key      string
}

// newCrashCase is a payment still to be made on a fresh database of
// dialect, to be killed at point.
func newCrashCase(t *testing.T, dialect, point string, prov crashProvider) *crashCase {
	return &crashCase{t: t, point: point, prov: prov, dbURL: dbtest.NewURL(t, migrations.Dialect(dialect)), key: uuid.NewString()}
}

// crashPayment starts payd with the fault at point on a fresh database,
// registers, orders and pays with pm_ok — and checks that the connection
// died, that SIGKILL ended payd, and that the database and the provider
// hold what that point implies.
func crashPayment(t *testing.T, dialect, point string, prov crashProvider, extra env) *crashCase {
	t.Helper()
	c := newCrashCase(t, dialect, point, prov)
	c.crash(extra)
	c.checkCrashed()
	return c
}

// crash starts payd with the fault at c.point and settings extra,
// registers, orders and pays with pm_ok, and checks that the connection
// died and that SIGKILL ended payd.
func (c *crashCase) crash(extra env) {
	t := c.t
	t.Helper()
	e := c.prov.settings(c.dbURL, extra)
	e["PAYD_TEST_FAULT"] = c.point
	p := startPaydProc(t, "payd-"+c.point, e)
	c.customer, c.token = p.register(newEmail())
	c.order = p.order(c.token, "12.30")
	if r, err := p.tryPay(c.token, c.order, c.key, c.prov.method()); err == nil {
		t.Fatalf("Pay(%q) with fault %s = %d %s, want the connection to die", c.key, c.point, r.Status, r.Body)
	}
	p.waitKilled()
	c.db = openDB(t, c.dbURL)
}

// checkCrashed: the claim is committed (processing under the key, one
// attempt started), the settlement is not (rolled back at
// before_settle_commit), and the provider charged exactly when the point
// comes after the charge.
func (c *crashCase) checkCrashed() {
	t := c.t
	t.Helper()
	if o := c.orderState(); o.Status != "processing" || o.Version != 2 || o.PayRequestID.String != c.key {
		t.Fatalf("after %s: order = %+v, want processing, version 2, pay_request_id %s", c.point, o, c.key)
	}
	atts := c.attemptStates()
	if len(atts) != 1 || atts[0].Status != "started" {
		t.Fatalf("after %s: attempts = %+v, want one started", c.point, atts)
	}
	if rec := c.recordState(); rec.Status != "processing" {
		t.Fatalf("after %s: idempotency record = %s, want processing", c.point, rec.Status)
	}
	want := []string{"POST"}
	if c.point == "after_claim" {
		want = nil
	}
	if got := c.prov.callsFor(atts[0].ID); !slices.Equal(got, want) {
		t.Fatalf("after %s: provider calls for the attempt = %v, want %v", c.point, got, want)
	}
}

// start runs payd again, without the fault, on the crashed payment's database.
func (c *crashCase) start(name string, extra env) *paydProc {
	return startPaydProc(c.t, name, c.prov.settings(c.dbURL, extra))
}

// checkPaid asserts the end state of a payment recovered after a crash:
// one successful charge, the order paid (wantVersion says every transition
// happened once), the attempt that paid it succeeded with that charge after
// exactly wantCalls to the provider, the record succeeded with a stored
// 200 paid, and a further request replays it byte for byte. It returns the
// stored body.
func (c *crashCase) checkPaid(p *paydProc, wantVersion int64, wantCalls []string) []byte {
	t := c.t
	t.Helper()
	charges := c.prov.chargesOf(c.order)
	if len(charges) != 1 || charges[0].Status != "succeeded" {
		t.Fatalf("provider charges of the order = %+v, want exactly one succeeded", charges)
	}
	if o := c.orderState(); o.Status != "paid" || o.Version != wantVersion || o.PayRequestID.String != c.key {
		t.Errorf("order = %+v, want paid, version %d, pay_request_id %s", o, wantVersion, c.key)
	}
	atts := c.attemptStates()
	last := atts[len(atts)-1]
	if last.Status != "succeeded" || last.ProviderChargeID.String != charges[0].ID {
		t.Errorf("last attempt = %+v, want succeeded with charge %s", last, charges[0].ID)
	}
	for _, a := range atts[:len(atts)-1] {
		if a.Status == "succeeded" {
			t.Errorf("attempts = %+v, want only the last succeeded", atts)
		}
	}
	if got := c.prov.callsFor(last.ID); !slices.Equal(got, wantCalls) {
		t.Errorf("provider calls for attempt %s = %v, want %v", last.ID, got, wantCalls)
	}
	if n := c.prov.refundCalls(); n != 0 {
		t.Errorf("refunds asked of the provider = %d, want 0", n)
	}
	return c.checkStoredPaid(p, c.prov.method(), "").ResponseBody
}

// checkStoredPaid checks that the pay request's record completed with a
// stored 200 and the order paid, and that a further pay call (with method)
// replays it byte for byte. Failures begin with prefix. It returns the
// record.
func (c *crashCase) checkStoredPaid(p *paydProc, method, prefix string) recordState {
	t := c.t
	t.Helper()
	rec := c.recordState()
	var stored struct{ ID, Status string }
	if err := json.Unmarshal(rec.ResponseBody, &stored); err != nil || rec.Status != "succeeded" ||
		rec.ResponseStatus != http.StatusOK || stored.Status != "paid" || stored.ID != c.order {
		t.Errorf("%sidempotency record = %s %d %s, want succeeded 200 with the order paid", prefix, rec.Status, rec.ResponseStatus, rec.ResponseBody)
	}
	replay, err := p.tryPay(c.token, c.order, c.key, method)
	if err != nil || replay.Status != rec.ResponseStatus || !bytes.Equal(replay.Body, rec.ResponseBody) ||
		replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("%sreplay Pay(%q) = %d %s (Idempotent-Replayed %q, err %v), want the stored %d %s replayed",
			prefix, c.key, replay.Status, replay.Body, replay.Header.Get("Idempotent-Replayed"), err, rec.ResponseStatus, rec.ResponseBody)
	}
	return rec
}

// payUntilFinal pays as a checkout page retrying a lost answer does: the
// same key, waiting as told by 409 idempotency_key_in_use and 202 (both
// carry Retry-After), until payd answers for good. It returns that answer
// and how often it was told to wait.
func (c *crashCase) payUntilFinal(p *paydProc) (reply, int) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for waits := 0; ; waits++ {
		r, err := p.tryPay(c.token, c.order, c.key, c.prov.method())
		if err != nil {
			t.Fatalf("Pay(%q) on the restarted payd: %v", c.key, err)
		}
		inUse := r.Status == http.StatusConflict && r.code(t) == "idempotency_key_in_use"
		if !inUse && r.Status != http.StatusAccepted {
			return r, waits
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pay(%q) still %d %s after a minute of retries", c.key, r.Status, r.Body)
		}
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			t.Fatalf("Pay(%q) = %d without a Retry-After in seconds (%q)", c.key, r.Status, r.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(min(secs, 5)) * time.Second)
	}
}

// orderState is the order's row as the database holds it.
type orderState struct {
	Status       string
	Version      int64
	PayRequestID sql.NullString
}

func (c *crashCase) orderState() orderState {
	c.t.Helper()
	return readOrder(c.t, c.db, c.order)
}

// readOrder is an order's row as db holds it.
func readOrder(t *testing.T, db *repository.DB, id string) orderState {
	t.Helper()
	var o orderState
	scanRows(t, db, &o, "SELECT status, version, pay_request_id FROM orders WHERE id = ?", id)
	return o
}

// attemptState is one payment_attempts row.
type attemptState struct {
	ID               string
	Status           string
	ProviderChargeID sql.NullString
	FailureCode      sql.NullString
}

func (c *crashCase) attemptStates() []attemptState {
	c.t.Helper()
	var atts []attemptState
	c.scan(&atts, "SELECT id, status, provider_charge_id, failure_code FROM payment_attempts WHERE order_id = ? ORDER BY created_at, id", c.order)
	return atts
}

// recordState is the pay request's idempotency record.
type recordState struct {
	Status         string
	ResponseStatus int
	ResponseBody   []byte
}

func (c *crashCase) recordState() recordState {
	c.t.Helper()
	var r recordState
	c.scan(&r, "SELECT status, response_status, response_body FROM idempotency_records WHERE scope = ? AND idem_key = ?",
		domain.CustomerScope(c.customer), c.key)
	return r
}

func (c *crashCase) scan(dst any, query string, args ...any) {
	c.t.Helper()
	scanRows(c.t, c.db, dst, query, args...)
}
