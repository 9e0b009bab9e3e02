//go:build !linux

package e2e

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: there a test
// binary that dies mid-test may leave its payd processes running.
func dieWithParent(*exec.Cmd) {}
