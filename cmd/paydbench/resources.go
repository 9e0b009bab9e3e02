package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/payd/payd/internal/metricsread"
)

// paydState is what payd's /metrics says about its resources at one
// moment: its goroutines and each database pool (by db_name) when payd
// exports the pools' statistics.
type paydState struct {
	Goroutines int             `json:"goroutines"`
	Pools      map[string]pool `json:"pools,omitempty"`
}

// pool is one database/sql pool's statistics (go_sql_*).
type pool struct {
	Open  int `json:"open"`
	InUse int `json:"in_use"`
	Idle  int `json:"idle"`
	// Waits counts the connections a caller had to wait for, since start.
	Waits int64 `json:"waits"`
}

// resources compares payd's state before the load and after it drained.
type resources struct {
	Before paydState `json:"before"`
	After  paydState `json:"after"`
	// Growth lists what did not come back: goroutines beyond those of the
	// pools' extra open connections, connections still in use. Empty when
	// nothing grew.
	Growth []string `json:"growth,omitempty"`
}

// scraper reads payd's /metrics on a connection of its own, closed after
// each read, so it holds no server goroutine between reads.
type scraper struct {
	url string
	hc  *http.Client
}

func newScraper(base string) *scraper {
	return &scraper{url: base + "/metrics", hc: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}}
}

func (s *scraper) state(ctx context.Context) (paydState, error) {
	fams, err := metricsread.Fetch(ctx, s.hc, s.url)
	if err != nil {
		return paydState{}, fmt.Errorf("payd's metrics: %w", err)
	}
	return stateOf(fams)
}

// stateOf takes go_goroutines and the go_sql_* pool series from one
// reading of payd's /metrics.
func stateOf(fams metricsread.Families) (paydState, error) {
	g, ok := fams.Value("go_goroutines")
	if !ok {
		return paydState{Goroutines: -1}, fmt.Errorf("payd's metrics have no go_goroutines")
	}
	st := paydState{Goroutines: int(g)}
	for name, field := range poolFields {
		for db, v := range fams.ByLabel(name, "db_name") {
			if st.Pools == nil {
				st.Pools = map[string]pool{}
			}
			p := st.Pools[db]
			field(&p, v)
			st.Pools[db] = p
		}
	}
	return st, nil
}

var poolFields = map[string]func(*pool, float64){
	"go_sql_open_connections":   func(p *pool, v float64) { p.Open = int(v) },
	"go_sql_in_use_connections": func(p *pool, v float64) { p.InUse = int(v) },
	"go_sql_idle_connections":   func(p *pool, v float64) { p.Idle = int(v) },
	"go_sql_wait_count_total":   func(p *pool, v float64) { p.Waits = int64(v) },
}

// idle reads payd's state until no pool has a connection in use, or until
// wait has passed, and returns the baseline the state after the load is
// compared with. A background job that is querying, or opening a
// connection, when the baseline is read would skew it: the pool counts a
// connection as open (and in use) as soon as it starts dialling, but the
// driver starts that connection's goroutine only once it has logged in, so
// a later reading would show one goroutine more per open connection than
// the baseline accounts for. An idle payd's goroutine count also moves by a
// few between readings (a job's tick, the scrape's own handler), so the
// baseline is the idle reading with the most goroutines over baselineWindow:
// growth is what stays above the highest level payd showed at rest, and a
// low reading before the load cannot pass for a leak after it.
func (s *scraper) idle(ctx context.Context, wait time.Duration) (paydState, error) {
	deadline := time.Now().Add(wait)
	var (
		best  paydState
		found bool
		until time.Time
	)
	for {
		st, err := s.state(ctx)
		if err != nil {
			return st, err
		}
		if !st.busy() {
			if !found {
				found, until = true, time.Now().Add(baselineWindow)
			}
			if st.Goroutines > best.Goroutines {
				best = st
			}
		}
		switch {
		case found && !time.Now().Before(until):
			return best, nil
		case !found && time.Now().After(deadline):
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// baselineWindow is how long idle keeps reading an idle payd for its
// baseline.
const baselineWindow = time.Second

// busy reports whether a pool has a connection in use (or being opened).
func (st paydState) busy() bool {
	for _, p := range st.Pools {
		if p.InUse > 0 {
			return true
		}
	}
	return false
}

// settle reads payd's state until it is back to before (no more
// goroutines than before, beyond one per extra open pool connection, and
// no connection in use) or until wait has passed, and returns the last
// reading with what grew.
func (s *scraper) settle(ctx context.Context, before paydState, wait time.Duration) (resources, error) {
	deadline := time.Now().Add(wait)
	for {
		after, err := s.state(ctx)
		if err != nil {
			return resources{}, err
		}
		r := resources{Before: before, After: after, Growth: growth(before, after)}
		if len(r.Growth) == 0 || time.Now().After(deadline) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// growth says what did not come back. A pool keeps some idle connections
// after a load (up to its idle limit, until they expire), the MySQL driver
// runs one goroutine per open connection, and database/sql starts one
// connection cleaner per pool once its connections have a lifetime: those
// are not counted as growth, connections in use and any other goroutine are.
func growth(before, after paydState) []string {
	var out []string
	extraConns := 0
	for name, a := range after.Pools {
		b := before.Pools[name]
		extraConns += max(a.Open-b.Open, 0)
		if a.InUse > b.InUse {
			out = append(out, fmt.Sprintf("pool %s: %d connections in use, %d before", name, a.InUse, b.InUse))
		}
	}
	if after.Goroutines > before.Goroutines+extraConns+len(after.Pools) {
		out = append(out, fmt.Sprintf("goroutines: %d, %d before (%d more open connections)", after.Goroutines, before.Goroutines, extraConns))
	}
	return out
}

// write prints the before/after lines and what grew.
func (r *resources) write(w io.Writer) {
	fmt.Fprintf(w, "payd goroutines: %d before the load, %d after it drained\n", r.Before.Goroutines, r.After.Goroutines)
	names := make([]string, 0, len(r.After.Pools))
	for name := range r.After.Pools {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b, a := r.Before.Pools[name], r.After.Pools[name]
		fmt.Fprintf(w, "payd pool %s: open %d → %d, in use %d → %d, idle %d → %d, waited for a connection %d times\n",
			name, b.Open, a.Open, b.InUse, a.InUse, b.Idle, a.Idle, a.Waits-b.Waits)
	}
	if len(r.After.Pools) == 0 {
		fmt.Fprintln(w, "payd pools: not exported by this payd (no go_sql_* series)")
	}
	if len(r.Growth) == 0 {
		fmt.Fprintln(w, "growth after the load: none")
	}
	for _, g := range r.Growth {
		fmt.Fprintln(w, "GROWTH after the load:", g)
	}
}
