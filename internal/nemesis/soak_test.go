package nemesis

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gorm.io/gorm"

	"github.com/payd/payd/telemetry"
)

// metricsText is a replica's /metrics with goroutines as given.
func metricsText(goroutines int64) string {
	return fmt.Sprintf(`# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines %d
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 5.24288e+07
process_open_fds 17
go_sql_open_connections{db_name="primary"} 3
go_sql_in_use_connections{db_name="primary"} 1
go_sql_open_connections{db_name="replica"} 2
go_sql_in_use_connections{db_name="replica"} 0
go_sql_wait_count_total{db_name="primary"} 12
`, goroutines)
}

func TestSamplerReadsEveryReplica(t *testing.T) {
	var goroutines atomic.Int64
	goroutines.Store(42)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, metricsText(goroutines.Load()))
	}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	s := NewSampler(map[string]string{"payd-1": ok.URL + "/metrics", "payd-2": down.URL + "/metrics"}, time.Hour)

	for i := 1; i <= 100; i++ {
		s.Observe(time.Duration(i) * time.Millisecond)
	}
	m := s.Sample(context.Background())
	want := Minute{
		Minute: 1, At: m.At, Ops: 100, P99: 99 * time.Millisecond,
		RSS: map[string]int64{"payd-1": 52428800}, Goroutines: map[string]int{"payd-1": 42}, OpenFiles: map[string]int{"payd-1": 17},
		Pools:  map[string]map[string]int{"payd-1": {"primary": 3, "replica": 2}},
		InUse:  map[string]map[string]int{"payd-1": {"primary": 1, "replica": 0}},
		Unread: []string{"payd-2"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Sample() =\n%+v\nwant\n%+v", m, want)
	}

	goroutines.Store(50)
	m = s.Sample(context.Background())
	if m.Minute != 2 || m.Ops != 0 || m.P99 != 0 || m.Goroutines["payd-1"] != 50 {
		t.Fatalf("second Sample() = %+v, want minute 2, no ops, 50 goroutines", m)
	}
	if got := s.Minutes(); len(got) != 2 || got[0].Ops != 100 {
		t.Fatalf("Minutes() = %+v", got)
	}
}

func TestSamplerRunSamplesEveryInterval(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, metricsText(7))
	}))
	defer srv.Close()
	s := NewSampler(map[string]string{"payd-1": srv.URL}, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	for len(s.Minutes()) < 3 {
		s.Observe(time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	ms := s.Minutes()
	ops := 0
	for i, m := range ms {
		if m.Minute != i+1 || m.Goroutines["payd-1"] != 7 || (i > 0 && m.At <= ms[i-1].At) {
			t.Fatalf("minute %d = %+v", i, m)
		}
		ops += m.Ops
	}
	if ops == 0 {
		t.Fatalf("no operations counted in %+v", ms)
	}
}

// TestSamplerReadsPayd reads payd's own metrics handler, with a database
// pool registered as payd does, so a renamed series shows here.
func TestSamplerReadsPayd(t *testing.T) {
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(); err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	m.Register(collectors.NewDBStatsCollector(pool, "primary"))
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	got := NewSampler(map[string]string{"payd": srv.URL + "/metrics"}, time.Hour).Sample(context.Background())
	if len(got.Unread) != 0 {
		t.Fatalf("payd's metrics not read: %+v", got)
	}
	if got.Goroutines["payd"] <= 0 || got.RSS["payd"] <= 0 || got.OpenFiles["payd"] <= 0 {
		t.Errorf("goroutines %d, RSS %d, open files %d: want each read", got.Goroutines["payd"], got.RSS["payd"], got.OpenFiles["payd"])
	}
	if open, ok := got.Pools["payd"]["primary"]; !ok || open < 1 {
		t.Errorf("pool primary: %d open (read %v), want the pinged connection", open, ok)
	}
	if _, ok := got.InUse["payd"]["primary"]; !ok {
		t.Errorf("pool primary: connections in use not read: %+v", got.InUse)
	}
}

func TestGrowth(t *testing.T) {
	base := Minute{
		RSS: map[string]int64{"payd-1": 100 << 20}, Goroutines: map[string]int{"payd-1": 40}, OpenFiles: map[string]int{"payd-1": 20},
		Pools: map[string]map[string]int{"payd-1": {"primary": 2}}, InUse: map[string]map[string]int{"payd-1": {"primary": 0}},
	}
	with := func(change func(*Minute)) Minute {
		m := Minute{
			RSS: map[string]int64{"payd-1": base.RSS["payd-1"]}, Goroutines: map[string]int{"payd-1": base.Goroutines["payd-1"]},
			OpenFiles: map[string]int{"payd-1": base.OpenFiles["payd-1"]},
			Pools:     map[string]map[string]int{"payd-1": {"primary": 2}}, InUse: map[string]map[string]int{"payd-1": {"primary": 0}},
		}
		change(&m)
		return m
	}
	for _, tc := range []struct {
		name  string
		after Minute
		want  string // in the one line of growth; "" for none
	}{
		{"the same", with(func(*Minute) {}), ""},
		{"a little more", with(func(m *Minute) { m.Goroutines["payd-1"] += 10; m.OpenFiles["payd-1"] += 5; m.RSS["payd-1"] += 50 << 20 }), ""},
		{"less (restarted)", with(func(m *Minute) { m.Goroutines["payd-1"] = 10; m.RSS["payd-1"] = 10 << 20 }), ""},
		{"idle connections kept", with(func(m *Minute) {
			m.Pools["payd-1"]["primary"] = 10 // 8 more: 16 goroutines and 8 sockets allowed
			m.Goroutines["payd-1"] += 16 + 10
			m.OpenFiles["payd-1"] += 8 + 5
		}), ""},
		{"goroutines leaked", with(func(m *Minute) { m.Goroutines["payd-1"] += 11 }), "51 goroutines"},
		{"goroutines beyond the idle connections", with(func(m *Minute) {
			m.Pools["payd-1"]["primary"] = 3
			m.Goroutines["payd-1"] += 2 + 11
		}), "53 goroutines"},
		{"files leaked", with(func(m *Minute) { m.OpenFiles["payd-1"] += 6 }), "26 open files"},
		{"a connection held", with(func(m *Minute) { m.InUse["payd-1"]["primary"] = 1 }), "pool primary has 1 connections in use"},
		{"memory", with(func(m *Minute) { m.RSS["payd-1"] = 151 << 20 }), "resident memory 151.0 MiB"},
		{"not read", Minute{Unread: []string{"payd-1"}}, "payd-1: not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Growth(base, tc.after)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("Growth = %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("Growth = %q, want one line with %q", got, tc.want)
			}
		})
	}
}

func TestP99(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 1}, {10, 10}, {100, 99}, {1000, 990}} {
		var lat []time.Duration
		for i := tc.n; i >= 1; i-- { // unsorted
			lat = append(lat, time.Duration(i))
		}
		if got := p99(lat); got != tc.want {
			t.Errorf("p99 of 1..%d = %d, want %d", tc.n, got, tc.want)
		}
	}
}
