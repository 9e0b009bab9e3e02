package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

// The Galera harness: three payd replicas through run, each on its own
// node of the cluster of scripts/galera.sh, one sandbox they all charge,
// whose webhooks a round-robin front hands to any replica. The same three
// replicas run on one database too (startTrio onNodes of one URL thrice), so
// that a storm proven on the cluster is proven on one MariaDB and SQLite.

// galeraSet is the three replicas, the cluster (nil on one database) and
// the shared sandbox.
type galeraSet struct {
	t       *testing.T
	cluster *galeratest.Cluster
	urls    [galeratest.Nodes]string
	reps    [galeratest.Nodes]*inproc
	db      *repository.DB // node 1, for the test's own reads
	sandbox *sandbox.Server
	hooks   [galeratest.Nodes]atomic.Int64 // webhooks the front handed to each replica
	hold    atomic.Bool                    // the front refuses webhooks (503): the sandbox retries them later
	payLat  latencies                      // how long createAndPay's pay requests took
}

// startGalera boots the sandbox and three replicas on a fresh database of
// the cluster (startTrio onNodes of it), each with withEnv's settings on
// top. The first replica migrates the database; the others start on the
// migrated schema.
func startGalera(t *testing.T, opts ...option) *galeraSet {
	t.Helper()
	c := galeratest.Require(t)
	g := startTrio(t, append(opts, onNodes(c.NewDatabase(t)))...)
	g.cluster = c
	return g
}

// startTrio boots the sandbox and three replicas, each started by start,
// replica i on the i-th URL of onNodes: three nodes of a cluster, or one
// database named three times. withEnv's settings go on top of each
// replica's own.
func startTrio(t *testing.T, opts ...option) *galeraSet {
	t.Helper()
	o := options(opts)
	if o.stackOnly() || o.dialect != "" || o.premigrated || o.nodes == nil {
		t.Fatalf("startTrio takes onNodes (required) and withEnv (given: %+v)", o)
	}
	urls, extra := *o.nodes, o.env
	g := &galeraSet{t: t, urls: urls}
	sbL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := g.startFront()
	providerURL := "http://" + sbL.Addr().String()
	// One after the other: run sets the MySQL driver's process-wide logger.
	for i := range g.reps {
		g.reps[i] = start(t, asConfigured(paydEnv(g.urls[i], providerURL, extra))).inproc
	}
	for i, r := range g.reps {
		r.name = "payd-node" + strconv.Itoa(i+1)
	}
	t.Cleanup(g.logErrors)
	sb, err := sandbox.New(sandbox.Config{
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sandbox.db"), WebhookURL: front + "/v1/webhooks/provider",
		WebhookSecret: testWebhookSecret, AsyncDelay: 100 * time.Millisecond, RetryBase: 50 * time.Millisecond,
		RetryMax: time.Second, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	g.sandbox = sb
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sb.Serve(ctx, sbL) }()
	t.Cleanup(func() { cancel(); <-done; sb.Close() })
	g.db = openDB(t, g.urls[0])
	return g
}

// logErrors shows, when the test failed, the errors each replica logged,
// counted by message with IDs blanked.
func (g *galeraSet) logErrors() {
	if !g.t.Failed() {
		return
	}
	ids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}|evt_[0-9a-zA-Z_-]+`)
	for _, r := range g.reps {
		counts := map[string]int{}
		for line := range strings.SplitSeq(r.logs.String(), "\n") {
			var l struct{ Level, Msg, Err string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Level == "ERROR" {
				counts[ids.ReplaceAllString(l.Msg+": "+l.Err, "ID")]++
			}
		}
		for msg, n := range counts {
			g.t.Logf("%s logged %d× %s", r.name, n, msg)
		}
	}
}

// startFront serves the sandbox's webhooks, handing each to the next
// replica in turn, and returns its base URL.
func (g *galeraSet) startFront() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := int(next.Add(1)-1) % len(g.reps)
		g.hooks[i].Add(1)
		u, _ := url.Parse(g.reps[i].base)
		r.SetURL(u)
	}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.hold.Load() {
			http.Error(w, "held", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	g.t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// at is the replica serving the i-th request, round robin.
func (g *galeraSet) at(i int) *inproc { return g.reps[i%len(g.reps)] }

// count runs SELECT COUNT(*) FROM query on node 1.
func (g *galeraSet) count(query string, args ...any) int64 {
	g.t.Helper()
	return countRows(g.t, g.db, query, args...)
}

// succeededCharges counts the sandbox's successful charges of an order.
func (g *galeraSet) succeededCharges(orderID string) int {
	g.t.Helper()
	return len(chargesAt(g.t, g.sandbox, orderID, "succeeded"))
}

// orderStatus is the order's status as replica r reads it over the API.
func (g *galeraSet) orderStatus(r *inproc, token, id string) (int, string) {
	g.t.Helper()
	rep, err := r.send(request{method: http.MethodGet, path: "/v1/orders/" + id, token: token})
	if err != nil {
		g.t.Fatalf("GET /v1/orders/%s on %s: %v", id, r.name, err)
	}
	if rep.Status != http.StatusOK {
		return rep.Status, string(rep.Body)
	}
	s, _ := rep.json(g.t)["status"].(string)
	return rep.Status, s
}

// jobRows sums what the named job reported handling over every replica's log.
func (g *galeraSet) jobRows(job string) int64 {
	var n int64
	for _, r := range g.reps {
		n += logJobRows(r.logs.String(), job)
	}
	return n
}

// logJobRows sums the rows of a job's "background job done" lines in a JSON log.
func logJobRows(logs, job string) int64 {
	var n int64
	for line := range strings.SplitSeq(logs, "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Job  string `json:"job"`
			Rows int64  `json:"rows"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "background job done" && l.Job == job {
			n += l.Rows
		}
	}
	return n
}

// retries sums payd_db_retries_total over the replicas' /metrics; ok is
// false when payd does not expose it.
func (g *galeraSet) retries() (n float64, ok bool) {
	for _, r := range g.reps {
		v, found := scrapeSum(g.t, r.base+"/metrics", "payd_db_retries_total")
		n += v
		ok = ok || found
	}
	return n, ok
}

// scrapeSum adds up every sample of a metric in a Prometheus text page.
func scrapeSum(t *testing.T, url, metric string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if name != metric {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// latencies collects request durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantile is the q-quantile (0..1) of what was added.
func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
