package redistest

import (
	"os/exec"
	"syscall"
)

var terminate = syscall.SIGTERM

// killWithParent makes the kernel kill the server if the test binary dies
// without stopping it.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
