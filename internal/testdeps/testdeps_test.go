package testdeps

import (
	"bytes"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain reports as every skipping package's does, for TestFakeSkip.
func TestMain(m *testing.M) { Main(m) }

func newRecorder(wrapped bool) (*recorder, *bytes.Buffer) {
	var said bytes.Buffer
	return &recorder{pkg: "./somepkg", wrapped: wrapped, out: func() (io.Writer, func()) { return &said, func() {} }}, &said
}

func TestReportSaysNothingWhenNothingSkipped(t *testing.T) {
	r, said := newRecorder(true)
	var out bytes.Buffer
	r.report(&out)
	if out.Len() != 0 || said.Len() != 0 {
		t.Errorf("report with no skip wrote %q (and %q at once), want nothing", out.String(), said.String())
	}
}

// TestReportOneLinePerDependency: each dependency is named once, in the
// order first met, with its count and what enables its tests.
func TestReportOneLinePerDependency(t *testing.T) {
	r, said := newRecorder(true)
	for _, d := range []Dep{MySQL, Redis, MySQL, MySQL} {
		r.record(d)
	}
	var out bytes.Buffer
	r.report(&out)
	want := "payd tests: skipped tests without MySQL/MariaDB (3 in ./somepkg, the first package to skip for it): set PAYD_TEST_MYSQL_DSN (e.g. mysql://root:@127.0.0.1:3306/test)\n" +
		"payd tests: skipped tests without redis-server (1 in ./somepkg, the first package to skip for it): install it (apt-get install redis-server); PAYD_TEST_REQUIRE_REDIS=1 fails instead\n"
	if out.String() != want {
		t.Errorf("report =\n%s\nwant\n%s", out.String(), want)
	}
	if said.Len() != 0 {
		t.Errorf("under Run, a skip was said at once: %q", said.String())
	}
}

// TestSkipRecordsAndSkips: Skip skips the test and counts it.
func TestSkipRecordsAndSkips(t *testing.T) {
	r, _ := newRecorder(true)
	var skipped, after bool
	t.Run("needs-stripe-mock", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		r.skip(t, StripeMock, "no stripe-mock")
		after = true
	})
	if !skipped || after {
		t.Errorf("skip: skipped %v, went on %v; want skipped and stopped", skipped, after)
	}
	if r.counts[StripeMock] != 1 || len(r.order) != 1 {
		t.Errorf("recorded %v, want one skip for stripe-mock", r.counts)
	}
}

// TestRequireFull: a heavy test runs with PAYD_TEST_FULL=1 and skips,
// counted, without it.
func TestRequireFull(t *testing.T) {
	for _, c := range []struct {
		env  string
		skip bool
	}{{"", true}, {"0", true}, {"1", false}} {
		r, _ := newRecorder(true)
		var skipped, after bool
		t.Run("PAYD_TEST_FULL="+c.env, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			r.requireFull(t, func(k string) string { return map[string]string{EnvFull: c.env}[k] }, "builds payd")
			after = true
		})
		if skipped != c.skip || after == c.skip {
			t.Errorf("PAYD_TEST_FULL=%q: skipped %v, went on %v; want skipped %v", c.env, skipped, after, c.skip)
		}
		if want := map[bool]int{true: 1}[c.skip]; r.counts[Full] != want {
			t.Errorf("PAYD_TEST_FULL=%q: recorded %v, want %d skips for the switch", c.env, r.counts, want)
		}
	}
}

// TestWithoutRunFirstSkipIsSaidAtOnce: in a package whose TestMain is not
// Run's, nobody reports at the end, so each dependency's first skip is
// said when it happens, and only that one.
func TestWithoutRunFirstSkipIsSaidAtOnce(t *testing.T) {
	r, said := newRecorder(false)
	r.record(Chromium)
	r.record(Chromium)
	want := "payd tests: skipped tests without Chromium (in ./somepkg, the first package to skip for it): " + Chromium.Enable + "\n"
	if said.String() != want {
		t.Errorf("said %q, want %q", said.String(), want)
	}
}

// TestOneLinePerDependencyPerRun: of the packages of one run (one marker
// folder), only the first to report a dependency says its line; another
// run (another folder) says it again, and without a folder every package
// says its own.
func TestOneLinePerDependencyPerRun(t *testing.T) {
	run := t.TempDir()
	var out bytes.Buffer
	for _, pkg := range []string{"./a", "./b"} {
		r := &recorder{pkg: pkg, wrapped: true, first: func(d Dep) bool { return firstIn(run, d) }}
		r.record(MySQL)
		r.record(Chromium)
		if pkg == "./b" {
			r.record(Redis)
		}
		r.report(&out)
	}
	want := "payd tests: skipped tests without MySQL/MariaDB (1 in ./a, the first package to skip for it): " + MySQL.Enable + "\n" +
		"payd tests: skipped tests without Chromium (1 in ./a, the first package to skip for it): " + Chromium.Enable + "\n" +
		"payd tests: skipped tests without redis-server (1 in ./b, the first package to skip for it): " + Redis.Enable + "\n"
	if out.String() != want {
		t.Errorf("two packages of one run reported\n%s\nwant\n%s", out.String(), want)
	}
	if !firstIn(t.TempDir(), MySQL) || !firstIn("", MySQL) || !firstIn("", MySQL) {
		t.Error("another run, or no run folder, did not say the line again")
	}
}

func TestPackageDirIsFromTheModuleRoot(t *testing.T) {
	if got := packageDir(); got != "./internal/testdeps" {
		t.Errorf("packageDir() = %q, want ./internal/testdeps", got)
	}
}

// TestSkippingPackagesReportAtTheEnd: every package whose tests use a
// helper that skips through Skip (or Skip itself) has a TestMain that
// reports through Main or Run, so its lines come once, at its end.
func TestSkippingPackagesReportAtTheEnd(t *testing.T) {
	const mod = "github.com/payd/payd/"
	helpers := map[string]bool{}
	for _, p := range []string{"internal/dbtest", "internal/redistest", "internal/galeratest", "sandbox/sandboxtest", "internal/testdeps"} {
		helpers[mod+p] = true
	}
	root := filepath.Join("..", "..")
	needs := map[string]bool{} // dir -> uses a helper
	reports := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		if rel, _ := filepath.Rel(root, dir); helpers[mod+filepath.ToSlash(rel)] && rel != filepath.Join("internal", "testdeps") {
			needs[dir] = true // a helper's own tests skip through it
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); helpers[p] {
				needs[dir] = true
			}
		}
		if bytes.Contains(src, []byte("func TestMain(")) && (bytes.Contains(src, []byte("testdeps.Main(")) || bytes.Contains(src, []byte("testdeps.Run("))) {
			reports[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(needs) < 10 {
		t.Fatalf("found %d packages using the skipping helpers, want the store, e2e and the others", len(needs))
	}
	for dir := range needs {
		if !reports[dir] {
			t.Errorf("%s: its tests may skip through testdeps, but no TestMain calls testdeps.Main or testdeps.Run", dir)
		}
	}
}
