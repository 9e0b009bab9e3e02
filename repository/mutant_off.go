//go:build !paydfault

package repository

// The shipped build: every guard stays (see mutant_on.go).

func mutantClaim() bool { return false }

const claimOrderUnguarded = ""

func mutantStock() bool { return false }

const takeStockUnguarded = ""
