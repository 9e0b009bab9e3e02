//go:build unix

package testdeps

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestLineShowsWithoutVerboseOrTerminal: go test without -v, its output a
// pipe and no terminal (as in CI), shows a package's skip line although
// the package passed: it goes to the go command's stderr.
func TestLineShowsWithoutVerboseOrTerminal(t *testing.T) {
	if os.Getenv("PAYD_TESTDEPS_CHILD") == "1" {
		return // the child's TestFakeSkip does the skipping
	}
	if testing.Short() {
		t.Skip("runs go test: not in -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	cmd := exec.Command(goTool, "test", "-count=1", "-run", "^TestFakeSkip$", ".")
	cmd.Env = append(os.Environ(), "PAYD_TESTDEPS_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal: no /dev/tty
	out, err := cmd.CombinedOutput()                     // one pipe, as CI's 2>&1 | tee
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	want := "payd tests: skipped tests without a fake dependency (1 in ./internal/testdeps, the first package to skip for it): nothing to do\n"
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "ok ") {
		t.Errorf("go test without -v or a terminal printed\n%s\nwant the package's ok and\n%s", out, want)
	}
}

// TestFakeSkip skips for a fake dependency when TestLineShowsWithoutVerboseOrTerminal
// runs it in a go test of its own, and does nothing otherwise.
func TestFakeSkip(t *testing.T) {
	if os.Getenv("PAYD_TESTDEPS_CHILD") == "1" {
		Skip(t, Dep{"a fake dependency", "nothing to do"}, "fake")
	}
}
