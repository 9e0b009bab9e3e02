//go:build paydfault

package main

import (
	"os"
	"syscall"
)

// Test builds only (go build -tags paydfault): the crash tests kill payd,
// as kill -9 would, at a chosen step of a payment. A shipped binary has
// neither the flag nor the variable.

const faultBuild = true

func testSettings(c *config) []setting {
	return []setting{{"PAYD_TEST_FAULT", "test-fault", "", "tests only: kill -9 payd at after_claim, after_charge, before_settle_commit or after_settle_commit", &c.Fault, nil}}
}

// faultInjector kills the process when a payment reaches the named point.
func faultInjector(point string) func(string) {
	if point == "" {
		return nil
	}
	return func(at string) {
		if at == point {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; nothing more may happen
		}
	}
}
