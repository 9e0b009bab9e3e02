package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/testdeps"
)

// TestMain says, once the tests are done, what they skipped and why.
func TestMain(m *testing.M) { testdeps.Main(m) }

// TestRun runs paydbench end to end with a few requests: payd built, the
// database migrated and preloaded with 300 orders, payd started on it,
// every phase completed without a failed request, the preload's last 30
// days reconciled against the provider's list and a settlement file with
// every charge matched, and the floor measured on the same database. On MariaDB too when PAYD_TEST_MYSQL_DSN
// names a server.
func TestRun(t *testing.T) {
	testdeps.RequireFull(t, "builds payd and loads it")
	dbs := map[string]string{"sqlite": ""}
	if dsn := os.Getenv("PAYD_TEST_MYSQL_DSN"); dsn != "" {
		dbs["mysql"] = dsn
	} else if os.Getenv("PAYD_TEST_REQUIRE_MYSQL") != "" {
		t.Fatal("PAYD_TEST_REQUIRE_MYSQL is set but PAYD_TEST_MYSQL_DSN is not")
	}
	for dialect, dsn := range dbs {
		t.Run(dialect, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // it builds payd: see TestRunKeptPreload
			defer cancel()
			var out, errs bytes.Buffer
			if err := run(ctx, []string{"-db", dsn, "-c", "4", "-n", "24", "-preload", "300", "-reconcile", "-json"}, &out, &errs); err != nil {
				t.Fatalf("run = %v\n%s", err, errs.String())
			}
			var rep report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			checkReport(t, rep, dialect)
			if p := rep.Preload; p == nil || p.Orders != 300 || p.Rows == 0 || p.Reused || p.Bytes == 0 {
				t.Errorf("preload = %+v, want 300 orders loaded and the database's size", p)
			}
			if len(rep.Reconcile) != 2 {
				t.Fatalf("reconciliations = %+v, want one against the provider and one against a file", rep.Reconcile)
			}
			for _, r := range rep.Reconcile {
				// 300 orders over 90 days and the run's own pays: some 100
				// charges and 10 refunds in the window, all of them payd's.
				if r.Status != 201 || r.Charges < 50 || r.Refunds == 0 || r.Matched != r.Charges || r.Found != 0 || r.Seconds <= 0 || hasProc() && r.RSSPeakBytes <= 0 {
					t.Errorf("reconcile against the %s = %+v, want 201 with every charge matched and nothing found", r.Against, r)
				}
			}
		})
	}
}

func checkReport(t *testing.T, rep report, dialect string) {
	t.Helper()
	want := 7 // register, create order, new pay, replay and create order, stock; the floor's new pay and replay
	if dialect == "mysql" {
		want = 8 // and the batched floor's new pay
	}
	reads := 0
	for _, p := range rep.Phases {
		if strings.HasPrefix(p.Name, readPrefix) {
			reads++
		}
	}
	wantReads := 16 // the operators' reads (reads.go)
	if rep.Preload != nil {
		wantReads++ // and the preloaded endpoint's deliveries
	}
	if rep.Database != dialect || len(rep.Phases)-reads != want || reads != wantReads {
		t.Fatalf("report = %s with %d phases and %d reads, want %s with %d and %d", rep.Database, len(rep.Phases)-reads, reads, dialect, want, wantReads)
	}
	for _, name := range []string{"orders, deep page", "orders by customer email", "order timeline", "stats, 90 days by day"} {
		if p, ok := rep.find("payd", readPrefix+name); !ok || p.Requests < 20 {
			t.Errorf("the operators' read %q = %+v, want it measured", name, p)
		}
	}
	if _, ok := rep.find("payd", "create order, stock"); !ok {
		t.Errorf("phases = %+v, want payd's create order, stock", rep.Phases)
	}
	for _, p := range rep.Phases {
		if p.PerSecond <= 0 || p.P99Ms < p.P50Ms {
			t.Errorf("%s %s: %.0f/s, p50 %.2f ms, p99 %.2f ms", p.Target, p.Name, p.PerSecond, p.P50Ms, p.P99Ms)
		}
		if hasProc() && (p.Target == "payd") != (p.CPUMsPerRequest != nil) {
			t.Errorf("%s %s: CPU per request %v, want it for payd's phases only", p.Target, p.Name, p.CPUMsPerRequest)
		}
		if hasProc() && p.BenchCPUMsPerRequest == nil {
			t.Errorf("%s %s: no bench CPU per request", p.Target, p.Name)
		}
		if (dialect == "mysql") != (p.Statements != nil) {
			t.Errorf("%s %s: statements %v, want them on MySQL only", p.Target, p.Name, p.Statements)
		}
	}
	if rep.Ratios.NewPay <= 0 || rep.Ratios.Replay <= 0 {
		t.Errorf("ratios = %+v, want both positive", rep.Ratios)
	}
	if (dialect == "mysql") != (rep.Ratios.NewPayBatched > 0) {
		t.Errorf("ratio to the batched floor = %v, want one on MySQL only", rep.Ratios.NewPayBatched)
	}
	if hasProc() && rep.PeakRSSBytes <= 0 {
		t.Errorf("peak RSS = %d, want > 0", rep.PeakRSSBytes)
	}
	if r := rep.Resources; r == nil || r.Before.Goroutines <= 0 || r.After.Goroutines <= 0 || len(r.After.Pools) == 0 {
		t.Errorf("resources = %+v, want payd's goroutines and pools before and after", r)
	} else if len(r.Growth) > 0 {
		t.Errorf("after the load: %q, want no growth", r.Growth)
	}
	if (dialect == "sqlite") != (rep.SQLiteBusy != nil) {
		t.Errorf("SQLite busy errors = %v, want a count on SQLite only", rep.SQLiteBusy)
	} else if rep.SQLiteBusy != nil && *rep.SQLiteBusy != 0 {
		t.Errorf("SQLite busy errors = %d, want 0", *rep.SQLiteBusy)
	}
}

func hasProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// TestRedisOption: -redis reaches payd as -redis-url and marks the report.
func TestRedisOption(t *testing.T) {
	o, err := parseOptions([]string{"-redis", "redis://127.0.0.1:1/0"}, new(bytes.Buffer))
	if err != nil || o.redis != "redis://127.0.0.1:1/0" {
		t.Fatalf("parseOptions(-redis) = %+v, %v; want redis set", o, err)
	}
	if rep := newReport(o, "mysql"); !rep.Redis {
		t.Error("report of a run with -redis: Redis = false")
	}
}

// TestRunKeptPreload: a preload kept (-preload-keep) serves the next run,
// which loads nothing and measures on it: its payd takes the database
// over (another secret key), and its products are its own (the first
// run's are there, with what is left of their stock).
func TestRunKeptPreload(t *testing.T) {
	testdeps.RequireFull(t, "builds payd and loads it twice")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where SQLite's kept preload goes
	for i, wantReused := range []bool{false, true} {
		// Generous: the first run builds payd, which under -race beside
		// every other package's tests takes minutes on two cores.
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		var out, errs bytes.Buffer
		err := run(ctx, []string{"-c", "4", "-n", "24", "-preload", "200", "-preload-keep", "-json"}, &out, &errs)
		cancel()
		if err != nil {
			t.Fatalf("run %d = %v\n%s", i+1, err, errs.String())
		}
		var rep report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("run %d: output is not JSON: %v", i+1, err)
		}
		if p := rep.Preload; p == nil || p.Orders != 200 || p.Reused != wantReused {
			t.Fatalf("run %d: preload = %+v, want 200 orders, reused %v", i+1, p, wantReused)
		}
		checkReport(t, rep, "sqlite")
	}
}
