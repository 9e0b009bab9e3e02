package domain

import (
	"slices"
	"testing"
)

// TestNextAttempt walks every (status, event) pair of the attempt state
// machine: the legal ones must lead where ADR 0010 says, every other pair
// must be refused, and From and To must agree with NextAttempt.
func TestNextAttempt(t *testing.T) {
	legal := map[AttemptStatus]map[AttemptEvent]AttemptStatus{
		AttemptStarted: {AttemptReplyLost: AttemptUnknown, AttemptCharged: AttemptSucceeded, AttemptNotCharged: AttemptFailed,
			AttemptMismatched: AttemptHeld, AttemptApplied: AttemptSucceeded},
		AttemptUnknown: {AttemptCharged: AttemptSucceeded, AttemptNotCharged: AttemptFailed, AttemptMismatched: AttemptHeld,
			AttemptApplied: AttemptSucceeded},
		AttemptFailed: {AttemptChargedLate: AttemptSucceeded, AttemptApplied: AttemptSucceeded},
		AttemptHeld:   {AttemptChargedLate: AttemptSucceeded, AttemptRejected: AttemptFailed},
	}
	for _, from := range AttemptStatuses {
		for _, ev := range AttemptEvents {
			want, ok := legal[from][ev]
			got, allowed := NextAttempt(from, ev)
			if allowed != ok || got != want {
				t.Errorf("NextAttempt(%s, %s) = %q, %v; want %q, %v", from, ev, got, allowed, want, ok)
			}
			if slices.Contains(ev.From(), from) != ok || (ok && ev.To() != want) {
				t.Errorf("%s: From() = %v, To() = %q; disagrees with %s → %q", ev, ev.From(), ev.To(), from, want)
			}
		}
	}
	if got, ok := NextAttempt(AttemptStarted, "nope"); ok || got != "" {
		t.Errorf("NextAttempt(started, nope) = %q, %v; want \"\", false", got, ok)
	}
}
