package repository

import (
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

// TestAttemptSettleNeedsAStatus: a settlement the attempt table gives no
// status to move from is a mistake, reported as an error, not a guard that
// refused. It fails before the store is touched.
func TestAttemptSettleNeedsAStatus(t *testing.T) {
	s := &AttemptStore{}
	if _, err := s.settle(t.Context(), domain.AttemptEvent("nope"), "nope", "a", "", "", time.Unix(0, 0)); err == nil {
		t.Errorf("settle(from nothing) = nil error, want an error")
	}
}
