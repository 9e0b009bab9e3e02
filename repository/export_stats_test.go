package repository

import "github.com/payd/payd/domain"

// StatsWindowReads are the overview's two reads of a window, by name, for
// tests of their query plans.
func StatsWindowReads() map[string]string {
	return map[string]string{
		"attempts by hour": statsAttempts[domain.BucketHour], "attempts by day": statsAttempts[domain.BucketDay],
		"ledger by hour": statsLedger[domain.BucketHour], "ledger by day": statsLedger[domain.BucketDay],
	}
}
