//go:build !linux

package chaos

import (
	"os/exec"
	"syscall"
)

// spawn starts cmd in a process group of its own. Without Linux's
// parent-death signal a child may outlive a harness that is killed; the
// cluster mode needs Linux anyway (internal/testserver).
func spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}
