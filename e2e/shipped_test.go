package e2e

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/payd/payd/internal/testdeps"
)

// shippedBinary is payd built as it ships: no build tags, VCS stamping on
// where git can provide it (whatever GOFLAGS says).
var shippedBinary struct {
	once sync.Once
	path string
	err  error
}

// shippedExecutable builds payd as it ships on first use and returns its
// path; without PAYD_TEST_FULL=1 it skips the test (the build is heavy).
func shippedExecutable(t *testing.T) string {
	t.Helper()
	testdeps.RequireFull(t, "builds payd as it ships")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available to build payd: " + err.Error())
	}
	shippedBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "payd-shipped-")
		if err != nil {
			shippedBinary.err = err
			return
		}
		shippedBinary.path = filepath.Join(dir, "payd")
		if out, err := exec.Command(goTool, "build", "-buildvcs=auto", "-o", shippedBinary.path, "../cmd/payd").CombinedOutput(); err != nil {
			shippedBinary.err = errors.New(string(out))
		}
	})
	if shippedBinary.err != nil {
		t.Fatalf("build payd: %v", shippedBinary.err)
	}
	return shippedBinary.path
}

// TestShippedBinaryCLI runs the binary a user gets: help exits 0 and never
// mentions the fault or the mutant switch, which it does not accept; version prints the
// VCS revision, as --version does; a command line payd cannot take exits 2
// with the usage, if any, on stderr; other errors exit 1.
func TestShippedBinaryCLI(t *testing.T) {
	exe := shippedExecutable(t)
	tests := []struct {
		args     []string
		exit     int
		want     string
		absent   string
		inStderr bool
	}{
		{[]string{"-h"}, 0, "\n  demo ", "test-fault", false},
		{[]string{"--help"}, 0, "\n  version ", "test-fault", false},
		{[]string{"help", "serve"}, 0, "-admin-token", "test-fault", false},
		{[]string{"serve", "-h"}, 0, "-admin-token", "test-fault", false},
		{[]string{"sandbox", "--help"}, 0, "-sandbox-addr", "-admin-token", false},
		{[]string{"version"}, 0, "github.com/payd/payd", "", false},
		{[]string{"--version"}, 0, "github.com/payd/payd", "", false},
		{[]string{"-version"}, 0, "github.com/payd/payd", "", false},
		{[]string{"serve", "-test-fault", "after_claim"}, 2, "flag provided but not defined: -test-fault", "", true},
		{[]string{"serve", "-test-mutant", "claim_unguarded"}, 2, "flag provided but not defined: -test-mutant", "", true},
		{[]string{"serve", "-test-mutant", "refund_unguarded"}, 2, "flag provided but not defined: -test-mutant", "", true},
		{[]string{"serve", "-h"}, 0, "-admin-token", "test-mutant", false},
		{[]string{"bogus"}, 2, "unknown command", "", true},
		{[]string{"admin"}, 2, "usage: payd admin", "", true},
		{[]string{"serve", "-lease", "abc"}, 2, `payd: -lease: "abc" is not a duration such as 30s`, "", true},
		{[]string{"migrate", "up", "-database-url", "sqlite:///no/such/dir/x.db"}, 1, "does not exist", "out of memory", true},
	}
	for _, tt := range tests {
		cmd := exec.Command(exe, tt.args...)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		got, text := cmd.ProcessState.ExitCode(), out.String()
		if tt.inStderr {
			text = errOut.String()
		}
		name := "payd " + strings.Join(tt.args, " ")
		if got != tt.exit {
			t.Errorf("%s exited %d, want %d\nstdout:\n%s\nstderr:\n%s", name, got, tt.exit, out.String(), errOut.String())
		}
		if !strings.Contains(text, tt.want) || tt.absent != "" && strings.Contains(out.String()+errOut.String(), tt.absent) {
			t.Errorf("%s printed:\n%s\nwant %q and no %q", name, text, tt.want, tt.absent)
		}
	}
	// The revision the toolchain stamped (none from a git worktree, whose
	// .git is a file, or with -buildvcs=false) is the one payd prints.
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	want := "revision  unknown"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			want = "revision  " + s.Value
		}
	}
	if out, _ := exec.Command(exe, "version").Output(); !strings.Contains(string(out), want) || !strings.Contains(string(out), bi.Main.Path) {
		t.Errorf("payd version = %q, want %q and the module %s", out, want, bi.Main.Path)
	}
}
