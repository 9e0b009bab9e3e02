package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/payd/payd/internal/preload"
)

// report is everything one run measured; -json prints it as it is.
type report struct {
	Database string `json:"database"` // sqlite or mysql
	Redis    bool   `json:"redis"`    // payd ran with PAYD_REDIS_URL
	Clients  int    `json:"clients"`
	Requests int    `json:"requests"`
	CPUs     int    `json:"cpus"`
	// GoVersion is the toolchain paydbench was built with; Date the day
	// of the run (UTC); Command the command line that reproduces it.
	GoVersion string  `json:"go_version,omitempty"`
	Date      string  `json:"date,omitempty"`
	Command   string  `json:"command,omitempty"`
	Phases    []phase `json:"phases"`
	Ratios    ratios  `json:"ratios"` // payd's throughput over the floor's
	Pprof     string  `json:"pprof,omitempty"`
	// LoadBefore and LoadAfter are the machine's load averages (1, 5, 15
	// minutes) when the run started and ended.
	LoadBefore string   `json:"load_average_before,omitempty"`
	LoadAfter  string   `json:"load_average_after,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// PeakRSSBytes is payd's peak resident set size (VmHWM); 0 when unknown.
	PeakRSSBytes int64 `json:"payd_peak_rss_bytes"`
	// Resources are payd's goroutines and database pools before the load
	// and after it drained.
	Resources *resources `json:"resources,omitempty"`
	// SQLiteBusy counts payd's log lines reporting SQLite's lock busy (an
	// error that reached a request or a job); SQLite only.
	SQLiteBusy *int64 `json:"sqlite_busy_errors,omitempty"`
	// Preload is what -preload loaded before payd was measured.
	Preload *preload.Stats `json:"preload,omitempty"`
	// Reconcile are the runs -reconcile timed, after payd's phases.
	Reconcile []reconcileRun `json:"reconcile,omitempty"`
}

type ratios struct {
	NewPay float64 `json:"new_pay"`
	Replay float64 `json:"replay"`
	// NewPayBatched is payd's new pays over the batched floor's (MySQL).
	NewPayBatched float64 `json:"new_pay_batched,omitempty"`
}

// phase is one measured phase.
type phase struct {
	Target    string  `json:"target"` // payd or floor
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// Failed counts the requests that failed, and FirstError says why: only
	// the operators' reads may fail without failing the run (a read that
	// outlasts payd's own deadline on a grown database is a finding).
	Failed     int64  `json:"failed,omitempty"`
	FirstError string `json:"first_error,omitempty"`
	// CPUMsPerRequest is payd's CPU time (user+system) per request; nil
	// for the floor and where /proc is missing.
	CPUMsPerRequest *float64 `json:"payd_cpu_ms_per_request,omitempty"`
	// BenchCPUMsPerRequest is this process's CPU time per request: the
	// HTTP client in payd's phases, the floor itself in the floor's.
	BenchCPUMsPerRequest *float64 `json:"bench_cpu_ms_per_request,omitempty"`
	// DBCPUMsPerRequest is the database server's CPU time per request,
	// when it runs on this machine (MariaDB/MySQL; SQLite is in-process).
	DBCPUMsPerRequest *float64 `json:"db_cpu_ms_per_request,omitempty"`
	// Statements are the server's counters per request (Questions is every
	// statement); nil on SQLite, which keeps none.
	Statements map[string]float64 `json:"statements_per_request,omitempty"`
}

func newReport(o options, dialect string) *report {
	return &report{Database: dialect, Redis: o.redis != "", Clients: o.clients, Requests: o.requests, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()}
}

func newPhase(target, name string, n int, r result, before, after sample) phase {
	p := phase{
		Target: target, Name: name, Requests: n, Seconds: r.elapsed.Seconds(),
		PerSecond: float64(n) / r.elapsed.Seconds(),
		P50Ms:     ms(percentile(r.latencies, 50)), P99Ms: ms(percentile(r.latencies, 99)),
	}
	if before.hasCPU && after.hasCPU {
		cpu := ms(after.cpu-before.cpu) / float64(n)
		p.CPUMsPerRequest = &cpu
	}
	if before.hasSelf && after.hasSelf {
		cpu := ms(after.self-before.self) / float64(n)
		p.BenchCPUMsPerRequest = &cpu
	}
	if before.hasSrv && after.hasSrv {
		cpu := ms(after.server-before.server) / float64(n)
		p.DBCPUMsPerRequest = &cpu
	}
	if before.counters != nil && after.counters != nil {
		p.Statements = perRequest(before.counters, after.counters, n)
	}
	return p
}

// perRequest divides each counter's growth by n. The SHOW STATUS that read
// the second sample counts itself as a question: it is taken off.
func perRequest(before, after map[string]int64, n int) map[string]float64 {
	out := map[string]float64{}
	for _, k := range counted {
		d := after[k] - before[k]
		if k == "Questions" {
			d--
		}
		out[k] = float64(d) / float64(n)
	}
	return out
}

func (r *report) add(p phase) { r.Phases = append(r.Phases, p) }

func (r *report) find(target, name string) (phase, bool) {
	for _, p := range r.Phases {
		if p.Target == target && p.Name == name {
			return p, true
		}
	}
	return phase{}, false
}

// ratios sets payd's throughput as a share of the floor's.
func (r *report) ratios() {
	ratio := func(name string, floorName ...string) float64 {
		p, ok1 := r.find("payd", name)
		f, ok2 := r.find("floor", append(floorName, name)[0])
		if !ok1 || !ok2 || f.PerSecond == 0 {
			return 0
		}
		return p.PerSecond / f.PerSecond
	}
	r.Ratios = ratios{NewPay: ratio("new pay"), Replay: ratio("replay"), NewPayBatched: ratio("new pay", "new pay, batched")}
}

func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	db := r.Database
	if r.Redis {
		db += " with Redis"
	}
	fmt.Fprintf(w, "paydbench: %s, %d clients, %d requests per phase, %d CPUs, %s\n\n",
		db, r.Clients, r.Requests, r.CPUs, runtime.Version())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tphase\treq/s\tp50 ms\tp99 ms\tpayd CPU ms/req\tbench CPU\tdb CPU\tstmts/req\tSET/req\tBEGIN/req\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Target, p.Name, p.PerSecond, p.P50Ms, p.P99Ms,
			optional(p.CPUMsPerRequest), optional(p.BenchCPUMsPerRequest), optional(p.DBCPUMsPerRequest),
			counter(p, "Questions"), counter(p, "Com_set_option"), counter(p, "Com_begin"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Phases {
		if p.Failed > 0 {
			fmt.Fprintf(w, "%s %s: %d of %d requests failed, the first: %s\n", p.Target, p.Name, p.Failed, p.Requests, p.FirstError)
		}
	}
	fmt.Fprintf(w, "\npayd/floor: new pay %.2f×, replay %.2f×\n", r.Ratios.NewPay, r.Ratios.Replay)
	if r.Ratios.NewPayBatched != 0 {
		fmt.Fprintf(w, "payd/batched floor (each transaction in one round trip, as payd sends it on MySQL): new pay %.2f×\n", r.Ratios.NewPayBatched)
	}
	if c, ok := r.find("payd", "create order, stock"); ok {
		if u, ok := r.find("payd", "create order"); ok && u.PerSecond > 0 {
			fmt.Fprintf(w, "create order from the catalogue: counted stock %.0f/s, unlimited %.0f/s (%.2f×)\n", c.PerSecond, u.PerSecond, c.PerSecond/u.PerSecond)
		}
	}
	if p := r.Preload; p != nil {
		fmt.Fprintf(w, "preloaded: %s\n", p.Words())
	}
	for _, rr := range r.Reconcile {
		fmt.Fprintf(w, "reconcile the last 30 days (%d charges, %d refunds) against the %s: %d in %.1f s, matched %d, found %d; payd's RSS %.1f MiB before, %.1f MiB at most while it ran",
			rr.Charges, rr.Refunds, rr.Against, rr.Status, rr.Seconds, rr.Matched, rr.Found, float64(rr.RSSBeforeBytes)/(1<<20), float64(rr.RSSPeakBytes)/(1<<20))
		if rr.FileBytes > 0 {
			fmt.Fprintf(w, "; the file %.1f MiB", float64(rr.FileBytes)/(1<<20))
		}
		if rr.Error != "" {
			fmt.Fprintf(w, "; %.300s", rr.Error)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "payd peak RSS: %.1f MiB\n", float64(r.PeakRSSBytes)/(1<<20))
	if r.Resources != nil {
		r.Resources.write(w)
	}
	if r.SQLiteBusy != nil {
		fmt.Fprintf(w, "SQLite busy errors in payd's log: %d\n", *r.SQLiteBusy)
	}
	if r.LoadBefore != "" {
		fmt.Fprintf(w, "load average: %s at the start, %s at the end\n", r.LoadBefore, r.LoadAfter)
	}
	fmt.Fprintln(w, "bench CPU: paydbench's own (its HTTP client in payd's phases, the floor in the floor's); db CPU: the database server's, when it runs on this machine")
	if r.Database == "sqlite" {
		fmt.Fprintln(w, "statements per request: n/a on SQLite (no server counters)")
	} else {
		fmt.Fprintln(w, "statements per request: MariaDB/MySQL global counters, so they include any other client of the server")
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func optional(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *v)
}

func counter(p phase, name string) string {
	v, ok := p.Statements[name]
	if !ok {
		return "n/a"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
