//go:build !paydfault

package app

// The shipped build: no fault injection (see fault_on.go).

const faultBuild = false

func testSettings(*Config) []setting { return nil }

func crashAt(string) {}
