package main

import (
	"bytes"
	"context"
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

// faultPoints are where PAYD_TEST_FAULT can kill payd during a payment.
var faultPoints = []string{"after_claim", "after_charge", "before_settle_commit"}

// crashCase is one payment whose payd process was killed at a fault point:
// its database, its provider and what the client knows (token, order, key).
type crashCase struct {
	t        *testing.T
	point    string
	dbURL    string
	db       *repository.DB
	prov     *procProvider
	customer string
	token    string
	order    string
	key      string
}

// procEnv is the settings of a payd process on dbURL that charges through
// providerURL, with extra on top.
func procEnv(dbURL, providerURL string, extra env) env {
	e := env{
		"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbURL, "PAYD_PROVIDER_URL": providerURL,
		"PAYD_ADMIN_TOKEN": testAdminToken, "PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": testSecretKey,
		"PAYD_LOG_LEVEL": "info",
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// crashPayment starts payd with the fault at point on a fresh database,
// registers, orders and pays with pm_ok — and checks that the connection
// died, that SIGKILL ended payd, and that the database and the provider
// hold what that point implies.
func crashPayment(t *testing.T, dialect, point string, prov *procProvider, extra env) *crashCase {
	t.Helper()
	c := &crashCase{t: t, point: point, prov: prov, dbURL: dbtest.NewURL(t, migrations.Dialect(dialect)), key: uuid.NewString()}
	e := procEnv(c.dbURL, prov.url, extra)
	e["PAYD_TEST_FAULT"] = point
	p := startPaydProc(t, "payd-"+point, e)
	c.customer, c.token = p.register()
	c.order = p.order(c.token, "12.30")
	if r, err := p.pay(c.token, c.order, c.key, "pm_ok"); err == nil {
		t.Fatalf("Pay(%q) with fault %s = %d %s, want the connection to die", c.key, point, r.Status, r.Body)
	}
	p.waitKilled()

	var err error
	if c.db, err = repository.Open(context.Background(), c.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.db.Close() })
	c.checkCrashed()
	return c
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
	return startPaydProc(c.t, name, procEnv(c.dbURL, c.prov.url, extra))
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
	rec := c.recordState()
	var stored struct{ ID, Status string }
	if err := json.Unmarshal(rec.ResponseBody, &stored); err != nil || rec.Status != "succeeded" ||
		rec.ResponseStatus != http.StatusOK || stored.Status != "paid" || stored.ID != c.order {
		t.Errorf("idempotency record = %s %d %s, want succeeded 200 with the order paid", rec.Status, rec.ResponseStatus, rec.ResponseBody)
	}
	replay, err := p.pay(c.token, c.order, c.key, "pm_ok")
	if err != nil || replay.Status != rec.ResponseStatus || !bytes.Equal(replay.Body, rec.ResponseBody) ||
		replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay Pay(%q) = %d %s (Idempotent-Replayed %q, err %v), want the stored %d %s replayed",
			c.key, replay.Status, replay.Body, replay.Header.Get("Idempotent-Replayed"), err, rec.ResponseStatus, rec.ResponseBody)
	}
	return rec.ResponseBody
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
		r, err := p.pay(c.token, c.order, c.key, "pm_ok")
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

// pollUntil checks cond every 50ms until it holds, failing after timeout.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
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
	var o orderState
	c.scan(&o, "SELECT status, version, pay_request_id FROM orders WHERE id = ?", c.order)
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
	if err := c.db.Gorm().Raw(query, args...).Scan(dst).Error; err != nil {
		c.t.Fatalf("%s: %v", query, err)
	}
}
