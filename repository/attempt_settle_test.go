package repository

import (
	"testing"

	"github.com/payd/payd/domain"
)

// TestAttemptSettleNeedsAStatus: a settlement the attempt table gives no
// status to move from is a mistake, refused when its statement is built
// at start-up, not a guard that refuses at run time.
func TestAttemptSettleNeedsAStatus(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("settleAttempt(from nothing) did not panic")
		}
	}()
	_ = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptEvent("nope")))
}
