package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync, what fence's journal does after each commit.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
