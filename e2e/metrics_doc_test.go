package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payd/payd/service"
)

// TestPaymentResultsDocumented: every result the checkout reports to
// payd_payments_total (held included) is a label value the README's
// metrics table lists.
func TestPaymentResultsDocumented(t *testing.T) {
	results := map[string]bool{}
	for _, r := range service.PaymentOutcomes {
		results[string(r)] = true
	}
	if !results["paid"] || !results["held"] {
		t.Fatalf("service.PaymentOutcomes = %v, want paid and held among them", results)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
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

// TestMetricsDocumented: every payd_* metric a fresh payd exports (Redis
// configured, every labelled series at 0) is named in the README.
func TestMetricsDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range freshScrape(t) {
		if !strings.HasPrefix(name, "payd_") {
			continue
		}
		n++
		if !strings.Contains(string(readme), "`"+name+"`") && !strings.Contains(string(readme), "`"+name+"{") {
			t.Errorf("README does not name the metric %s", name)
		}
	}
	if n < 10 {
		t.Fatalf("a fresh scrape has %d payd_* metrics, want the whole set", n)
	}
}
