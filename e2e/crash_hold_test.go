package e2e

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/provider"
)

// holdFaultPoints are where PAYD_TEST_FAULT can kill payd while a hold
// ends: after the claim's commit, before the provider is asked
// (hold_claimed); after the provider answered, before payd settled
// (hold_sent); after the settlement's commit, before the answer is stored
// (hold_settled). All three are service points.
var holdFaultPoints = []string{"hold_claimed", "hold_sent", "hold_settled"}

// TestCrashHold: payd is killed (kill -9) at each point of a capture of a
// held order, and of a cancel that voids one, restarted on the same
// database, and the merchant retries with the same key. Whatever the
// point, the provider captured (or voided) the hold once, the order ends
// paid with what was captured (or cancelled), one action succeeded, the
// ledger ends the hold once, and the shop is told once. A hold is never
// both captured and voided.
func TestCrashHold(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, point := range holdFaultPoints {
			for _, kind := range []string{"capture", "void"} {
				t.Run(kind+"/"+point, func(t *testing.T) {
					t.Parallel()
					crashHold(t, point, kind, dbtest.NewURL(t, migrations.Dialect(dialect)))
				})
			}
		}
	})
}

func crashHold(t *testing.T, point, kind, url string) {
	prov := startProcProvider(t, "")
	p := startPaydProc(t, "payd-"+point, paydEnv(url, prov.url, env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms", "PAYD_TEST_FAULT": point}))
	p.newProduct("kettle", "30.00", 5)
	created := p.do(request{method: "POST", path: "/v1/orders", token: testMerchantKey, key: uuid.NewString(),
		body: `{"items":[{"sku":"kettle","quantity":2}],"capture_method":"manual"}`})
	if created.Status != http.StatusCreated {
		t.Fatalf("create order = %d %s", created.Status, created.Body)
	}
	o := created.json(t)
	id := o["id"].(string)
	if r := p.pay(o["client_secret"].(string), id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK || r.json(t)["status"] != "authorized" {
		t.Fatalf("pay = %d %s, want authorized", r.Status, r.Body)
	}
	end := request{method: "POST", path: "/v1/orders/" + id + "/capture", token: testMerchantKey, key: uuid.NewString(), body: `{"amount":"40.00"}`}
	want, event := "paid", "order.paid"
	if kind == "void" {
		end = request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: testMerchantKey, key: uuid.NewString(), body: `{}`}
		want, event = "cancelled", "order.cancelled"
	}
	if r, err := p.send(end); err == nil {
		t.Fatalf("%s with fault %s = %d %s, want the connection to die", kind, point, r.Status, r.Body)
	}
	p.waitKilled()
	db := openDB(t, url)
	if n := countRows(t, db, "hold_actions WHERE order_id = ?", id); n != 1 {
		t.Fatalf("after %s: %d hold actions, want 1", point, n)
	}

	restarted := startPaydProc(t, "payd-restarted", paydEnv(url, prov.url, env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"}))
	final := sendUntilSettled(t, restarted, end)
	if final.Status != http.StatusOK || final.json(t)["status"] != want {
		t.Fatalf("%s after restart = %d %s, want 200 %s", kind, final.Status, final.Body, want)
	}
	if kind == "capture" && final.json(t)["captured_amount"] != "40.00" {
		t.Errorf("captured_amount = %v, want 40.00", final.json(t)["captured_amount"])
	}
	var chargeID string
	scanRows(t, db, &chargeID, "SELECT provider_charge_id FROM payment_attempts WHERE order_id = ?", id)
	ch, err := provider.NewClient(prov.url).FindCharge(context.Background(), chargeID)
	wantCharge, captured := domain.ChargeSucceeded, "40.00"
	if kind == "void" {
		wantCharge, captured = domain.ChargeVoided, "0"
	}
	if err != nil || ch.Status != wantCharge || !ch.AmountCaptured.Equal(decimal.RequireFromString(captured)) {
		t.Errorf("the provider's charge = %+v, %v; want %s with %s captured", ch, err, wantCharge, captured)
	}
	if n := countRows(t, db, "hold_actions WHERE order_id = ? AND status = 'succeeded'", id); n != 1 {
		t.Errorf("%d hold actions succeeded, want 1", n)
	}
	if n := countRows(t, db, "ledger_entries WHERE order_id = ? AND kind = 'hold_released'", id); n != 1 {
		t.Errorf("%d hold_released entries, want 1", n)
	}
	if n := countRows(t, db, "notify_events WHERE order_id = ? AND type = ?", id, event); n != 1 {
		t.Errorf("%d %s events, want 1", n, event)
	}
	wantStock := int64(3)
	if kind == "void" {
		wantStock = 5
	}
	var stock int64
	scanRows(t, db, &stock, "SELECT stock FROM products WHERE sku = 'kettle'")
	if stock != wantStock {
		t.Errorf("kettle stock %d, want %d", stock, wantStock)
	}
}

// sendUntilSettled sends r until its answer is neither "in use" (the dead
// process's record, until its lease ends) nor an outcome still unknown
// (its action, until its lease ends and the provider is asked again).
func sendUntilSettled(t *testing.T, p *paydProc, r request) reply {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := p.send(r)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", r.method, r.path, p.name, err)
		}
		inUse := rep.Status == http.StatusConflict && rep.code(t) == "idempotency_key_in_use"
		unknown := rep.Status == http.StatusServiceUnavailable && rep.code(t) == "payment_outcome_unknown"
		if !inUse && !unknown {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s still %d %s after a minute of retries", r.method, r.path, rep.Status, rep.Body)
		}
		secs, err := strconv.Atoi(rep.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			secs = 1
		}
		time.Sleep(time.Duration(min(secs, 3)) * time.Second)
	}
}
