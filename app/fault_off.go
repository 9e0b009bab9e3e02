//go:build !paydfault

package app

// The shipped build: no fault injection and no mutants (see fault_on.go).

const faultBuild = false

func testSettings(*Config) []setting { return nil }

func crashAt(string) {}

func mutate(string) error { return nil }
