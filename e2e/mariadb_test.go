package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The database restart test (dbrestart_test.go) stops and starts the local
// MariaDB server itself, as an operator restarting it would. That server is
// shared by every test package, so the test runs only when asked
// (PAYD_TEST_DB_RESTART=1) and, in .ci/run, alone after the other tests.

// mariadbd is the server binary start-stop-daemon starts and watches.
const mariadbd = "/usr/sbin/mariadbd"

// mariaDBWait bounds how long a stop or a start may take.
const mariaDBWait = 60 * time.Second

// mariaDB controls the local MariaDB server (root over the Unix socket, as
// .ci/run does).
type mariaDB struct {
	// pidFile is the server's own pid file (@@pid_file): other mariadbd
	// processes on the machine (a test cluster on other ports) run the same
	// binary, so the binary alone does not say which server is ours.
	pidFile string
}

// localMariaDB checks that the server can be controlled from here and is up,
// and makes sure it is running again when the test ends, whatever happened.
func localMariaDB(t *testing.T) *mariaDB {
	t.Helper()
	for _, tool := range []string{"mysqladmin", "start-stop-daemon"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("PAYD_TEST_DB_RESTART=1 needs %s to restart the server: %v", tool, err)
		}
	}
	if _, err := os.Stat(mariadbd); err != nil {
		t.Fatalf("PAYD_TEST_DB_RESTART=1 needs the server binary: %v", err)
	}
	m := &mariaDB{}
	if !m.answers() {
		t.Fatal("MariaDB does not answer mysqladmin ping before the test")
	}
	out, err := exec.Command("mysql", "-uroot", "-N", "-e", "SELECT @@pid_file").Output()
	if m.pidFile = strings.TrimSpace(string(out)); err != nil || m.pidFile == "" {
		t.Fatalf("MariaDB's pid file: %q, %v", out, err)
	}
	m.restoreOnCleanup(t)
	return m
}

// restoreOnCleanup starts the server again, if it is down, when t ends. Cleanups run last-registered first, so calling this after
// starting payd and creating the databases restores the server before
// payd's graceful stop (which releases leases in the database) and before
// the test databases are dropped.
func (m *mariaDB) restoreOnCleanup(t *testing.T) {
	t.Cleanup(func() {
		if m.answers() {
			return
		}
		if err := m.start(); err != nil {
			t.Errorf("restore MariaDB after the test: %v", err)
		}
	})
}

// answers reports whether the server answers a ping.
func (m *mariaDB) answers() bool {
	return exec.Command("mysqladmin", "-uroot", "--connect-timeout=2", "ping").Run() == nil
}

// running reports whether a mariadbd process still exists; until it has
// gone, start-stop-daemon --start would take it for the running server.
func (m *mariaDB) running() bool {
	return exec.Command("start-stop-daemon", "--status", "--pidfile", m.pidFile, "--exec", mariadbd).Run() == nil
}

// stop shuts the server down and waits until it is gone. It reports
// instead of failing the test, so a goroutine other than the test's may
// call it.
func (m *mariaDB) stop() error {
	if out, err := exec.Command("mysqladmin", "-uroot", "shutdown").CombinedOutput(); err != nil {
		return fmt.Errorf("mysqladmin shutdown: %v\n%s", err, out)
	}
	if !within(mariaDBWait, func() bool { return !m.running() && !m.answers() }) {
		return fmt.Errorf("MariaDB did not stop within %v", mariaDBWait)
	}
	return nil
}

// start starts the server and waits until it answers.
func (m *mariaDB) start() error {
	cmd := exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--pidfile", m.pidFile, "--exec", mariadbd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start-stop-daemon --start: %v\n%s", err, out)
	}
	if !within(mariaDBWait, m.answers) {
		return fmt.Errorf("MariaDB did not answer within %v", mariaDBWait)
	}
	return nil
}

// mustStop and mustStart are stop and start on the test's goroutine.
func (m *mariaDB) mustStop(t *testing.T) {
	t.Helper()
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
}

func (m *mariaDB) mustStart(t *testing.T) {
	t.Helper()
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
}
