package e2e

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReconcileProviderNeverAnswers: a run against a provider whose list
// never answers gives up at the provider timeout and answers 503 with
// Retry-After, as a webhook or a refund does, not a 500: nothing is wrong
// in payd, and the same run may be asked for again. It records no run.
func TestReconcileProviderNeverAnswers(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		stop := make(chan struct{})
		mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // never answers: only the caller giving up or the test ending frees it
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		t.Cleanup(mute.Close)
		t.Cleanup(func() { close(stop) })
		s := start(t, on(dialect), withEnv(env{"PAYD_PROVIDER_URL": mute.URL, "PAYD_PROVIDER_TIMEOUT": "300ms", "PAYD_LEASE": "1s"}))

		to := now()
		body := map[string]any{"from": to.Add(-time.Hour).Format(time.RFC3339), "to": to.Format(time.RFC3339)}
		key := uuid.NewString()
		r := s.admin("POST", "/v1/admin/reconciliations", key, body)
		if r.Status != http.StatusServiceUnavailable || r.problemCode() != "service_unavailable" {
			t.Fatalf("reconcile against a mute provider = %d %s, want 503 service_unavailable", r.Status, r.Body)
		}
		if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n <= 0 {
			t.Errorf("Retry-After = %q, want a positive number of seconds", r.Header.Get("Retry-After"))
		}
		if n := s.count("reconciliation_runs"); n != 0 {
			t.Errorf("runs recorded = %d, want 0", n)
		}
	})
}
