//go:build !linux

package testserver

import (
	"context"
	"fmt"
	"syscall"
)

// checkPlatform refuses to start servers: without Linux's parent-death
// signal, they could outlive this process.
func checkPlatform() error {
	return fmt.Errorf("testserver: needs Linux (parent-death signal, /proc): %w", ErrNotInstalled)
}

func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

type procID struct {
	pid   int
	start uint64
}

func procStat(pid int) (ppid int, state byte, start uint64, err error) {
	return 0, 0, 0, checkPlatform()
}

func descendants(pid int) ([]procID, error) { return nil, checkPlatform() }

func (p procID) state() byte { return 0 }

func (p procID) signal(sig syscall.Signal) {}

func waitState(ctx context.Context, ps []procID, want byte) error { return checkPlatform() }
