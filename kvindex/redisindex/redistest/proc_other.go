//go:build !linux

package redistest

import (
	"os"
	"os/exec"
)

var terminate = os.Interrupt

// killWithParent does nothing where the kernel cannot tie the server's life
// to the test binary's.
func killWithParent(*exec.Cmd) {}
