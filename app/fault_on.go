//go:build paydfault

package app

import (
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// Test builds only (go build -tags paydfault): the crash tests kill payd,
// as kill -9 would, at a chosen step of a payment, and the nemesis's
// mutant check runs payd with a guard removed to prove its checker
// notices, and its merchant deliveries go through a link of each
// replica's own (PAYD_TEST_NOTIFY_VIA). A shipped binary has neither the flags nor the variables.

const faultBuild = true

func testSettings(c *Config) []setting {
	return []setting{
		{"PAYD_TEST_FAULT", "test-fault", "", "tests only: kill -9 payd at after_claim, after_charge, before_settle_commit, after_settle_commit, notify_before_send, order_stock_taken, order_created, order_shipped, shipment_made, hold_claimed, hold_sent, hold_settled or reconcile_page_saved", &c.Fault, nil},
		{"PAYD_TEST_MUTANT", "test-mutant", "", "tests only: remove a guard (claim_unguarded, refund_unguarded or stock_unguarded; see repository.Mutate)", &c.Mutant, nil},
		{"PAYD_TEST_NOTIFY_VIA", "test-notify-via", "", "tests only: every delivery to a merchant endpoint connects to this host:port (the nemesis's per-replica link)", &c.NotifyVia, nil},
	}
}

// crashAt makes payd kill itself when a payment or an order's creation
// reaches point: the service's points (service.CrashAt) and those inside
// the repository's transactions (repository.CrashAt).
func crashAt(point string) {
	service.CrashAt(point)
	repository.CrashAt(point)
}

// mutate removes the named guard (repository.Mutate); "" removes none.
func mutate(name string) error { return repository.Mutate(name) }
