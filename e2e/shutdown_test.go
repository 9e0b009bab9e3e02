package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestShutdownReleasesLeases: a payment whose outcome is unknown keeps its
// idempotency record processing under a lease. A graceful shutdown releases
// that lease, so the customer's retry against the restarted payd (with a
// long lease!) takes the key over at once and recovers the payment from the
// provider: paid, one charge, no 409 in-use wait.
func TestShutdownReleasesLeases(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		lease := env{"PAYD_LEASE": "10m", "PAYD_INFLIGHT_WAIT": "100ms"}
		// No webhooks: only recovery may settle the payment.
		s := start(t, on(dialect), withEnv(lease), tuned(silentSandbox))
		_, token := s.register("ivy@example.com")
		id := s.order(token, "6.50")
		key := uuid.NewString()
		if r := s.pay(token, id, key, "pm_timeout"); r.Status != http.StatusAccepted {
			t.Fatalf("pay pm_timeout = %d %s, want 202", r.Status, r.Body)
		}
		if r := s.pay(token, id, key, "pm_timeout"); r.Status != http.StatusConflict || r.code(t) != "idempotency_key_in_use" {
			t.Fatalf("retry under the lease = %d %s, want 409 idempotency_key_in_use", r.Status, r.Body)
		}

		s.stop()
		var lockedUntil time.Time
		var raw string
		s.db.Gorm().Raw("SELECT locked_until FROM idempotency_records WHERE idem_key = ?", key).Scan(&raw)
		if lockedUntil, _ = time.Parse("2006-01-02 15:04:05.000000", raw); lockedUntil.IsZero() {
			lockedUntil, _ = time.Parse(time.RFC3339Nano, raw)
		}
		if lockedUntil.IsZero() || lockedUntil.After(time.Now().Add(time.Minute)) {
			t.Fatalf("locked_until after shutdown = %q, want released (at most now)", raw)
		}

		s = start(t, peerOf(s), withEnv(lease)) // payd again, on the same database and sandbox
		r := s.pay(token, id, key, "pm_timeout")
		if r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
			t.Fatalf("retry after restart = %d %s, want 200 paid", r.Status, r.Body)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("provider charges = %d, want 1", n)
		}
	})
}
