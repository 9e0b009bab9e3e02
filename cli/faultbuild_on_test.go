//go:build paydfault

package cli

// faultBuild: this test binary is a test build (-tags paydfault), whose
// serve has the kill-point and mutant flags a shipped binary lacks.
const faultBuild = true
