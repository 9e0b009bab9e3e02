package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// TestResolveStuckLeasesFirst: an operator's apply of a stuck_processing
// asks the provider about the attempt while a retry of the pay key resends
// its charge. The operator's "not found" must not release the order while
// that charge is in flight: apply leases the attempt before asking (so the
// retry cannot resend meanwhile) and judges by the row read under its lease.
// Whatever the interleaving, an order released as never charged ends with
// no charge at the provider.
func TestResolveStuckLeasesFirst(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m", "PAYD_PROVIDER_TIMEOUT": "2s", "PAYD_INFLIGHT_WAIT": "100ms"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("stuck-lease@example.com")
		id, key := s.order(token, "12.00"), uuid.NewString()
		h.set(id, hostileRule{RefuseStatus: http.StatusServiceUnavailable, RefuseCode: "unavailable", Times: 1})
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusAccepted {
			t.Fatalf("pay with the provider unavailable = %d %s, want 202", r.Status, r.Body)
		}
		a := s.onlyAttempt(id)
		past := sqlTime(time.Now().Add(-time.Minute))
		s.exec("UPDATE payment_attempts SET in_flight_until = ?, leased_until = ? WHERE id = ?", past, past, a.ID)
		s.exec("UPDATE idempotency_records SET locked_until = ? WHERE idem_key = ?", past, key) // the first request is long gone
		d, _, err := repository.NewDiscrepancyStore(s.db).Record(context.Background(), domain.Discrepancy{
			ID: uuid.NewString(), Type: domain.StuckProcessing, Reference: id + "/" + key, OrderID: id, AttemptID: a.ID,
			LocalAmount: a.Amount, Currency: a.Currency, Status: domain.DiscrepancyOpen, DetectedAt: time.Now().UTC(), Note: "staged",
		})
		if err != nil {
			t.Fatal(err)
		}
		run := s.anyRun()

		h.set(id, hostileRule{HoldRequest: 1500 * time.Millisecond}) // the retry's resend reaches the provider late, within its deadline
		h.holdGetOnce(id, 1200*time.Millisecond)                     // the operator's question is answered late, within its deadline
		applied := make(chan reply, 1)
		go func() {
			applied <- s.admin("POST", resolvePath(run, d.ID), uuid.NewString(), map[string]string{"action": "apply", "note": "asked the provider"})
		}()
		time.Sleep(300 * time.Millisecond)
		retried := make(chan reply, 1)
		go func() { retried <- s.pay(token, id, key, "pm_ok") }()

		ap := <-applied
		releasedByApply := ap.Status == http.StatusOK && s.orderRow(id).Status == domain.StatusPending
		rt := <-retried
		time.Sleep(3 * time.Second) // any charge sent is answered by now
		if releasedByApply && s.charges(id) != 0 {
			t.Errorf("apply released the order as never charged (%d %s), yet the provider has %d charge(s) for it", ap.Status, ap.Body, s.charges(id))
		}
		t.Logf("apply = %d, released = %v, retry = %d %s, charges = %d", ap.Status, releasedByApply, rt.Status, rt.Body, s.charges(id))
	})
}
