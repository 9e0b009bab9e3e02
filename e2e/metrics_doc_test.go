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
