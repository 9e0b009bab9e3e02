package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestCrashSlowCharge is the crash matrix's slow-provider case: payd is
// killed (kill -9) while its charge request is still on its way to a slow
// provider, which charges 3s after it was sent — past the request's own
// deadline (2.5s), within its margin. payd restarts with a shorter lease
// and provider timeout (the in-flight rule holds for each setting), and
// the customer retries with the same key. The lease the crashed request
// took at the claim keeps the restarted recoverer from taking the charge
// still in flight for one that never happened: exactly one charge, the
// order paid, and every replay says so.
func TestCrashSlowCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Parallel()
		prov := startProcProvider(t, "")
		prov.holdCharges(3 * time.Second)
		c := newCrashCase(t, dialect, "slow_charge", prov)
		p := startPaydProc(t, "payd-slow", paydEnv(c.dbURL, prov.url, env{"PAYD_LEASE": "4s", "PAYD_PROVIDER_TIMEOUT": "2500ms", "PAYD_INFLIGHT_WAIT": "100ms"}))
		c.customer, c.token = p.register(newEmail())
		c.order = p.order(c.token, "12.30")
		c.db = openDB(t, c.dbURL)

		paid := make(chan error, 1)
		go func() { _, err := p.tryPay(c.token, c.order, c.key, "pm_ok"); paid <- err }()
		eventually(t, 10*time.Second, "the charge request did not reach the provider", func() bool {
			atts := c.attemptStates()
			return len(atts) == 1 && slices.Equal(prov.callsFor(atts[0].ID), []string{"POST"})
		})
		_ = p.cmd.Process.Kill()
		p.waitKilled()
		if err := <-paid; err == nil {
			t.Fatalf("Pay(%q) was answered, want the connection to die with payd", c.key)
		}
		c.checkCrashed()
		if n := len(prov.chargesOf(c.order)); n != 0 {
			t.Fatalf("provider charges at the kill = %d, want 0 (still in flight)", n)
		}

		restarted := c.start("payd-restarted", env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms"})
		final, waits := c.payUntilFinal(restarted)
		t.Logf("told to wait %d times before the final answer", waits)
		if final.Status != http.StatusOK || final.json(t)["status"] != "paid" {
			t.Fatalf("Pay(%q) after restart = %d %s, want 200 paid", c.key, final.Status, final.Body)
		}
		c.checkPaid(restarted, 3, []string{"POST", "GET"})
		if atts := c.attemptStates(); len(atts) != 1 {
			t.Errorf("attempts = %+v, want the one the crashed payd started", atts)
		}
	})
}
