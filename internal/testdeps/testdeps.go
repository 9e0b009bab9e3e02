// Package testdeps says what payd's tests did not test. A test that skips
// for want of an outside program or server (MySQL, Redis, Chromium,
// stripe-mock, helm, a Galera cluster) skips through Skip, which records
// it; Main, the TestMain of each package whose tests may skip so, prints
// one line per missing dependency when the package's tests are done, and
// only the first package of a `go test` run to skip for a dependency
// prints its line, so the whole run says each once:
//
//	payd tests: skipped tests without MySQL/MariaDB (41 in ./repository, the first package to skip for it): set PAYD_TEST_MYSQL_DSN (e.g. mysql://root:@127.0.0.1:3306/test)
//
// Once per run, not at its end: the go command runs each package's test
// binary on its own and has nothing that runs after the last one, and no
// package knows it is the last, so a line comes when the first package
// that skipped for its dependency ends. The packages of one run agree on
// who was first through marker files in a folder named after the go
// command that runs them (its process ID and start time, from /proc, so
// a later run whose go command gets the same ID starts afresh). Where
// /proc is missing (not Linux) there is no marker: each package prints
// its own lines, as a package run on its own does.
//
// `go test ./...` shows nothing of a passing package but its "ok" line,
// and without -v the test binary's output is the go command's to hide.
// So the line goes to the go command's own stderr (/proc/PPID/fd/2) when
// that is a terminal or a pipe (a CI log: `go test ./... 2>&1 | tee`),
// where it shows beside the "ok" lines with or without a terminal; never
// when it is a file, where writing through another descriptor would
// overwrite what the go command wrote. Else it goes to the terminal
// (/dev/tty) when there is one, else to the test's output (shown with -v,
// or when the package fails). With -v it is the test's output. Nothing is
// printed when nothing was skipped. A package whose result is cached is
// not run, and prints nothing: -count=1 runs it again.
package testdeps

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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
	// Full is not a program but a switch: the heavy tests (RequireFull)
	// run only when it is on.
	Full = Dep{"the full-suite switch", "set " + EnvFull + "=1 for the heavy tests: built payd binaries, the Helm chart, faults, long loads (.ci/run sets it)"}
)

// EnvFull is the switch of the heavy tests: those that build payd
// binaries, render the Helm chart, inject faults or run for many seconds.
// A plain `go test ./...` leaves it off and skips them, to stay within a
// few minutes on a small machine; CI (.ci/run) turns it on, and fails if
// anything skipped for want of it.
const EnvFull = "PAYD_TEST_FULL"

// RequireFull skips t, a heavy test, unless PAYD_TEST_FULL=1; why says
// what makes it heavy ("builds payd").
func RequireFull(t testing.TB, why string) {
	t.Helper()
	std.requireFull(t, os.Getenv, why)
}

func (r *recorder) requireFull(t testing.TB, getenv func(string) string, why string) {
	t.Helper()
	if getenv(EnvFull) != "1" {
		r.skip(t, Full, fmt.Sprintf("heavy (%s): runs with %s=1", why, EnvFull))
	}
}

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
var std = &recorder{pkg: packageDir(), out: terminal, first: func(d Dep) bool { return firstIn(runFolder(), d) }}

// recorder counts skips by dependency, in the order they were first met.
type recorder struct {
	pkg string                     // the package, as ./dir
	out func() (io.Writer, func()) // where a line goes when said at once
	// first reports whether this package is the run's first to say d's
	// line (nil: always); runMarkers is the run's.
	first func(d Dep) bool

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
		if !r.wrapped && r.isFirst(d) {
			w, done := r.out()
			fmt.Fprintf(w, "payd tests: skipped tests without %s (in %s, the first package to skip for it): %s\n", d.Name, r.pkg, d.Enable)
			done()
		}
	}
	r.counts[d]++
}

// report writes one line per dependency something skipped without, of
// those no earlier package of the run has said, and nothing when nothing
// was skipped.
func (r *recorder) report(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.order {
		if !r.isFirst(d) {
			continue
		}
		fmt.Fprintf(w, "payd tests: skipped tests without %s (%d in %s, the first package to skip for it): %s\n", d.Name, r.counts[d], r.pkg, d.Enable)
	}
}

func (r *recorder) isFirst(d Dep) bool { return r.first == nil || r.first(d) }

// terminal is where the lines go: the test's output with -v (it is shown
// then), else the go command's stderr when it is a terminal or a pipe,
// else the terminal if there is one, else the test's output.
func terminal() (io.Writer, func()) {
	if testing.Verbose() {
		return os.Stdout, func() {}
	}
	if f := parentStderr(); f != nil {
		return f, func() { f.Close() }
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return tty, func() { tty.Close() }
	}
	return os.Stdout, func() {}
}

// parentStderr opens the go command's stderr (the test binary's parent
// is the go command that runs it), nil unless the parent is go and its
// stderr a terminal or a pipe: a regular file opened again has an offset
// of its own, and a line written there would overwrite the go command's.
func parentStderr() *os.File {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	path := fmt.Sprintf("/proc/%d/fd/2", ppid)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}

// firstIn reports whether this package is the first of its go test run
// to say d's line: it creates d's marker in dir, the run's folder, and
// another package's marker already there means no. Without a folder
// (no /proc to tell the run by, or none could be made) every package is
// first: a line too many, never one lost.
func firstIn(dir string, d Dep) bool {
	if dir == "" {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, markerName(d)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false
	}
	if err == nil {
		f.Close()
	}
	return true
}

// markerName is d's marker file: its name in letters and digits.
func markerName(d Dep) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, d.Name)
}

const runFolderPrefix = "payd-testdeps-"

// runFolder is the folder of markers of the go command that runs this
// test binary, made if need be, named by the command's process ID and
// start time; "" without /proc. Making it removes the folders of go
// commands that have ended.
func runFolder() string {
	ppid := os.Getppid()
	started, ok := startTime(ppid)
	if !ok {
		return ""
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%s", runFolderPrefix, ppid, started))
	if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
		return dir
	} else if err != nil {
		return ""
	}
	removeEndedRuns()
	return dir
}

// startTime is process pid's start time, in clock ticks since boot
// (/proc/PID/stat, field 22), which tells it from a later process with
// the same ID.
func startTime(pid int) (string, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	_, rest, ok := strings.Cut(string(raw), ") ") // after the command, which may hold spaces
	fields := strings.Fields(rest)
	if !ok || len(fields) < 20 {
		return "", false
	}
	return fields[19], true // field 22 of the line; rest starts at field 3
}

// removeEndedRuns removes the marker folders of go commands that no
// longer run (or whose ID a later process has).
func removeEndedRuns() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), runFolderPrefix)
		pid, started, ok2 := strings.Cut(name, "-")
		if !ok || !ok2 || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil {
			continue
		}
		if now, alive := startTime(n); !alive || now != started {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
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
