package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// testNotifyOutage: the database restarts under payd's notify worker
// (ADR 0053) with two events committed. The first event's delivery is on
// the wire when the server goes down (a gate in front of the receiver
// holds its request until the server has stopped), so payd cannot record
// the receiver's answer; the second was committed just before and is not
// yet fanned out. While the server is down the worker's passes fail and
// are logged as WARN, and the process keeps running. Once the server is
// back, with payd untouched, both events reach the receiver and are
// recorded there once each; each order has one event, each delivery ends
// delivered. The first may arrive twice (its answer was lost): at least
// once, never more than the receiver can dedupe.
func testNotifyOutage(t *testing.T, m *mariaDB) {
	rcv := startReceiver(t, notifySecret, 0)
	gate := startHoldGate(t, rcv.url)
	prov := startProcProvider(t, "")
	dbURL := dbtest.NewURL(t, migrations.MySQL)
	// The request timeout outlasts the server's shutdown, so the held
	// request is answered after it (and its answer lost); the lease
	// (2×timeout + 5s) then runs out within the test's waits.
	p := startPaydProc(t, "payd", paydEnv(dbURL, prov.url, env{"PAYD_NOTIFY_URL": gate.url, "PAYD_NOTIFY_SECRET": notifySecret,
		"PAYD_NOTIFY_TIMEOUT": "15s"}))
	_, token := p.register(newEmail())
	first := p.paidOrder(token, "4.10")
	select {
	case <-gate.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first order's delivery did not reach the gate within 30s")
	}
	second := p.paidOrder(token, "4.20") // committed while the worker waits on the first delivery

	m.restoreOnCleanup(t)
	m.mustStop(t)
	gate.release() // the receiver answers now; payd cannot write that down
	// The worker's next passes meet the server down.
	eventually(t, 30*time.Second, "the notify job logged no WARN while the database was down", func() bool {
		return notifyJobWarns(p) > 0
	})
	select {
	case <-p.exited:
		t.Fatalf("payd exited (%v) while its database was down", p.state)
	default:
	}

	m.mustStart(t)
	eventually(t, 30*time.Second, "GET /readyz is not 200 after the restart", func() bool { return readyStatus(p) == http.StatusOK })
	db := openDB(t, dbURL)
	for _, order := range []string{first, second} {
		var ev []eventRow
		eventually(t, 90*time.Second, "order "+order+"'s order.paid did not reach the receiver after the restart", func() bool {
			ev = eventsOf(t, db, order)
			return len(ev) == 1 && rcv.events()[ev[0].ID].Type == "order.paid"
		})
		// The delivery whose answer was lost stays pending under its lease
		// (35s from its claim) and is sent again once the lease has run out.
		eventually(t, 2*time.Minute, "the delivery of "+ev[0].ID+" is not recorded delivered", func() bool {
			return deliveryOf(t, db, ev[0].ID).Status == "delivered"
		})
		if ev[0].Type != "order.paid" {
			t.Errorf("events of order %s = %+v, want order.paid alone", order, ev)
		}
		if n := rcv.printed(ev[0].ID); n != 1 {
			t.Errorf("the receiver printed event %s %d times, want once", ev[0].ID, n)
		}
		got := arrivalsOf(rcv.arrivals(), ev[0].ID)
		if len(got) == 0 || len(got) > 2 {
			t.Errorf("arrivals of %s = %+v, want one (two for the delivery whose answer was lost)", ev[0].ID, got)
		}
		for _, a := range got {
			if !a.Verified {
				t.Errorf("arrival %d of %s not verified", a.N, ev[0].ID)
			}
		}
	}
	select {
	case <-p.exited:
		t.Fatalf("payd exited (%v) after the restart", p.state)
	default:
	}
}

// notifyJobWarns counts the WARN lines of the notify job's failed passes
// in p's log.
func notifyJobWarns(p *paydProc) int {
	n := 0
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var l struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Job   string `json:"job"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "WARN" && l.Msg == "background job failed" && l.Job == "notify" {
			n++
		}
	}
	return n
}

// holdGate is a proxy in front of the receiver that holds the first
// request until released; later requests pass at once.
type holdGate struct {
	url     string // the receiver's path on the gate
	held    chan struct{}
	release func()
}

func startHoldGate(t *testing.T, target string) *holdGate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	g := &holdGate{held: make(chan struct{})}
	released := make(chan struct{})
	var once, heldOnce sync.Once
	g.release = func() { once.Do(func() { close(released) }) }
	var mu sync.Mutex
	firstSeen := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hold := !firstSeen
		firstSeen = true
		mu.Unlock()
		if hold {
			heldOnce.Do(func() { close(g.held) })
			<-released
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.release(); srv.Close() })
	g.url = srv.URL + u.Path
	return g
}
