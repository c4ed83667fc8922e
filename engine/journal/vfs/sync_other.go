//go:build !linux && !darwin

package vfs

import (
	"errors"
	"os"
)

// datasync makes what was written to f durable: fsync, where neither
// fdatasync nor F_FULLFSYNC is available.
func datasync(f *os.File) error { return f.Sync() }

// punch would deallocate n bytes of f from off; this system has no
// portable way to.
func punch(f *os.File, off, n int64) error { return errors.ErrUnsupported }

// freeSpace would return the bytes free on the file system of dir; this
// system has no portable way to say.
func freeSpace(dir string) (int64, error) { return 0, errors.ErrUnsupported }

// nextData returns off: this system is not asked where a file's holes are,
// so every byte is read.
func nextData(f *os.File, off int64) (int64, error) { return off, nil }
