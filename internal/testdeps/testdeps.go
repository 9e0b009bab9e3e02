// Package testdeps says what payd's tests did not test. A test that skips
// for want of an outside program or server (MySQL, Redis, Chromium,
// stripe-mock, helm, a Galera cluster) skips through Skip, which records
// it; Main, the TestMain of each package whose tests may skip so, prints
// one line per missing dependency once the package's tests are done:
//
//	payd tests: ./repository skipped 41 without MySQL/MariaDB: set PAYD_TEST_MYSQL_DSN (e.g. mysql://root:@127.0.0.1:3306/test)
//
// `go test ./...` shows nothing of a passing package but its "ok" line, so
// the lines go to the terminal (/dev/tty) when there is one, and to the
// test's output otherwise (shown with -v, or when the package fails).
// Nothing is printed when nothing was skipped. A package whose result
// is cached is not run, and prints nothing: -count=1 runs it again.
package testdeps

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Dep is something outside payd that some tests need.
type Dep struct {
	Name   string // what is missing, e.g. "MySQL/MariaDB"
	Enable string // what to do to have those tests run
}

// The dependencies payd's tests skip without.
var (
	MySQL      = Dep{"MySQL/MariaDB", "set PAYD_TEST_MYSQL_DSN (e.g. mysql://root:@127.0.0.1:3306/test)"}
	Redis      = Dep{"redis-server", "install it (apt-get install redis-server); PAYD_TEST_REQUIRE_REDIS=1 fails instead"}
	Chromium   = Dep{"Chromium", "install it (apt-get install chromium) or set PAYD_TEST_CHROMIUM; PAYD_TEST_REQUIRE_BROWSER=1 fails instead"}
	StripeMock = Dep{"stripe-mock", "set STRIPE_MOCK_BIN, or PAYD_TEST_REQUIRE_STRIPE_MOCK=1 to have it installed"}
	Helm       = Dep{"helm", "it is built with go run from the module proxy, which failed; PAYD_TEST_REQUIRE_HELM=1 fails instead"}
	Galera     = Dep{"a Galera cluster", "set PAYD_TEST_GALERA=1 to use or start the one of scripts/galera.sh"}
)

// Skip records that t skips for want of d, then skips t with msg.
func Skip(t testing.TB, d Dep, msg string) {
	t.Helper()
	std.skip(t, d, msg)
}

// Main runs the package's tests, prints what they skipped for want of a
// dependency and exits: func TestMain(m *testing.M) { testdeps.Main(m) }.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with work of its own after the tests: it
// returns m.Run's exit code instead of exiting.
func Run(m *testing.M) int {
	std.mu.Lock()
	std.wrapped = true
	std.mu.Unlock()
	code := m.Run()
	w, done := terminal()
	defer done()
	std.report(w)
	return code
}

// std is the package's recorder: every Skip of the test binary.
var std = &recorder{pkg: packageDir(), out: terminal}

// recorder counts skips by dependency, in the order they were first met.
type recorder struct {
	pkg string                     // the package, as ./dir
	out func() (io.Writer, func()) // where a line goes when said at once

	mu      sync.Mutex
	wrapped bool // Run will report at the end
	order   []Dep
	counts  map[Dep]int
}

func (r *recorder) skip(t testing.TB, d Dep, msg string) {
	t.Helper()
	r.record(d)
	t.Skip(msg)
}

// record counts one skip of d. Without Run to report at the end (a
// package without testdeps' TestMain), the first skip of each dependency
// is said at once instead.
func (r *recorder) record(d Dep) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[Dep]int{}
	}
	if r.counts[d] == 0 {
		r.order = append(r.order, d)
		if !r.wrapped {
			w, done := r.out()
			fmt.Fprintf(w, "payd tests: %s skipped tests without %s: %s\n", r.pkg, d.Name, d.Enable)
			done()
		}
	}
	r.counts[d]++
}

// report writes one line per dependency something skipped without, and
// nothing when nothing was skipped.
func (r *recorder) report(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.order {
		n := r.counts[d]
		what := fmt.Sprintf("%d tests", n)
		if n == 1 {
			what = "1 test"
		}
		fmt.Fprintf(w, "payd tests: %s skipped %s without %s: %s\n", r.pkg, what, d.Name, d.Enable)
	}
}

// terminal is where the lines go: the test's output with -v (it is shown
// then), else the terminal if there is one (go test ./... shows nothing
// else of a passing package), else the test's output.
func terminal() (io.Writer, func()) {
	if !testing.Verbose() {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			return tty, func() { tty.Close() }
		}
	}
	return os.Stdout, func() {}
}

// packageDir names the package under test as ./dir from the module root:
// go test runs a test binary in its package's directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}
