package e2e

import (
	"context"
	"net/http"
	"slices"
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

// TestCrashReconcileResumes: payd is killed (kill -9) while it reconciles a
// window of 600 charges, just after it saved its first page of 500; the
// operator retries with the same key on a restarted payd, which resumes
// the run from the second page instead of listing the first again, and
// records it once, with every charge's finding (ADR 0068).
func TestCrashReconcileResumes(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		const charges = 600 // a page of 500 and one of 100
		prov := startProcProvider(t, "")
		client := provider.NewClient(prov.url)
		for i := range charges {
			_, err := client.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: uuid.NewString(), OrderID: "o_" + strconv.Itoa(i),
				Amount: decimal.RequireFromString("3.00"), Currency: "EUR", PaymentMethod: "pm_ok"})
			if err != nil {
				t.Fatal(err)
			}
		}
		all, err := provider.AllCharges(context.Background(), client, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil || len(all) != charges {
			t.Fatalf("the sandbox lists %d charges, %v; want %d", len(all), err, charges)
		}
		prov.mu.Lock()
		prov.lists = nil
		prov.mu.Unlock()
		u := dbtest.NewURL(t, migrations.Dialect(dialect))
		key := uuid.NewString()
		body := map[string]string{"from": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "to": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
		run := request{method: "POST", path: "/v1/admin/reconciliations", token: testAdminToken, key: key, body: body}

		p := startPaydProc(t, "payd-reconcile_page_saved", paydEnv(u, prov.url, env{"PAYD_LEASE": "2s", "PAYD_PROVIDER_TIMEOUT": "1s", "PAYD_INFLIGHT_WAIT": "100ms", "PAYD_TEST_FAULT": "reconcile_page_saved"}))
		if r, err := p.send(run); err == nil {
			t.Fatalf("reconcile with the fault = %d %s, want the connection to die", r.Status, r.Body)
		}
		p.waitKilled()
		db := openDB(t, u)
		if n := countRows(t, db, "reconciliation_checkpoint_pages"); n != 1 {
			t.Fatalf("checkpoint pages after the crash = %d, want 1", n)
		}
		if n := countRows(t, db, "reconciliation_runs"); n != 0 {
			t.Fatalf("runs after the crash = %d, want none", n)
		}
		var runIDs []string
		scanRows(t, db, &runIDs, "SELECT run_id FROM reconciliation_checkpoints")
		prov.mu.Lock()
		before := slices.Clone(prov.lists)
		prov.lists = nil
		prov.mu.Unlock()
		if !slices.Equal(before, []string{""}) {
			t.Fatalf("the killed payd listed pages after %q, want the first page only", before)
		}

		restarted := startPaydProc(t, "payd-restarted", paydEnv(u, prov.url, env{"PAYD_LEASE": "1m", "PAYD_INFLIGHT_WAIT": "100ms"}))
		final := sendUntilFinal(t, restarted, run)
		if final.Status != http.StatusCreated {
			t.Fatalf("reconcile after the restart = %d %s, want 201", final.Status, final.Body)
		}
		got := final.json(t)
		if len(runIDs) != 1 || got["id"] != runIDs[0] {
			t.Errorf("the resumed run is %v, the checkpoint's %q: want the same run", got["id"], runIDs)
		}
		if got["found"] != float64(charges) || got["new"] != float64(charges) {
			t.Errorf("the resumed run found %v, new %v; want %d each (every charge is one payd never made)", got["found"], got["new"], charges)
		}
		prov.mu.Lock()
		after := slices.Clone(prov.lists)
		prov.mu.Unlock()
		if !slices.Equal(after, []string{all[499].ID}) {
			t.Errorf("the restarted payd listed pages after %q, want only the second page's (after %s)", after, all[499].ID)
		}
		if n := countRows(t, db, "reconciliation_runs"); n != 1 {
			t.Errorf("runs = %d, want 1", n)
		}
		if n := countRows(t, db, "reconciliation_checkpoints WHERE recorded_at IS NOT NULL"); n != 1 {
			t.Errorf("recorded checkpoints after the run = %d, want 1", n)
		}
		if n := countRows(t, db, "reconciliation_checkpoint_pages"); n != 0 {
			t.Errorf("checkpoint pages after the run = %d, want none", n)
		}
		// Asked once more (its answer lost, say), the run is the one recorded.
		replay, err := restarted.send(run)
		if err != nil || replay.Status != http.StatusCreated || replay.json(t)["id"] != got["id"] {
			t.Errorf("asked again = %d %s, %v; want the run %v", replay.Status, replay.Body, err, got["id"])
		}
	})
}

// sendUntilFinal sends r until its key is no longer in use by a request
// that payd lost (409 idempotency_key_in_use, waiting as Retry-After says).
func sendUntilFinal(t *testing.T, p *paydProc, r request) reply {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := p.send(r)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", r.method, r.path, p.name, err)
		}
		if rep.Status != http.StatusConflict || rep.code(t) != "idempotency_key_in_use" {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s still %d %s after a minute of retries", r.method, r.path, rep.Status, rep.Body)
		}
		secs, err := strconv.Atoi(rep.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			t.Fatalf("%s %s = 409 in use without a Retry-After in seconds (%q)", r.method, r.path, rep.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(min(secs, 5)) * time.Second)
	}
}
