//go:build paydfault

package app

import "github.com/payd/payd/service"

// Test builds only (go build -tags paydfault): the crash tests kill payd,
// as kill -9 would, at a chosen step of a payment. A shipped binary has
// neither the flag nor the variable.

const faultBuild = true

func testSettings(c *Config) []setting {
	return []setting{{"PAYD_TEST_FAULT", "test-fault", "", "tests only: kill -9 payd at after_claim, after_charge, before_settle_commit or after_settle_commit", &c.Fault, nil}}
}

// crashAt makes payd kill itself when a payment reaches point (service.CrashAt).
func crashAt(point string) { service.CrashAt(point) }
