package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes what was written to f durable. On macOS fsync leaves the
// data in the drive's cache; F_FULLFSYNC flushes it.
func datasync(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
	return err
}

// punch would deallocate n bytes of f from off; this system has no
// portable way to.
func punch(f *os.File, off, n int64) error { return errors.ErrUnsupported }

// freeSpace returns the bytes free to an unprivileged user on the file
// system of dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// nextData returns off: this system is not asked where a file's holes are,
// so every byte is read.
func nextData(f *os.File, off int64) (int64, error) { return off, nil }
