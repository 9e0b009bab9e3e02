//go:build paydfault

package repository

// UnmutateStock puts the stock take's guard back (Mutate has no undo: a
// mutant payd keeps its mutant); a test that mutated it undoes it so.
func UnmutateStock() { stockUnguarded.Store(false) }
