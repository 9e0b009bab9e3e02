//go:build !paydfault

package main

// The shipped build: no fault injection (see fault_on.go).

const faultBuild = false

func testSettings(*config) []setting { return nil }

func crashAt(string) {}
