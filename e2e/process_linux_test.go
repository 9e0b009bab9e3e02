package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill a payd process if the test binary
// dies first (a -timeout panic runs no cleanup), so none is left running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
