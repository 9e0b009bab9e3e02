package e2e

import (
	"bytes"
	"fmt"
	"github.com/payd/payd/client"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReconciliation stages every discrepancy type (docs/guarantees.md#reconciliation-and-books; see stage),
// then reconciles the window against the provider's charge list and, on a
// second stack, against the uploaded settlement CSV: a dry run records
// nothing; the run finds exactly the staged disagreements; each is resolved
// with the action that fits it, idempotently and on the audit trail; and a
// second run over the same window finds nothing new.
func TestReconciliation(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		for _, source := range []string{"provider", "csv"} {
			t.Run(source, func(t *testing.T) { reconcileScenario(t, dialect, source) })
		}
	})
}

func reconcileScenario(t *testing.T, dialect, source string) {
	s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
	from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	_, tok := s.register("ops@example.com")
	st := s.stage(tok)
	to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
	reconcile := func(key string, dry bool) reply {
		if source == "csv" {
			return s.uploadSettlement(key, from, to, dry, s.settlementCSV())
		}
		body := map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)}
		if dry {
			body["dry_run"] = true
		}
		return s.admin("POST", "/v1/admin/reconciliations", key, body)
	}

	dryKey := uuid.NewString()
	r := reconcile(dryKey, true)
	dry := decode[client.Run](t, r)
	if r.Status != http.StatusOK || !dry.DryRun || string(dry.Source) != source || dry.Found != len(st.want) || dry.New != 0 || dry.Matched != st.matched {
		t.Errorf("dry run = %d %s, want 200 from %s finding %d, 0 new, %d matched", r.Status, r.Body, source, len(st.want), st.matched)
	}
	s.checkFound(dry.Discrepancies, st.want)
	if n := s.count("discrepancies") + s.count("reconciliation_runs") + s.count("reconciliation_findings"); n != 0 {
		t.Errorf("a dry run recorded %d rows, want 0", n)
	}
	if n := s.auditRows("reconcile", dryKey, http.StatusOK); n != 1 {
		t.Errorf("audit rows for the dry run = %d, want 1", n)
	}

	key := uuid.NewString()
	r = reconcile(key, false)
	run := decode[client.Run](t, r)
	if r.Status != http.StatusCreated || run.DryRun || string(run.Source) != source || run.Found != len(st.want) || run.New != len(st.want) || run.Matched != st.matched {
		t.Fatalf("run = %d %s, want 201 from %s finding %d, all new, %d matched", r.Status, r.Body, source, len(st.want), st.matched)
	}
	found := s.checkFound(run.Discrepancies, st.want)
	s.loggedFindings(run)
	for _, d := range run.Discrepancies {
		if d.Status != "open" || d.RunId == nil || *d.RunId != run.Id {
			t.Errorf("discrepancy %+v, want open, found by run %s", d, run.Id)
		}
		if d.Type == "amount_mismatch" && (d.ProviderAmount == nil || *d.ProviderAmount != "12.00" || d.LocalAmount == nil || *d.LocalAmount != "10.00") {
			t.Errorf("amount mismatch %+v, want provider 12.00, local 10.00", d)
		}
	}
	if again := reconcile(key, false); again.Status != r.Status || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("run replay = %d %s (replayed %q), want the first answer replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
	}
	if n := s.count("reconciliation_runs"); n != 1 {
		t.Errorf("runs after the replay = %d, want 1", n)
	}
	got := s.admin("GET", "/v1/admin/reconciliations/"+run.Id, "", nil)
	if stored := decode[client.Run](t, got); got.Status != http.StatusOK || stored.Id != run.Id || stored.Found != run.Found || stored.New != run.New || stored.Matched != run.Matched {
		t.Errorf("GET run = %d %s, want the run's counts", got.Status, got.Body)
	} else {
		s.checkFound(stored.Discrepancies, st.want)
	}
	if n := s.count("audit_log WHERE action = 'reconcile' AND request_id = ? AND result = 201 AND target = ?", key, run.Id); n != 1 {
		t.Errorf("audit rows for run %s = %d, want 1", run.Id, n)
	}

	s.refuseMisfits(run, found, st)
	s.resolveAll(run, found, st.want)
	s.checkResolved(st)

	// Nothing new when the window is reconciled again.
	key = uuid.NewString()
	r = reconcile(key, false)
	rerun := decode[client.Run](t, r)
	if r.Status != http.StatusCreated || rerun.New != 0 || rerun.Found != 1 || rerun.Matched != st.matched+6 {
		t.Errorf("second run = %d %s, want 201 with 0 new, 1 found again, %d matched", r.Status, r.Body, st.matched+6)
	}
	if len(rerun.Discrepancies) != 1 || rerun.Discrepancies[0].Type != "missing_provider_charge" ||
		rerun.Discrepancies[0].Status != "resolved" || rerun.Discrepancies[0].Resolution == nil || *rerun.Discrepancies[0].Resolution != "ignore" {
		t.Errorf("second run found %+v, want only the ignored missing_provider_charge", rerun.Discrepancies)
	}
	if n := s.count("discrepancies"); n != int64(len(st.want)) {
		t.Errorf("discrepancies after the second run = %d, want %d", n, len(st.want))
	}

	// The mismatched charge went back in full, through the order: an
	// admin refund now finds nothing left to refund.
	r = s.refund(st.mismatch, uuid.NewString(), "1.00")
	if r.Status != http.StatusConflict || r.code(t) != "order_not_refundable" {
		t.Errorf("refund of an order whose charge is refunded = %d %s, want 409 order_not_refundable", r.Status, r.Body)
	}
	if o := s.timeline(st.mismatch).Order; o.Status != "refunded" || o.RefundedAmount != "10.00" {
		t.Errorf("order after the refused refund = %s with %s refunded, want refunded with 10.00", o.Status, o.RefundedAmount)
	}
}

// checkFound fails unless ds are exactly the wanted (type, reference)
// pairs, and returns them by pair.
func (s *stack) checkFound(ds []client.Discrepancy, want map[string]string) map[string]client.Discrepancy {
	s.t.Helper()
	found := map[string]client.Discrepancy{}
	for _, d := range ds {
		k := string(d.Type) + string(" ") + d.Reference
		if _, dup := found[k]; dup {
			s.t.Errorf("discrepancy %s listed twice", k)
		}
		found[k] = d
		if _, ok := want[k]; !ok {
			s.t.Errorf("unexpected discrepancy %s: %+v", k, d)
		}
	}
	for k := range want {
		if _, ok := found[k]; !ok {
			s.t.Errorf("discrepancy %s not found", k)
		}
	}
	return found
}

// uploadSettlement posts a settlement CSV as the multipart form of
// POST /v1/admin/reconciliations (a fresh boundary every time).
func (s *stack) uploadSettlement(key string, from, to time.Time, dry bool, csv string) reply {
	s.t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("from", from.Format(time.RFC3339))
	_ = w.WriteField("to", to.Format(time.RFC3339))
	if dry {
		_ = w.WriteField("dry_run", "true")
	}
	f, err := w.CreateFormFile("file", "settlement.csv")
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = f.Write([]byte(csv))
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	return s.do(request{method: "POST", path: "/v1/admin/reconciliations", token: testAdminToken, key: key,
		contentType: w.FormDataContentType(), body: buf.Bytes()})
}

// resolvePath is the resolve route of discrepancy did of run runID.
func resolvePath(runID, did string) string {
	return fmt.Sprintf("/v1/admin/reconciliations/%s/discrepancies/%s/resolve", runID, did)
}
