package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/internal/metricsread"
)

func TestParseState(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 17
go_sql_idle_connections{db_name="read"} 3
go_sql_in_use_connections{db_name="read"} 1
go_sql_open_connections{db_name="read"} 4
go_sql_open_connections{db_name="write"} 1
go_sql_wait_count_total{db_name="write"} 1234
payd_payments_total{result="paid"} 5
`
	got, err := parseState(text)
	if err != nil {
		t.Fatalf("parseState = %v", err)
	}
	if got.Goroutines != 17 || got.Pools["read"] != (pool{Open: 4, InUse: 1, Idle: 3}) ||
		got.Pools["write"] != (pool{Open: 1, Waits: 1234}) || len(got.Pools) != 2 {
		t.Errorf("parseState = %+v", got)
	}
	if _, err := parseState("payd_payments_total 1\n"); err == nil {
		t.Error("parseState(no go_goroutines) = nil error, want one")
	}
}

// parseState is what the scraper makes of one /metrics answer.
func parseState(text string) (paydState, error) {
	fams, err := metricsread.Parse(strings.NewReader(text))
	if err != nil {
		return paydState{}, err
	}
	return stateOf(fams)
}

func TestGrowth(t *testing.T) {
	before := paydState{Goroutines: 15, Pools: map[string]pool{"payd": {Open: 1, Idle: 1}}}
	tests := []struct {
		name  string
		after paydState
		grew  bool
	}{
		{"back to before", before, false},
		{"idle connections the pool keeps, one goroutine each", paydState{Goroutines: 18, Pools: map[string]pool{"payd": {Open: 4, Idle: 4}}}, false},
		{"and the pool's connection cleaner", paydState{Goroutines: 19, Pools: map[string]pool{"payd": {Open: 4, Idle: 4}}}, false},
		{"goroutines beyond the connections and the cleaner", paydState{Goroutines: 20, Pools: map[string]pool{"payd": {Open: 4, Idle: 4}}}, true},
		{"a connection still in use", paydState{Goroutines: 15, Pools: map[string]pool{"payd": {Open: 1, InUse: 1}}}, true},
	}
	for _, tt := range tests {
		if g := growth(before, tt.after); (len(g) > 0) != tt.grew {
			t.Errorf("%s: growth = %q, want growth %t", tt.name, g, tt.grew)
		}
	}
}

// TestIdleBaseline: the baseline is read once no pool connection is in
// use (a job querying, or opening a connection whose goroutine the driver
// has not started yet), not while one is, and it is the highest idle
// reading of its window, not a low one.
func TestIdleBaseline(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n, inUse, goroutines := reads.Add(1), 0, 15
		switch {
		case n <= 2:
			inUse, goroutines = 1, 30 // the first two readings: a job holds a connection
		case n == 5:
			goroutines = 17 // a job's tick at rest
		}
		fmt.Fprintf(w, "go_goroutines %d\ngo_sql_open_connections{db_name=\"payd\"} 2\ngo_sql_in_use_connections{db_name=\"payd\"} %d\n", goroutines, inUse)
	}))
	defer srv.Close()
	s := newScraper(srv.URL)
	st, err := s.idle(context.Background(), 10*time.Second)
	if err != nil || st.Pools["payd"].InUse != 0 || st.Goroutines != 17 || reads.Load() < 5 {
		t.Errorf("idle = %+v, %v after %d readings; want the fifth reading (the highest at rest), no connection in use", st, err, reads.Load())
	}
	reads.Store(-1000) // busy from now on: idle gives up after wait with the last reading
	if st, err := s.idle(context.Background(), 0); err != nil || !st.busy() {
		t.Errorf("idle(no wait) of a busy payd = %+v, %v; want its busy reading", st, err)
	}
}

func TestIsBusy(t *testing.T) {
	for line, want := range map[string]bool{
		`{"msg":"internal error","err":"claim order x: database is locked (5) (SQLITE_BUSY)"}`: true,
		`{"msg":"request","status":200}`: false,
	} {
		if got := isBusy([]byte(line)); got != want {
			t.Errorf("isBusy(%s) = %t, want %t", line, got, want)
		}
	}
}
