// Package galeratest gives tests a fresh payd database on a three-node
// MariaDB Galera cluster on loopback, with one database URL per node, so
// that each payd replica of a test can talk to its own node.
//
// The cluster is the one scripts/galera.sh runs (SQL ports 4306-4308, its
// data under GALERA_BASE, default scripts/.galera). With PAYD_TEST_GALERA=1
// the tests use a running cluster, or start one through the script and
// leave it running for the next run (scripts/galera.sh down stops it).
// Without it they skip, unless PAYD_TEST_REQUIRE_GALERA=1, as in CI, makes
// that a failure.
package galeratest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/repository"
)

// Environment variables that configure the Galera tests.
const (
	EnvGalera        = "PAYD_TEST_GALERA"
	EnvRequireGalera = "PAYD_TEST_REQUIRE_GALERA"
	EnvBase          = "GALERA_BASE"
)

// Nodes is the number of nodes of the cluster.
const Nodes = 3

// Cluster is the running three-node cluster of scripts/galera.sh.
type Cluster struct {
	Script string // scripts/galera.sh
	Base   string // the nodes' data, sockets, pid files and logs
}

var (
	once    sync.Once
	shared  *Cluster
	started error
)

// Require returns the cluster, starting it through the script when none
// is running. Without PAYD_TEST_GALERA=1 it skips t (or fails it under
// PAYD_TEST_REQUIRE_GALERA=1).
func Require(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(EnvGalera) != "1" {
		if os.Getenv(EnvRequireGalera) == "1" {
			t.Fatalf("galeratest: %s=1 but %s is not 1", EnvRequireGalera, EnvGalera)
		}
		testdeps.Skip(t, testdeps.Galera, "galeratest: "+EnvGalera+" is not 1; skipping the Galera tests (set it to use or start the cluster of scripts/galera.sh)")
	}
	once.Do(func() { shared, started = find() })
	if started != nil {
		t.Fatalf("galeratest: %v", started)
	}
	if err := shared.waitReady(2 * time.Minute); err != nil {
		t.Fatalf("galeratest: %v", err)
	}
	return shared
}

// find locates the script and makes sure all three nodes answer, running
// `galera.sh up` when none does.
func find() (*Cluster, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Script: filepath.Join(root, "scripts", "galera.sh"), Base: os.Getenv(EnvBase)}
	if c.Base == "" {
		c.Base = filepath.Join(root, "scripts", ".galera")
	}
	up := 0
	for n := 1; n <= Nodes; n++ {
		if c.Pid(n) != 0 {
			up++
		}
	}
	switch up {
	case Nodes:
		return c, nil
	case 0:
		return c, c.run("up")
	}
	return nil, fmt.Errorf("only %d of %d nodes under %s run; start the others (%s start N) or restart the cluster", up, Nodes, c.Base, c.Script)
}

// moduleRoot is the directory of payd's go.mod, above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// run runs the script with args and GALERA_BASE set to the cluster's.
func (c *Cluster) run(args ...string) error {
	cmd := exec.Command("bash", append([]string{c.Script}, args...)...)
	cmd.Env = append(os.Environ(), EnvBase+"="+c.Base)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", c.Script, strings.Join(args, " "), err, out)
	}
	return nil
}

// Port is node n's SQL port (n from 1).
func (c *Cluster) Port(n int) int { return 4306 + n - 1 }

// serverURL is node n's payd database URL without a database.
func (c *Cluster) serverURL(n int) string {
	return fmt.Sprintf("mysql://root:@127.0.0.1:%d/", c.Port(n))
}

// Pid is the process ID of node n's mariadbd, 0 when it is not running.
// Like the script, it trusts a pid file only when the process really is
// that node's server.
func (c *Cluster) Pid(n int) int {
	dir := filepath.Join(c.Base, fmt.Sprintf("node%d", n))
	for _, f := range []string{"mysqld.pid", "launch.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "--defaults-file="+filepath.Join(dir, "my.cnf")) {
			return pid
		}
	}
	return 0
}

// Kill ends node n's mariadbd with SIGKILL, as a crash or a pulled plug
// would, and waits until the process is gone.
func (c *Cluster) Kill(t testing.TB, n int) {
	t.Helper()
	pid := c.Pid(n)
	if pid == 0 {
		t.Fatalf("galeratest: node%d is not running", n)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("galeratest: kill node%d (pid %d): %v", n, pid, err)
	}
	for i := 0; i < 100 && c.Pid(n) != 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if c.Pid(n) != 0 {
		t.Fatalf("galeratest: node%d (pid %d) still runs after SIGKILL", n, pid)
	}
}

// Start starts node n again through the script and waits until it has
// rejoined the cluster and is Synced.
func (c *Cluster) Start(t testing.TB, n int) {
	t.Helper()
	if err := c.run("start", strconv.Itoa(n)); err != nil {
		t.Fatalf("galeratest: %v", err)
	}
	if err := c.waitReady(2 * time.Minute); err != nil {
		t.Fatalf("galeratest: %v", err)
	}
}

// waitReady waits until every node answers, is Synced and sees all three.
func (c *Cluster) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster under %s not ready after %v: %v", c.Base, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *Cluster) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for n := 1; n <= Nodes; n++ {
		db, err := repository.Open(ctx, c.serverURL(n))
		if err != nil {
			return fmt.Errorf("node%d: %v", n, err)
		}
		var st struct{ Size, State string }
		err = db.Gorm().WithContext(ctx).Raw(`SELECT
			(SELECT variable_value FROM information_schema.global_status WHERE variable_name = 'WSREP_CLUSTER_SIZE') AS size,
			(SELECT variable_value FROM information_schema.global_status WHERE variable_name = 'WSREP_LOCAL_STATE_COMMENT') AS state`).Scan(&st).Error
		db.Close()
		if err != nil {
			return fmt.Errorf("node%d: %v", n, err)
		}
		if st.Size != strconv.Itoa(Nodes) || st.State != "Synced" {
			return fmt.Errorf("node%d: cluster size %s, state %s", n, st.Size, st.State)
		}
	}
	return nil
}

// NewDatabase creates a fresh database payd_g_<random> on node 1, waits
// until every node has it (DDL replicates), and returns its payd database
// URL on each node, in node order. A cleanup drops it.
func (c *Cluster) NewDatabase(t testing.TB) [Nodes]string {
	t.Helper()
	ctx := context.Background()
	name := "payd_g_" + randomHex(8)
	if err := c.exec(ctx, 1, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("galeratest: %v", err)
	}
	t.Cleanup(func() {
		// Any live node will do: the drop replicates to the others.
		var err error
		for n := 1; n <= Nodes; n++ {
			if err = c.exec(ctx, n, "DROP DATABASE IF EXISTS "+name); err == nil {
				return
			}
		}
		t.Errorf("galeratest: drop %s: %v", name, err)
	})
	var urls [Nodes]string
	for i := range urls {
		urls[i] = fmt.Sprintf("mysql://root:@127.0.0.1:%d/%s", c.Port(i+1), name)
		deadline := time.Now().Add(30 * time.Second)
		for {
			db, err := repository.Open(ctx, urls[i])
			if err == nil {
				db.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("galeratest: database %s not on node%d: %v", name, i+1, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return urls
}

// exec runs one statement on node n without a default database.
func (c *Cluster) exec(ctx context.Context, n int, stmt string) error {
	db, err := repository.Open(ctx, c.serverURL(n))
	if err != nil {
		return fmt.Errorf("node%d: %v", n, err)
	}
	defer db.Close()
	if err := db.Gorm().WithContext(ctx).Exec(stmt).Error; err != nil {
		return fmt.Errorf("node%d: %v", n, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
