package notify_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/notify"
	"github.com/payd/payd/repository"
)

// startEnvWorker is a replica starting with PAYD_NOTIFY_URL=url and
// PAYD_NOTIFY_SECRET=secret, logging to log, and its first pass.
func startEnvWorker(t *testing.T, db *repository.DB, clk *clock, url, secret string, log *bytes.Buffer) (*notify.Worker, *repository.EndpointStore) {
	t.Helper()
	w, es := newWorker(t, db, clk, nil)
	e := notify.EnvEndpoint(url, secret, clk.now())
	w.Env, w.Log = &e, slog.New(slog.NewJSONHandler(log, nil))
	if err := pass(w); err != nil {
		t.Fatal(err)
	}
	return w, es
}

// warnLines are the WARN lines of log that mention s.
func warnLines(log *bytes.Buffer, s string) []string {
	var out []string
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// TestEnvEndpointAtStart: the endpoint PAYD_NOTIFY_URL configures keeps,
// across restarts, what happened to it while payd ran. One its own 410
// disabled stays disabled at the next start (nothing is sent to it), and
// that start says so in one WARN line naming it and the command that
// enables it; so does one an operator disabled. Enabled again, a start
// with a changed secret and URL rotates the secret as rotate-secret does
// (the old one signs beside the new for the overlap) and sends to the
// new URL; a start with the same settings changes nothing.
func TestEnvEndpointAtStart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		clk := &clock{t: t0}
		gone, goneHits := receiver(t, secretA, http.StatusGone)
		var log bytes.Buffer
		startEnvWorker(t, db, clk, gone.URL, secretA, &log)
		paidOrder(t, db)
		w, es := newWorker(t, db, clk, nil)
		if err := pass(w); err != nil {
			t.Fatal(err)
		}
		ep, err := es.FindByID(t.Context(), notify.EnvEndpointID)
		if err != nil || ep.Status != domain.EndpointDisabled || len(goneHits()) != 1 {
			t.Fatalf("after a 410: endpoint %+v (%v), %d requests; want disabled after one", ep, err, len(goneHits()))
		}

		// A restart with the same environment: still disabled, told once.
		clk.add(time.Minute)
		log.Reset()
		w, _ = startEnvWorker(t, db, clk, gone.URL, secretA, &log)
		paidOrder(t, db)
		for range 2 {
			if err := pass(w); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Minute)
		}
		if ep, _ := es.FindByID(t.Context(), notify.EnvEndpointID); ep.Status != domain.EndpointDisabled {
			t.Errorf("after a restart the endpoint its 410 disabled is %s, want disabled", ep.Status)
		}
		if n := len(goneHits()); n != 1 {
			t.Errorf("the disabled endpoint got %d requests, want the one before its 410", n)
		}
		warns := warnLines(&log, notify.EnvEndpointID)
		if len(warns) != 1 || !strings.Contains(warns[0], "payd admin endpoints update "+notify.EnvEndpointID+" -enable") {
			t.Errorf("WARN lines naming the endpoint = %q, want one saying how to enable it", warns)
		}

		// Enabled by an operator, then disabled by one: a start keeps that too.
		ep, _ = es.FindByID(t.Context(), notify.EnvEndpointID)
		ep.Status, ep.DisabledReason = domain.EndpointDisabled, "disabled by an operator"
		if ok, err := es.Update(t.Context(), ep, clk.now()); err != nil || !ok {
			t.Fatalf("Update(disabled) = %v, %v", ok, err)
		}
		clk.add(time.Minute)
		log.Reset()
		startEnvWorker(t, db, clk, gone.URL, secretA, &log)
		if ep, _ := es.FindByID(t.Context(), notify.EnvEndpointID); ep.Status != domain.EndpointDisabled {
			t.Errorf("after a restart the endpoint an operator disabled is %s, want disabled", ep.Status)
		}
		if warns := warnLines(&log, notify.EnvEndpointID); len(warns) != 1 {
			t.Errorf("WARN lines naming the endpoint = %q, want one", warns)
		}

		// Enabled; the next start has a new URL and a new secret.
		ep, _ = es.FindByID(t.Context(), notify.EnvEndpointID)
		ep.Status, ep.DisabledReason = domain.EndpointEnabled, ""
		if ok, err := es.Update(t.Context(), ep, clk.now()); err != nil || !ok {
			t.Fatalf("Update(enabled) = %v, %v", ok, err)
		}
		clk.add(time.Minute)
		rotatedAt := clk.now()
		oldOnly, oldHits := receiver(t, secretA, 204) // a shop still verifying with the old secret
		log.Reset()
		startEnvWorker(t, db, clk, oldOnly.URL, secretB, &log)
		ep, _ = es.FindByID(t.Context(), notify.EnvEndpointID)
		if ep.URL != oldOnly.URL || ep.Secret != secretB || ep.PreviousSecret != secretA || ep.PreviousUntil == nil ||
			!ep.PreviousUntil.Equal(rotatedAt.Add(domain.SecretOverlap)) || ep.Status != domain.EndpointEnabled {
			t.Fatalf("after a start with a new URL and secret: %+v; want the new URL, secret B, secret A until %v, enabled", ep, rotatedAt.Add(domain.SecretOverlap))
		}
		if warns := warnLines(&log, notify.EnvEndpointID); len(warns) != 0 {
			t.Errorf("WARN lines for an enabled endpoint = %q, want none", warns)
		}
		paidOrder(t, db)
		w, _ = newWorker(t, db, clk, nil)
		if err := pass(w); err != nil {
			t.Fatal(err)
		}
		if hits := oldHits(); len(hits) != 1 || hits[0].err != nil {
			t.Errorf("requests to the new URL = %+v, want one, verified with the old secret during the overlap", hits)
		}

		// Another start (another replica) with the same settings: the
		// rotation is not done again over the new secret.
		clk.add(time.Hour)
		startEnvWorker(t, db, clk, oldOnly.URL, secretB, &log)
		again, _ := es.FindByID(t.Context(), notify.EnvEndpointID)
		if again.Secret != secretB || again.PreviousSecret != secretA || !again.PreviousUntil.Equal(*ep.PreviousUntil) || !again.UpdatedAt.Equal(ep.UpdatedAt) {
			t.Errorf("after a start with unchanged settings: %+v, want it as it was (%+v)", again, ep)
		}
	})
}
