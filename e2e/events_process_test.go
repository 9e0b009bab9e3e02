package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// TestOrderEventsAcrossProcesses: two payd processes (separate OS
// processes, no shared memory) on one database. A customer follows an order
// on the first while the second pays it: the stream starts with the order
// pending and then shows it paid, found by polling the database.
func TestOrderEventsAcrossProcesses(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		prov := startProcProvider(t, "")
		dbURL := dbtest.NewURL(t, migrations.Dialect(dialect))
		a := startPaydProc(t, "payd-a", paydEnv(dbURL, prov.url, nil))
		b := startPaydProc(t, "payd-b", paydEnv(dbURL, prov.url, nil))

		_, token := a.register(newEmail())
		id := a.order(token, "3.00")
		st := a.stream(token, id)
		first := st.next()
		if first.Status != "pending" {
			t.Fatalf("first event = %+v, want the order pending", first)
		}
		r, err := b.tryPay(token, id, uuid.NewString(), "pm_ok")
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("Pay on the other process = %d %s (err %v), want 200", r.Status, r.Body, err)
		}
		seen := st.until("paid", first)
		if last := seen[len(seen)-1]; last.Version != 3 {
			t.Errorf("paid event = %+v, want version 3 (created, claimed, paid)", last)
		}
	})
}
