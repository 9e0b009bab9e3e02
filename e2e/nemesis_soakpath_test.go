package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSoakChartPath: PAYD_NEMESIS_SVG is given from the repository's root,
// as docs/reliability.md's command does, while go test runs ./e2e in its
// own folder; and a path that cannot be written is said before a
// 30-minute soak, not after it.
func TestSoakChartPath(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := soakChartPath("docs/reliability-soak.svg", "sqlite")
	if want := filepath.Join(root, "docs", "reliability-soak.svg"); err != nil || got != want {
		t.Errorf("soakChartPath(docs/…) = %q, %v; want %q", got, err, want)
	}
	abs := filepath.Join(t.TempDir(), "soak.svg")
	if got, err := soakChartPath(abs, "sqlite"); err != nil || got != abs {
		t.Errorf("soakChartPath(%s) = %q, %v; want it as given", abs, got, err)
	}
	if got, err := soakChartPath("", "sqlite"); err != nil || !strings.HasPrefix(got, os.TempDir()) {
		t.Errorf("soakChartPath(\"\") = %q, %v; want a file under %s", got, err, os.TempDir())
	}
	if _, err := soakChartPath(filepath.Join(t.TempDir(), "no-such-folder", "soak.svg"), "sqlite"); err == nil {
		t.Error("soakChartPath of a folder that does not exist = nil error, want the refusal before the soak")
	}
}
