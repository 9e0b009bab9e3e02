package nemesis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// processLog records a fake setup's process faults and heals.
type processLog struct {
	mu        sync.Mutex
	events    []string
	open, max int
	healCtx   []error // each heal's context's Err when the heal was called
	deadline  []bool  // whether each heal's context had a deadline
}

func (pl *processLog) fault(kind Kind) ProcessFault {
	return func(ctx context.Context, target string) (func(context.Context) error, error) {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		pl.open++
		pl.max = max(pl.max, pl.open)
		pl.events = append(pl.events, fmt.Sprintf("%s %s", kind, target))
		return func(ctx context.Context) error {
			time.Sleep(20 * time.Millisecond) // a heal takes a moment
			pl.mu.Lock()
			defer pl.mu.Unlock()
			pl.open--
			_, ok := ctx.Deadline()
			pl.deadline = append(pl.deadline, ok)
			pl.healCtx = append(pl.healCtx, ctx.Err())
			pl.events = append(pl.events, fmt.Sprintf("heal %s %s", kind, target))
			return nil
		}, nil
	}
}

func TestRunnerAppliesAndHeals(t *testing.T) {
	n, l := newLink(t, server(t, echo))
	pl := &processLog{}
	var logged []string
	var logMu sync.Mutex
	r := &Runner{Net: n, Process: map[Kind]ProcessFault{KillReplica: pl.fault(KillReplica), DBRestart: pl.fault(DBRestart)},
		Log: func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			logged = append(logged, fmt.Sprintf(format, args...))
		}}
	const latency = 200 * time.Millisecond
	p := Plan{Seed: 1, Duration: time.Second, Faults: []Fault{
		{At: 0, For: 100 * time.Millisecond, Kind: KillReplica, Target: "payd-2"},
		// Overlaps the first: the runner must wait for its heal.
		{At: 50 * time.Millisecond, For: 100 * time.Millisecond, Kind: DBRestart, Target: "db"},
		{At: 0, For: 800 * time.Millisecond, Kind: Latency, Target: "test", Stream: Downstream, Latency: latency},
		{At: 100 * time.Millisecond, For: 2 * time.Second, Kind: Timeout, Target: "test", Stream: Upstream},
	}}
	done := make(chan struct{})
	var counts map[string]int
	var err error
	go func() {
		defer close(done)
		counts, err = r.Run(context.Background(), p)
	}()
	time.Sleep(50 * time.Millisecond)
	c := dial(t, l.Addr())
	start := time.Now()
	roundTrip(c, "x") // held by the timeout once it comes, or late
	if took := time.Since(start); took < latency {
		t.Errorf("a round trip during the latency fault took %s, want at least %s", took, latency)
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"kill_replica": 1, "db_restart": 1, "latency": 1, "timeout": 1}; !reflect.DeepEqual(counts, want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	wantEvents := []string{"kill_replica payd-2", "heal kill_replica payd-2", "db_restart db", "heal db_restart db"}
	if !reflect.DeepEqual(pl.events, wantEvents) || pl.max != 1 {
		t.Errorf("process events %v (at most %d at once), want %v one at a time", pl.events, pl.max, wantEvents)
	}
	if len(l.Toxics()) != 0 {
		t.Errorf("Toxics() = %v after Run", l.Toxics())
	}
	if got, err := roundTrip(dial(t, l.Addr()), "ok"); err != nil || got != "ok" {
		t.Errorf("roundTrip after Run = %q, %v", got, err)
	}
	all := strings.Join(logged, "\n")
	for _, want := range []string{"inject", "heal", "kill_replica", "latency", "healed everything"} {
		if !strings.Contains(all, want) {
			t.Errorf("log has no %q:\n%s", want, all)
		}
	}
}

func TestRunnerHealsWhenCancelled(t *testing.T) {
	n, l := newLink(t, server(t, echo))
	pl := &processLog{}
	r := &Runner{Net: n, Process: map[Kind]ProcessFault{KillGaleraNode: pl.fault(KillGaleraNode)}}
	p := Plan{Duration: time.Hour, Faults: []Fault{
		{At: 0, For: time.Hour, Kind: KillGaleraNode, Target: "node3"},
		{At: 0, For: time.Hour, Kind: Timeout, Target: "test", Stream: Downstream},
		{At: 50 * time.Minute, For: time.Minute, Kind: KillGaleraNode, Target: "node1"}, // never comes
	}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	counts, err := r.Run(ctx, p)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run cancelled = %v, want %v", err, context.Canceled)
	}
	if want := map[string]int{"kill_galera_node": 1, "timeout": 1}; !reflect.DeepEqual(counts, want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	if want := []string{"kill_galera_node node3", "heal kill_galera_node node3"}; !reflect.DeepEqual(pl.events, want) {
		t.Fatalf("process events %v, want %v", pl.events, want)
	}
	if pl.healCtx[0] != nil || !pl.deadline[0] {
		t.Errorf("heal's context: Err %v, deadline %v; want a live context with a deadline", pl.healCtx[0], pl.deadline[0])
	}
	if len(l.Toxics()) != 0 {
		t.Errorf("Toxics() = %v after a cancelled Run", l.Toxics())
	}
}

func TestRunnerRefusesWhatItCannotDo(t *testing.T) {
	n, _ := newLink(t, server(t, echo))
	r := &Runner{Net: n, Process: map[Kind]ProcessFault{}}
	for _, f := range []Fault{
		{Kind: Latency, Target: "nowhere", Stream: Downstream, Latency: time.Millisecond},
		{Kind: RedisFailover, Target: "redis"},
	} {
		if _, err := r.Run(context.Background(), Plan{Faults: []Fault{f}}); err == nil {
			t.Errorf("Run(%s) with no way to apply it: no error", f)
		}
	}
}

func TestRunnerReportsAFailedInjection(t *testing.T) {
	n, _ := newLink(t, server(t, echo))
	failing := func(ctx context.Context, target string) (func(context.Context) error, error) {
		return nil, errors.New("no such replica")
	}
	r := &Runner{Net: n, Process: map[Kind]ProcessFault{KillReplica: failing}}
	counts, err := r.Run(context.Background(), Plan{Faults: []Fault{
		{For: 10 * time.Millisecond, Kind: KillReplica, Target: "payd-9"},
		{For: 10 * time.Millisecond, Kind: Latency, Target: "test", Stream: Downstream, Latency: time.Millisecond},
	}})
	if err == nil || !strings.Contains(err.Error(), "no such replica") {
		t.Errorf("Run = %v, want the injection's error", err)
	}
	if want := map[string]int{"latency": 1}; !reflect.DeepEqual(counts, want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
}
