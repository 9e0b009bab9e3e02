package telemetry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/payd/payd/domain"
)

// TestProviderOutcome: every way a provider call ends falls in the outcome
// label's fixed set, the way an operator reads it.
func TestProviderOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want ProviderOutcome
	}{
		{nil, "ok"},
		{fmt.Errorf("charge k: %w: %w", domain.ErrProviderUnavailable, context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("charge k: %w: %w", domain.ErrProviderUnavailable, context.Canceled), "canceled"},
		{fmt.Errorf("charge k: %w: status 503", domain.ErrProviderUnavailable), "unavailable"},
		{fmt.Errorf("get charge k: %w: %w", domain.ErrChargeNotFound, &domain.ProviderRequestError{StatusCode: 404}), "not_found"},
		{fmt.Errorf("refund k: %w", &domain.ProviderRequestError{StatusCode: 409, Code: "refund_exceeds_charge"}), "refused"},
		{errors.New("provider: base URL must be absolute"), "error"},
	} {
		if got := providerOutcome(c.err); got != c.want {
			t.Errorf("providerOutcome(%v) = %q, want %q", c.err, got, c.want)
		}
		if !slices.Contains(ProviderOutcomes, providerOutcome(c.err)) {
			t.Errorf("providerOutcome(%v) = %q, not in ProviderOutcomes", c.err, providerOutcome(c.err))
		}
	}
}
