package e2e

import (
	"bytes"
	"net/http"
	"testing"
)

// TestCrashAfterSettle: payd is killed after the settlement committed —
// the order is paid — but before the pay call's answer was stored. The
// record is left processing. The customer's retry with the same key takes
// it over after the lease and finds its own outcome in the order (paid by
// this very key): 200 paid, stored and replayed, and the provider is neither
// charged again nor even asked.
func TestCrashAfterSettle(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		prov := startProcProvider(t, "")
		c := newCrashCase(t, dialect, "after_settle_commit", prov)
		c.crash(env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"})
		if o := c.orderState(); o.Status != "paid" || o.Version != 3 {
			t.Fatalf("after %s: order = %+v, want paid at version 3", c.point, o)
		}
		if rec := c.recordState(); rec.Status != "processing" {
			t.Fatalf("after %s: idempotency record = %s, want processing", c.point, rec.Status)
		}

		restarted := c.start("payd-restarted", env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"})
		final, waits := c.payUntilFinal(restarted)
		t.Logf("told to wait %d times before the final answer", waits)
		if final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
			t.Fatalf("Pay(%q) after restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
		}
		stored := c.checkPaid(restarted, 3, []string{"POST"})
		if !bytes.Equal(final.Body, stored) {
			t.Errorf("final answer %s, stored %s: want the same bytes", final.Body, stored)
		}
	})
}
