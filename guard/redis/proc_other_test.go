//go:build !linux

package redis

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return nil }
