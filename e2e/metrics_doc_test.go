package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPaymentResultsDocumented: every result the checkout reports to
// payd_payments_total (held included) is a label value the README's
// metrics table lists.
func TestPaymentResultsDocumented(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "service", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]bool{}
	observe := regexp.MustCompile(`s\.observe\(ctx, a, "([a-z_]+)"\)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range observe.FindAllStringSubmatch(string(b), -1) {
			results[m[1]] = true
		}
	}
	if !results["paid"] || !results["held"] {
		t.Fatalf("results found in service/ = %v, want paid and held among them (has s.observe changed?)", results)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, "| `payd_payments_total`") {
			row = line
		}
	}
	for r := range results {
		if !strings.Contains(row, "`"+r+"`") {
			t.Errorf("README's payd_payments_total row %q does not list result %s", row, r)
		}
	}
}
