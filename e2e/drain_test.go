package e2e

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// freshConns is a driver for p that dials a new connection for every
// request, so each answer shows the listener still accepts.
func freshConns(t *testing.T, p *paydProc) *driver {
	return &driver{t: t, name: p.name + " (new connection)", base: p.base,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, catalogue: &sync.Map{}}
}

// listening reports whether a new connection to base is accepted.
func listening(base string) bool {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// chargeArrived waits until the provider has a charge request for the
// order (the attempt IDs are the keys it records).
func (p *procProvider) chargeArrived(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "the charge request did not reach the provider", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.calls) > 0
	})
}

// TestShutdownDelay: payd as an OS process with PAYD_SHUTDOWN_DELAY=3s and
// a pay in flight (the provider holds the charge 8s) gets SIGTERM. For
// the delay, /readyz answers 503 not_ready "shutting down" while /healthz
// answers 200 and the API serves new requests on new connections; then
// the listener closes, no sooner than the delay, while the pay is still in
// flight; the pay finishes (200 paid) and payd exits 0.
func TestShutdownDelay(t *testing.T) {
	const delay, hold = 3 * time.Second, 8 * time.Second
	eachDialect(t, func(t *testing.T, dialect string) {
		prov := startProcProvider(t, "")
		prov.holdCharges(hold)
		p := startPaydProc(t, "payd-drain", paydEnv(dbtest.NewURL(t, migrations.Dialect(dialect)), prov.url,
			env{"PAYD_SHUTDOWN_DELAY": delay.String()}))
		_, tok := p.register(newEmail())
		id := p.order(tok, "7.00")
		if r := freshConns(t, p).do(request{method: "GET", path: "/readyz"}); r.Status != http.StatusOK {
			t.Fatalf("GET /readyz before SIGTERM = %d %s, want 200", r.Status, r.Body)
		}

		type answer struct {
			r   reply
			err error
		}
		paid := make(chan answer, 1)
		go func() { r, err := p.tryPay(tok, id, uuid.NewString(), "pm_ok"); paid <- answer{r, err} }()
		prov.chargeArrived(t)

		sent := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		fresh := freshConns(t, p)
		eventually(t, delay, "/readyz did not turn 503 after SIGTERM", func() bool {
			return fresh.do(request{method: "GET", path: "/readyz"}).Status == http.StatusServiceUnavailable
		})
		r := fresh.do(request{method: "GET", path: "/readyz"})
		if r.code(t) != "not_ready" || r.json(t)["detail"] != "shutting down" {
			t.Errorf("GET /readyz while draining = %d %s, want 503 not_ready: shutting down", r.Status, r.Body)
		}
		if r := fresh.do(request{method: "GET", path: "/healthz"}); r.Status != http.StatusOK {
			t.Errorf("GET /healthz while draining = %d %s, want 200", r.Status, r.Body)
		}
		if r := fresh.do(request{method: "GET", path: "/v1/orders/" + id, token: tok}); r.Status != http.StatusOK {
			t.Errorf("GET /v1/orders/%s while draining = %d %s, want 200", id, r.Status, r.Body)
		}
		if other := fresh.order(tok, "1.00"); other == "" {
			t.Errorf("create order while draining: no id")
		}
		if r := fresh.do(request{method: "GET", path: "/v1/orders", token: tok}); r.Status != http.StatusOK || !strings.Contains(string(r.Body), id) {
			t.Errorf("GET /v1/orders while draining = %d %s, want 200 with %s", r.Status, r.Body, id)
		}
		if elapsed := time.Since(sent); elapsed >= delay {
			t.Fatalf("the checks above took %v, longer than the delay: they prove nothing", elapsed)
		}

		eventually(t, hold, "the listener did not close after the delay", func() bool { return !listening(p.base) })
		if closed := time.Since(sent); closed < delay {
			t.Errorf("the listener closed %v after SIGTERM, want no sooner than PAYD_SHUTDOWN_DELAY (%v)", closed, delay)
		}
		select {
		case a := <-paid:
			t.Fatalf("the pay was answered (%v %d %s) before the listener closed, want it still in flight", a.err, a.r.Status, a.r.Body)
		default:
		}

		a := <-paid
		if a.err != nil || a.r.Status != http.StatusOK || a.r.json(t)["status"] != "paid" {
			t.Errorf("the pay in flight at SIGTERM = %v %d %s, want 200 paid", a.err, a.r.Status, a.r.Body)
		}
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("payd did not exit within 30s of the pay's answer")
		}
		if !p.state.Success() {
			t.Errorf("payd exited with %v, want 0", p.state)
		}
		if logs := p.logs.String(); !strings.Contains(logs, `"msg":"draining","delay":"3s"`) {
			t.Errorf("payd's log has no draining line with the delay:\n%s", tail(logs, 20))
		}
	})
}

// TestShutdownDelaySecondSignal: a second SIGTERM during a long shutdown
// delay ends it at once: payd closes its listener and exits 0 long before
// the delay would have run out.
func TestShutdownDelaySecondSignal(t *testing.T) {
	const delay = 2 * time.Minute
	prov := startProcProvider(t, "")
	p := startPaydProc(t, "payd-drain", paydEnv(dbtest.NewURL(t, migrations.Dialect("sqlite")), prov.url,
		env{"PAYD_SHUTDOWN_DELAY": delay.String()}))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fresh := freshConns(t, p)
	eventually(t, 30*time.Second, "/readyz did not turn 503 after SIGTERM", func() bool {
		return fresh.do(request{method: "GET", path: "/readyz"}).Status == http.StatusServiceUnavailable
	})
	// payd logs the line before /readyz turns; the test reads its output
	// through a pipe, so the line may reach it a moment after the 503.
	eventually(t, 10*time.Second, "payd answers 503 but logged no draining line", func() bool {
		return strings.Contains(p.logs.String(), `"msg":"draining"`)
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(delay / 2):
		t.Fatalf("payd still runs %v after a second SIGTERM (delay %v)", delay/2, delay)
	}
	if !p.state.Success() {
		t.Errorf("payd exited with %v after two SIGTERMs, want 0", p.state)
	}
	if !strings.Contains(p.logs.String(), `"msg":"draining cut short","signal":"terminated"`) {
		t.Errorf("payd's log does not say the delay was cut short:\n%s", tail(p.logs.String(), 20))
	}
}
