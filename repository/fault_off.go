//go:build !paydfault

package repository

// fault marks a step inside a transaction where a test build may crash
// payd (see fault_on.go); in the shipped build it does nothing and costs
// nothing.
func fault(string) {}
