package domain

import "github.com/google/uuid"

// ValidID reports whether s can be the id of a payd row: orders, payment
// attempts, refunds, discrepancies and reconciliation runs are all UUIDs
// in their canonical 36-character form (payd makes them with UUIDv7). An
// id from a URL is checked with it before anything else happens, so that
// text no row can have — too long, not UTF-8, not a UUID — never reaches
// a database, where each dialect would refuse it differently.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}
