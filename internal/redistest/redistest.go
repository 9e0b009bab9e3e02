// Package redistest starts private redis-server instances for tests: one
// server, a three-master Redis Cluster, or a cluster of three masters
// with a replica each (for a real failover), on free loopback ports
// (never the machine's own 6379), stopped when the test ends. Without
// redis-server the test is skipped, unless PAYD_TEST_REQUIRE_REDIS=1 (CI)
// makes that a failure.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/payd/payd/internal/testdeps"
)

// Server is one private redis-server.
type Server struct {
	t    testing.TB
	Port int
	// Announced is the port the node tells clients and the other nodes
	// to reach it on (AnnounceThrough); 0: its own.
	Announced int
	dir       string
	args      []string
	cmd       *exec.Cmd
	done      chan struct{} // closed when cmd has exited
}

// URL is the server's PAYD_REDIS_URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// binary returns redis-server's path, or skips (fails in CI) without it.
func binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("PAYD_TEST_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found and PAYD_TEST_REQUIRE_REDIS=1: %v", err)
		}
		testdeps.Skip(t, testdeps.Redis, "redis-server not installed (PAYD_TEST_REQUIRE_REDIS=1 makes this a failure)")
	}
	return path
}

// ClientAddr is where the cluster tells clients to find the node:
// Addr, or the announced port in front of it.
func (s *Server) ClientAddr() string {
	if s.Announced != 0 {
		return "127.0.0.1:" + strconv.Itoa(s.Announced)
	}
	return s.Addr()
}

// Start starts a private redis-server; extra arguments are passed on.
// A port found free can be taken by another process before the server
// binds it (tests start many servers at once): when the server exits
// before it answers, Start tries again on another port.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := binary(t)
	var err error
	for range 5 {
		s := newServer(t, freePort(t), extra)
		if err = s.start(bin); err == nil {
			t.Cleanup(s.Kill)
			return s
		}
		if !errors.Is(err, errExited) {
			break
		}
	}
	t.Fatalf("redistest: %v", err)
	return nil
}

// startOn is Start on a port chosen beforehand (a proxy in front of it
// already announces it): no other port will do, so it does not retry.
func startOn(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	s := newServer(t, port, extra)
	if err := s.start(binary(t)); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

func newServer(t testing.TB, port int, extra []string) *Server {
	s := &Server{t: t, Port: port, dir: t.TempDir()}
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--protected-mode", "no"}, extra...)
	return s
}

// errExited: the server ended before it answered, most often because its
// port was taken.
var errExited = errors.New("redis-server exited before it answered")

// start runs the server and waits until it answers PING. What the server
// printed is in the error when it does not.
func (s *Server) start(bin string) error {
	cmd := exec.Command(bin, s.args...)
	cmd.Dir = s.dir
	out := &tail{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("%w on port %d:\n%s", errExited, s.Port, out)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %d did not answer within 10s:\n%s", s.Port, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// tail keeps the last 4 KiB a server printed, for the error that says why
// it did not start; the process writes it while tests read it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 4096 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-4096:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill() // SIGKILL ends a paused process too
	<-s.done
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP): it keeps its connections
// but answers nothing, as a Redis stuck or overloaded. Resume ends it.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts the server again on the same port, empty (nothing is
// saved): as a Redis that lost everything.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(binary(s.t)); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Cluster is a three-master Redis Cluster.
type Cluster struct{ Nodes []*Server }

// URL is the cluster's PAYD_REDIS_URL: redis://h1:p1?addr=h2:p2&addr=h3:p3.
func (c *Cluster) URL() string {
	return "redis://" + c.Nodes[0].Addr() + "?addr=" + c.Nodes[1].Addr() + "&addr=" + c.Nodes[2].Addr()
}

// MasterFor is the node serving key's slot (every node must be up).
func (c *Cluster) MasterFor(t testing.TB, key string) *Server {
	t.Helper()
	m := (&ReplicatedCluster{Nodes: c.Nodes}).masterForQuiet(key, c.Nodes)
	if m == nil {
		t.Fatalf("no master for key %q", key)
	}
	return m
}

// StartCluster starts three cluster-enabled servers, joins them with
// redis-cli --cluster create (no replicas) and waits for cluster_state:ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		binary(t)
		t.Fatalf("redis-cli not found: %v", err)
	}
	c := &Cluster{}
	addrs := []string{"--cluster", "create"}
	for range 3 {
		n := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr())
	}
	out, err := exec.Command(cli, append(addrs, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		for {
			info, _ := rc.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				rc.Close()
				t.Fatalf("cluster not ok on %s: %s", n.Addr(), info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		rc.Close()
	}
	return c
}

// freePort returns a loopback port nothing listens on now, below 30000 so
// that its cluster bus port (+10000) is free and valid too.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(10000)
		if free(p) && free(p+10000) {
			return p
		}
	}
	t.Fatal("no free port for redis-server")
	return 0
}

func free(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ReplicatedCluster is a Redis Cluster of three masters, each with one
// replica, whose node timeout is short (1 s) so that a killed master's
// replica takes over within a few seconds: a real failover.
type ReplicatedCluster struct {
	Nodes []*Server
	cli   string
}

// URL is the cluster's PAYD_REDIS_URL, naming every node as a seed (at
// the address it announces).
func (c *ReplicatedCluster) URL() string {
	u := "redis://" + c.Nodes[0].ClientAddr() + "?"
	for i, n := range c.Nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + n.ClientAddr()
	}
	return u
}

// ClusterOption changes how StartReplicatedCluster starts its nodes.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	through func(port int) (int, error)
}

// AnnounceThrough has every node announce another port than its own, to
// clients (CLUSTER SLOTS, MOVED) and to the other nodes (replication):
// through is called with the node's port before the node starts and
// returns the port to announce, where a proxy in front of the node
// listens. The cluster bus keeps the node's own bus port, so only the
// traffic clients and replicas see passes the proxies.
func AnnounceThrough(through func(port int) (int, error)) ClusterOption {
	return func(c *clusterConfig) { c.through = through }
}

// StartReplicatedCluster starts six cluster-enabled servers, joins them
// with redis-cli --cluster create --cluster-replicas 1 and waits until the
// cluster is ok and every master has a connected replica.
func StartReplicatedCluster(t testing.TB, opts ...ClusterOption) *ReplicatedCluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		binary(t)
		t.Fatalf("redis-cli not found: %v", err)
	}
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &ReplicatedCluster{cli: cli}
	args := []string{"--cluster", "create"}
	for range 6 {
		port := freePort(t)
		extra := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"}
		announced := 0
		if cfg.through != nil {
			if announced, err = cfg.through(port); err != nil {
				t.Fatalf("redistest: a port to announce for %d: %v", port, err)
			}
			extra = append(extra, "--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", strconv.Itoa(announced),
				"--cluster-announce-bus-port", strconv.Itoa(port+10000))
		}
		n := startOn(t, port, extra...)
		n.Announced = announced
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr())
	}
	out, err := exec.Command(cli, append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create --cluster-replicas 1: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !c.healthy(c.Nodes) {
		if time.Now().After(deadline) {
			t.Fatalf("replicated cluster not ok with a connected replica per master:\n%s", c.nodesText(c.Nodes[0]))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

func (c *ReplicatedCluster) client(n *Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

func (c *ReplicatedCluster) nodesText(n *Server) string {
	rc := c.client(n)
	defer rc.Close()
	s, _ := rc.ClusterNodes(context.Background()).Result()
	return s
}

// healthy: every node in alive says cluster_state:ok, and every master
// (as the first node sees it) has a replica whose link to it is up.
func (c *ReplicatedCluster) healthy(alive []*Server) bool {
	ctx := context.Background()
	for _, n := range alive {
		rc := c.client(n)
		info, _ := rc.ClusterInfo(ctx).Result()
		rc.Close()
		if !strings.Contains(info, "cluster_state:ok") {
			return false
		}
	}
	masters := 0
	for _, n := range alive {
		rc := c.client(n)
		info, _ := rc.Info(ctx, "replication").Result()
		rc.Close()
		if strings.Contains(info, "role:master") {
			masters++
			if !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
				return false
			}
		}
	}
	return masters == 3
}

// Rejoin starts n, a node killed for a failover, again on its port with
// its cluster configuration (so it rejoins as its successor's replica)
// and waits until the cluster is healthy. It fails t, which need not be
// the test that started the cluster.
func (c *ReplicatedCluster) Rejoin(t testing.TB, n *Server, timeout time.Duration) {
	t.Helper()
	n.Kill()
	if err := n.start(binary(t)); err != nil {
		t.Fatalf("redistest: rejoin: %v", err)
	}
	c.WaitHealthy(t, timeout)
}

// WaitHealthy waits until every running node says cluster_state:ok and
// every master has a connected replica again: after a killed master was
// restarted and rejoined as its successor's replica.
func (c *ReplicatedCluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	var alive []*Server
	for _, n := range c.Nodes {
		if n.cmd != nil {
			alive = append(alive, n)
		}
	}
	deadline := time.Now().Add(timeout)
	for !c.healthy(alive) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster not healthy within %v:\n%s", timeout, c.nodesText(alive[0]))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MasterFor is the node serving key's slot now.
func (c *ReplicatedCluster) MasterFor(t testing.TB, key string) *Server {
	t.Helper()
	var alive []*Server
	for _, n := range c.Nodes {
		if n.cmd != nil {
			alive = append(alive, n)
		}
	}
	m := c.masterForQuiet(key, alive)
	if m == nil {
		t.Fatalf("no master for key %q:\n%s", key, c.nodesText(alive[0]))
	}
	return m
}

// WaitFailover waits until, after the master of key was killed, every
// surviving node says cluster_state:ok and a surviving node (its former
// replica) serves key's slot. It returns how long that took since from.
func (c *ReplicatedCluster) WaitFailover(t testing.TB, key string, killed *Server, from time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	var alive []*Server
	for _, n := range c.Nodes {
		if n != killed && n.cmd != nil {
			alive = append(alive, n)
		}
	}
	ctx := context.Background()
	deadline := from.Add(timeout)
	for {
		ok := true
		for _, n := range alive {
			rc := c.client(n)
			info, _ := rc.ClusterInfo(ctx).Result()
			rc.Close()
			if !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			// The key's slot is served by a live master, answering as one.
			if m := c.masterForQuiet(key, alive); m != nil && m != killed {
				rc := c.client(m)
				info, _ := rc.Info(ctx, "replication").Result()
				rc.Close()
				if strings.Contains(info, "role:master") {
					return time.Since(from)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover within %v:\n%s", timeout, c.nodesText(alive[0]))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *ReplicatedCluster) masterForQuiet(key string, alive []*Server) *Server {
	ctx := context.Background()
	rc := c.client(alive[0])
	defer rc.Close()
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil
	}
	slots, err := rc.ClusterSlots(ctx).Result() //nolint:staticcheck // SA1019: Redis 7 still answers CLUSTER SLOTS, master first
	if err != nil {
		return nil
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
			for _, s := range alive {
				if s.ClientAddr() == r.Nodes[0].Addr {
					return s
				}
			}
		}
	}
	return nil
}
