// Package redistest starts private redis-server instances for tests: one
// server, or a three-master Redis Cluster, on free loopback ports (never
// the machine's own 6379), stopped when the test ends. Without
// redis-server the test is skipped, unless PAYD_TEST_REQUIRE_REDIS=1 (CI)
// makes that a failure.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one private redis-server.
type Server struct {
	t    testing.TB
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
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
		t.Skip("redis-server not installed (PAYD_TEST_REQUIRE_REDIS=1 makes this a failure)")
	}
	return path
}

// Start starts a private redis-server; extra arguments are passed on.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := binary(t)
	s := &Server{t: t, Port: freePort(t), dir: t.TempDir()}
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--protected-mode", "no"}, extra...)
	s.start(bin)
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start(bin string) {
	s.t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %d did not answer", s.Port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill() // SIGKILL ends a paused process too
	_ = s.cmd.Wait()
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
	s.start(binary(s.t))
}

// Cluster is a three-master Redis Cluster.
type Cluster struct{ Nodes []*Server }

// URL is the cluster's PAYD_REDIS_URL: redis://h1:p1?addr=h2:p2&addr=h3:p3.
func (c *Cluster) URL() string {
	return "redis://" + c.Nodes[0].Addr() + "?addr=" + c.Nodes[1].Addr() + "&addr=" + c.Nodes[2].Addr()
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
