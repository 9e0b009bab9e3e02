package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/internal/galeratest"
	"github.com/payd/payd/internal/nemesis"
	"github.com/payd/payd/internal/redistest"
)

// The process faults a setup can take (nemesis.ProcessKinds): a replica
// killed with SIGKILL and started again on the same settings, a Galera
// node killed and rejoined, a Redis master failed over and rejoined as a
// replica, the system MariaDB stopped and started.

// processFaults registers the process faults of s: kill_replica always,
// kill_galera_node with a cluster, redis_failover with Redis, db_restart
// when the system MariaDB may be restarted.
func (s *nemSetup) processFaults(exe string, cluster *galeratest.Cluster, rc *redistest.ReplicatedCluster, maria *mariaDB) {
	t := s.t
	for _, r := range s.reps {
		s.targets[nemesis.KillReplica] = append(s.targets[nemesis.KillReplica], r.name)
	}
	s.process[nemesis.KillReplica] = func(_ context.Context, target string) (func(context.Context) error, error) {
		r := s.replica(target)
		if r == nil {
			return nil, fmt.Errorf("no replica %q", target)
		}
		p := r.current()
		_ = p.cmd.Process.Kill() // SIGKILL
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("%s still runs 30s after SIGKILL", r.name)
		}
		return func(context.Context) error {
			p, err := launchPaydProc(t, exe, r.name, r.env)
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.proc, r.procs = p, append(r.procs, p)
			r.mu.Unlock()
			return nil
		}, nil
	}
	if cluster != nil {
		for n := 1; n <= galeratest.Nodes; n++ {
			s.targets[nemesis.KillGaleraNode] = append(s.targets[nemesis.KillGaleraNode], fmt.Sprintf("node%d", n))
		}
		s.process[nemesis.KillGaleraNode] = func(_ context.Context, target string) (func(context.Context) error, error) {
			n, err := strconv.Atoi(strings.TrimPrefix(target, "node"))
			if err != nil || n < 1 || n > galeratest.Nodes {
				return nil, fmt.Errorf("no Galera node %q", target)
			}
			if err := asFault(t, func(tb testing.TB) { cluster.Kill(tb, n) }); err != nil {
				return nil, err
			}
			return func(context.Context) error { return asFault(t, func(tb testing.TB) { cluster.Start(tb, n) }) }, nil
		}
	}
	if rc != nil {
		s.targets[nemesis.RedisFailover] = []string{"redis"}
		var nth atomic.Int64
		s.process[nemesis.RedisFailover] = func(_ context.Context, _ string) (func(context.Context) error, error) {
			// A key's master: which one is killed changes from one failover to the next.
			key := fmt.Sprintf("nemesis-failover-%d", nth.Add(1))
			var killed *redistest.Server
			err := asFault(t, func(tb testing.TB) {
				killed = rc.MasterFor(tb, key)
				from := time.Now()
				killed.Kill()
				rc.WaitFailover(tb, key, killed, from, 30*time.Second)
			})
			if err != nil {
				return nil, err
			}
			return func(context.Context) error {
				return asFault(t, func(tb testing.TB) { rc.Rejoin(tb, killed, time.Minute) })
			}, nil
		}
	}
	if maria != nil {
		s.targets[nemesis.DBRestart] = []string{"mariadb"}
		s.process[nemesis.DBRestart] = func(context.Context, string) (func(context.Context) error, error) {
			if err := maria.stop(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return maria.start() }, nil
		}
	}
}

// faultTB is a test's testing.TB for the helpers of galeratest and
// redistest when a process fault calls them from the schedule's
// goroutine: a failure there ends the fault with an error (asFault)
// instead of the goroutine.
type faultTB struct{ testing.TB }

type faultFailure struct{ msg string }

func (f faultTB) Fatalf(format string, args ...any) {
	panic(faultFailure{fmt.Sprintf(format, args...)})
}

func (f faultTB) Fatal(args ...any) { panic(faultFailure{fmt.Sprint(args...)}) }

func (f faultTB) FailNow() { panic(faultFailure{"failed"}) }

// asFault runs fn with a faultTB and returns its failure as an error.
func asFault(t testing.TB, fn func(testing.TB)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(faultFailure)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	fn(faultTB{t})
	return nil
}
