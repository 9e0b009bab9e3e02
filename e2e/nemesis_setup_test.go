package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/internal/nemesis"
	"github.com/payd/payd/internal/redistest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

// The nemesis's setups (nemesis_test.go runs the schedule on them): payd
// as OS processes, so a replica can be killed with SIGKILL and restarted
// on the same database and address, with every wire between processes
// passing a link of the nemesis's network, where the schedule's faults go:
//
//   - payd-i → its database node ("db-i"; none on SQLite);
//   - payd-i → the provider ("provider-i"): the sandbox, run in the test
//     process so it outlives every payd the schedule kills, or in Stripe
//     mode the fake Stripe (nemesis_stripe_test.go);
//   - the provider → payd-i ("webhook-i"): the sandbox's webhooks go to a
//     front that hands each to a replica through that replica's link;
//   - payd → each Redis Cluster node ("redis-n"): the nodes announce their
//     link's port, so the cluster's own redirections (MOVED, CLUSTER
//     SLOTS) lead through the links too;
//   - payd-i → the merchant ("merchant-i"): the shop's receiver, told of
//     every order event (nemesis_merchant_test.go).
//
// The process faults each setup can take are kill_replica (all), and
// redis_failover, db_restart (the system MariaDB) or kill_galera_node.

// nemLease and nemProviderTimeout are short, as in the property test, so
// that the recoverer settles what the faults left in flight quickly.
const (
	nemLease           = 4 * time.Second
	nemProviderTimeout = 2 * time.Second
)

// nemSetup is one setup, running.
type nemSetup struct {
	t    *testing.T
	name string
	net  *nemesis.Net
	prov *procProvider // the sandbox; nil in Stripe mode
	// stripe is the fake Stripe in Stripe mode, nil on the sandbox.
	stripe *nemStripe
	// merchant is the shop payd tells of order events
	// (nemesis_merchant_test.go).
	merchant *nemMerchant
	reps     []*nemReplica
	// db is the test's own handle on payd's database, past the links: the
	// settling checks read it.
	db      *repository.DB
	process map[nemesis.Kind]nemesis.ProcessFault
	targets map[nemesis.Kind][]string
}

// nemReplica is one payd process, restarted on the same settings (and so
// the same address) after each kill.
type nemReplica struct {
	name string
	base string // http://127.0.0.1:port, the same across restarts
	env  env

	mu    sync.Mutex
	proc  *paydProc
	procs []*paydProc // every process it ran, the current one last: their logs
}

// current is the replica's process of the moment.
func (r *nemReplica) current() *paydProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// nemOpts are what a setup is made of.
type nemOpts struct {
	name     string
	replicas int
	dialect  string // "sqlite" or "mysql"
	galera   bool   // the replicas' databases are the cluster's nodes
	redis    bool   // a Redis Cluster with replicas, behind links
	restart  bool   // db_restart: the system MariaDB may be restarted
	stripe   bool   // payd charges through its Stripe adapter, against internal/stripefake
	seed     int64  // Stripe mode: the seed of the bank's decisions
	extra    env    // on top of every replica's settings
}

// startNemSetup builds and starts a setup: links, provider, front,
// databases, Redis, replicas; and the process faults it can take.
func startNemSetup(t *testing.T, o nemOpts) *nemSetup {
	t.Helper()
	s := &nemSetup{t: t, name: o.name, net: nemesis.NewNet(), process: map[nemesis.Kind]nemesis.ProcessFault{}, targets: map[nemesis.Kind][]string{}}
	t.Cleanup(s.net.Close)
	exe := paydExecutable(t)

	// The databases: one per replica, and the test's own (direct) URL.
	var direct string
	dbUp := make([]string, o.replicas) // each replica's database, upstream of its link
	var cluster *galeratest.Cluster
	switch {
	case o.galera:
		cluster = galeratest.Require(t)
		urls := cluster.NewDatabase(t)
		direct = urls[0]
		for i := range dbUp {
			dbUp[i] = urls[i%len(urls)]
		}
	default:
		direct = dbtest.NewURL(t, migrations.Dialect(o.dialect))
		for i := range dbUp {
			dbUp[i] = direct
		}
	}
	var maria *mariaDB
	if o.restart {
		maria = localMariaDB(t) // after the database: its cleanup restores the server before the drop
	}
	if o.dialect == "mysql" {
		cmd := exec.Command(exe, "migrate", "up")
		cmd.Dir, cmd.Env = t.TempDir(), childEnv(env{"PAYD_DATABASE_URL": direct})
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("migrations applied")) {
			t.Fatalf("payd migrate up: %v\n%s", err, out)
		}
	}

	// Each replica's address is fixed, so that a restarted replica is
	// where its webhook link and the clients expect it.
	s.reps = make([]*nemReplica, o.replicas)
	hooks := make([]*nemesis.Link, o.replicas)
	for i := range s.reps {
		addr := freeAddr(t)
		s.reps[i] = &nemReplica{name: fmt.Sprintf("payd-%d", i+1), base: "http://" + addr}
		hooks[i] = s.link(fmt.Sprintf("webhook-%d", i+1), "webhook", addr)
	}
	// A provider that delivers its webhooks as real ones arrive: many at
	// once, in any order, each given up on after a second (a black-holed
	// link would otherwise hold the queue five seconds a try).
	front := startNemFront(t, hooks)
	// The shop, reached from each replica through its own link.
	names := make([]string, len(s.reps))
	for i, r := range s.reps {
		names[i] = r.name
	}
	var shop []string
	s.merchant, shop = startNemMerchant(t, names)
	for i := range shop {
		shop[i] = s.link(fmt.Sprintf("merchant-%d", i+1), nemesis.MerchantLink, shop[i]).Addr()
	}
	var provAddr string
	if o.stripe {
		s.stripe = startNemStripe(t, front, o.seed)
		provAddr = strings.TrimPrefix(s.stripe.fake.URL(), "http://")
	} else {
		s.prov = startProcProvider(t, front+"/v1/webhooks/provider", func(c *sandbox.Config) {
			c.Reorder, c.ReorderWindow, c.DeliveryTimeout, c.BatchSize = true, 200*time.Millisecond, time.Second, 64
			c.AsyncDelay = 500 * time.Millisecond
		})
		provAddr = strings.TrimPrefix(s.prov.url, "http://")
	}

	var rc *redistest.ReplicatedCluster
	if o.redis {
		n := 0
		rc = redistest.StartReplicatedCluster(t, redistest.AnnounceThrough(func(port int) (int, error) {
			n++
			l, err := s.net.Link(fmt.Sprintf("redis-%d", n), "redis", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return 0, err
			}
			_, p, _ := net.SplitHostPort(l.Addr())
			return strconv.Atoi(p)
		}))
	}

	for i, r := range s.reps {
		dbURL := dbUp[i]
		if o.dialect == "mysql" {
			u, err := url.Parse(dbUp[i])
			if err != nil {
				t.Fatal(err)
			}
			u.Host = s.link(fmt.Sprintf("db-%d", i+1), "db", u.Host).Addr()
			dbURL = u.String()
		}
		e := env{
			"PAYD_ADDR": strings.TrimPrefix(r.base, "http://"), "PAYD_LEASE": nemLease.String(),
			"PAYD_PROVIDER_TIMEOUT": nemProviderTimeout.String(), "PAYD_INFLIGHT_WAIT": "500ms",
		}
		if rc != nil {
			e["PAYD_REDIS_URL"] = rc.URL()
		}
		for k, v := range nemNotifyEnv(shop[i]) {
			e[k] = v
		}
		for k, v := range o.extra {
			e[k] = v
		}
		provURL := "http://" + s.link(fmt.Sprintf("provider-%d", i+1), "provider", provAddr).Addr()
		if s.stripe != nil {
			e["PAYD_PROVIDER"], e["STRIPE_SECRET_KEY"], e["STRIPE_API_BASE"] = "stripe", "sk_test_fake", provURL
			e["STRIPE_WEBHOOK_SECRET"] = s.stripe.fake.Secret
			provURL = ""
		}
		r.env = paydEnv(dbURL, provURL, e)
	}
	errs := make([]error, len(s.reps))
	var wg sync.WaitGroup
	for i, r := range s.reps {
		wg.Go(func() { r.proc, errs[i] = launchPaydProc(t, exe, r.name, r.env) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.reps {
		r.procs = []*paydProc{r.proc}
	}
	s.db = openDB(t, direct)

	s.processFaults(exe, cluster, rc, maria)
	return s
}

// link makes a link of the setup's network or fails the test.
func (s *nemSetup) link(name string, kind nemesis.LinkKind, upstream string) *nemesis.Link {
	s.t.Helper()
	l, err := s.net.Link(name, kind, upstream)
	if err != nil {
		s.t.Fatalf("link %s → %s: %v", name, upstream, err)
	}
	return l
}

// replica is the replica named name, nil if none is.
func (s *nemSetup) replica(name string) *nemReplica {
	for _, r := range s.reps {
		if r.name == name {
			return r
		}
	}
	return nil
}

// planTargets is what the schedule may hit on this setup.
func (s *nemSetup) planTargets() nemesis.Targets {
	return nemesis.Targets{Links: s.net.Links(), Process: s.targets}
}

// metrics is each replica's /metrics, for the sampler.
func (s *nemSetup) metrics() map[string]string {
	m := map[string]string{}
	for _, r := range s.reps {
		m[r.name] = r.base + "/metrics"
	}
	return m
}

// ready reports whether every replica answers /readyz with 200.
func (s *nemSetup) ready() bool {
	c := &http.Client{Timeout: 2 * time.Second}
	for _, r := range s.reps {
		resp, err := c.Get(r.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// startNemFront serves the sandbox's webhooks, handing each to a replica
// in turn through that replica's webhook link, and returns its base URL.
// A link that fails, or a replica that is down, is a 502: the sandbox
// delivers the webhook again later.
func startNemFront(t *testing.T, links []*nemesis.Link) string {
	t.Helper()
	var next atomic.Int64
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			l := links[int(next.Add(1)-1)%len(links)]
			r.SetURL(&url.URL{Scheme: "http", Host: l.Addr()})
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-served })
	return "http://" + ln.Addr().String()
}

// nemRand is a client's random source: from the seed and the client.
func nemRand(seed int64, client int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(client)+0x6e656d))
}

// errorLines are the ERROR lines every process of every replica logged,
// at most n.
func (s *nemSetup) errorLines(n int) []string {
	var out []string
	for _, r := range s.reps {
		r.mu.Lock()
		procs := append([]*paydProc(nil), r.procs...)
		r.mu.Unlock()
		for _, p := range procs {
			for line := range strings.SplitSeq(p.logs.String(), "\n") {
				if strings.Contains(line, `"level":"ERROR"`) && len(out) < n {
					out = append(out, r.name+": "+line)
				}
			}
		}
	}
	return out
}
