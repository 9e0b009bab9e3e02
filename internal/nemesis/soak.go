package nemesis

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/payd/payd/internal/metricsread"
)

// Minute is one sample of a soak: what the clients did during the
// interval that ends at At, and what each replica's /metrics said at its
// end. A replica that could not be read (killed, restarting) is in Unread
// and in none of the maps.
type Minute struct {
	Minute     int                       // 1 for the first interval
	At         time.Duration             // the interval's end, from the start of Run
	Ops        int                       // client operations that ended in the interval
	P99        time.Duration             // their 99th percentile latency; 0 when none
	RSS        map[string]int64          // per replica: process_resident_memory_bytes
	Goroutines map[string]int            // go_goroutines
	OpenFiles  map[string]int            // process_open_fds
	Pools      map[string]map[string]int // replica -> db_name -> open connections (go_sql_open_connections)
	InUse      map[string]map[string]int // replica -> db_name -> connections in use (go_sql_in_use_connections)
	Unread     []string                  // replicas whose metrics could not be read, sorted
}

// Sampler takes a Minute every interval from the clients' latencies and
// each replica's /metrics.
type Sampler struct {
	metrics map[string]string
	every   time.Duration
	hc      *http.Client

	mu      sync.Mutex
	start   time.Time
	lat     []time.Duration // this interval's
	minutes []Minute
}

// NewSampler samples the replicas' metrics (replica name → its /metrics
// URL) every interval; every ≤ 0 means a minute. Each read is made on a
// connection of its own, closed after it, so the sampler holds no
// goroutine or file of payd's between reads.
func NewSampler(metrics map[string]string, every time.Duration) *Sampler {
	if every <= 0 {
		every = time.Minute
	}
	return &Sampler{
		metrics: maps.Clone(metrics), every: every, start: time.Now(),
		hc: &http.Client{Timeout: min(every, 10*time.Second), Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// Observe records one client operation's latency (safe for concurrent use).
func (s *Sampler) Observe(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat = append(s.lat, d)
}

// Run samples every interval until ctx ends. The intervals count from
// the call.
func (s *Sampler) Run(ctx context.Context) {
	s.mu.Lock()
	s.start = time.Now()
	s.lat = nil
	s.mu.Unlock()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sample(ctx)
		}
	}
}

// Sample ends the current interval now, reads every replica and records
// the Minute; Run calls it every interval, and a soak calls it once more
// after the load stopped and drained, for Growth.
func (s *Sampler) Sample(ctx context.Context) Minute {
	s.mu.Lock()
	lat := s.lat
	s.lat = nil
	m := Minute{Minute: len(s.minutes) + 1, At: time.Since(s.start), Ops: len(lat), P99: p99(lat)}
	s.mu.Unlock()

	m.RSS, m.Goroutines, m.OpenFiles = map[string]int64{}, map[string]int{}, map[string]int{}
	m.Pools, m.InUse = map[string]map[string]int{}, map[string]map[string]int{}
	for _, replica := range slices.Sorted(maps.Keys(s.metrics)) {
		r, err := s.read(ctx, s.metrics[replica])
		if err != nil {
			m.Unread = append(m.Unread, replica)
			continue
		}
		m.RSS[replica], m.Goroutines[replica], m.OpenFiles[replica] = r.rss, r.goroutines, r.openFiles
		m.Pools[replica], m.InUse[replica] = r.open, r.inUse
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.minutes = append(s.minutes, m)
	return m
}

// Minutes returns the samples taken so far.
func (s *Sampler) Minutes() []Minute {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.minutes)
}

func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	lat = slices.Clone(lat)
	slices.Sort(lat)
	i := (len(lat)*99+99)/100 - 1 // the ceiling of 0.99·n, from 1
	return lat[i]
}

// reading is what one replica's /metrics says.
type reading struct {
	rss               int64
	goroutines        int
	openFiles         int
	open, inUse       map[string]int // by db_name
	hasGo, hasProcess bool
}

func (s *Sampler) read(ctx context.Context, url string) (reading, error) {
	fams, err := metricsread.Fetch(ctx, s.hc, url)
	if err != nil {
		return reading{}, err
	}
	return readingOf(fams)
}

// readingOf takes the series a soak follows from one reading of
// /metrics: the Go and process collectors' and database/sql's pool
// statistics (one db_name per pool).
func readingOf(fams metricsread.Families) (reading, error) {
	out := reading{open: map[string]int{}, inUse: map[string]int{}}
	g, hasGo := fams.Value("go_goroutines")
	rss, hasProcess := fams.Value("process_resident_memory_bytes")
	if !hasGo || !hasProcess {
		return out, fmt.Errorf("metrics without go_goroutines or process_resident_memory_bytes")
	}
	out.goroutines, out.rss, out.hasGo, out.hasProcess = int(g), int64(rss), true, true
	if fds, ok := fams.Value("process_open_fds"); ok {
		out.openFiles = int(fds)
	}
	for db, v := range fams.ByLabel("go_sql_open_connections", "db_name") {
		out.open[db] = int(v)
	}
	for db, v := range fams.ByLabel("go_sql_in_use_connections", "db_name") {
		out.inUse[db] = int(v)
	}
	return out, nil
}

// What Growth lets pass (see Growth).
const (
	goroutinesPerConn = 2    // the driver's and database/sql's for one more open connection
	goroutineSlack    = 10   // timers, a GC worker, a scrape being served
	fileSlack         = 5    // a log being rotated, a scrape's socket
	rssGrowth         = 0.50 // half again the baseline's resident memory
)

// Growth compares a reading taken after the load stopped and drained with
// the baseline (the first minute after warm-up) and says, per replica,
// what grew and did not come back. Empty means no growth. The rule:
//
//   - a pool with more connections in use than at the baseline: with no
//     load, a connection in use is a connection leaked;
//   - goroutines beyond the baseline's + 2 per extra open pool connection
//     (a pool keeps idle connections up to its limit after a load, and the
//     driver and database/sql run goroutines for each) + 10;
//   - open files beyond the baseline's + 1 per extra open pool connection
//     (its socket) + 5;
//   - resident memory more than 50% over the baseline's: the heap grows
//     and the runtime returns it lazily, a leak grows without bound.
//
// The clients must close their idle keep-alive connections before the
// reading: each holds a goroutine and a socket of payd's. A replica read
// at the baseline but not after is reported too: its growth is unknown.
// A replica restarted in between (kill_replica) starts from less, and is
// compared all the same.
func Growth(baseline, after Minute) []string {
	var out []string
	for _, replica := range slices.Sorted(maps.Keys(baseline.Goroutines)) {
		if _, ok := after.Goroutines[replica]; !ok {
			out = append(out, fmt.Sprintf("%s: not read after the load", replica))
			continue
		}
		extraConns := 0
		base, now := baseline.Pools[replica], after.Pools[replica]
		for _, db := range slices.Sorted(maps.Keys(now)) {
			extraConns += max(now[db]-base[db], 0)
		}
		for _, db := range slices.Sorted(maps.Keys(after.InUse[replica])) {
			if b, a := baseline.InUse[replica][db], after.InUse[replica][db]; a > b {
				out = append(out, fmt.Sprintf("%s: pool %s has %d connections in use, %d at the baseline", replica, db, a, b))
			}
		}
		b, a := baseline.Goroutines[replica], after.Goroutines[replica]
		if allowed := b + goroutinesPerConn*extraConns + goroutineSlack; a > allowed {
			out = append(out, fmt.Sprintf("%s: %d goroutines, %d at the baseline (%d allowed with %d more open connections)",
				replica, a, b, allowed, extraConns))
		}
		bf, af := baseline.OpenFiles[replica], after.OpenFiles[replica]
		if allowed := bf + extraConns + fileSlack; af > allowed {
			out = append(out, fmt.Sprintf("%s: %d open files, %d at the baseline (%d allowed with %d more open connections)",
				replica, af, bf, allowed, extraConns))
		}
		br, ar := baseline.RSS[replica], after.RSS[replica]
		if float64(ar) > float64(br)*(1+rssGrowth) {
			out = append(out, fmt.Sprintf("%s: resident memory %s, %s at the baseline (more than %d%% over)",
				replica, mib(ar), mib(br), int(rssGrowth*100)))
		}
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
