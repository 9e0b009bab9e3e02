//go:build !paydfault

package cli

// faultBuild: this test binary is built as payd ships, without the test
// build's kill-point and mutant flags.
const faultBuild = false
