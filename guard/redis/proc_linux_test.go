package redis

import "syscall"

// serverProcAttr makes the kernel kill redis-server if the test binary dies
// without stopping it (a panic, a test timeout).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
