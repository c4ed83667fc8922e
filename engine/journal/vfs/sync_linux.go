package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes what was written to f durable: its data, and the metadata
// needed to read it back (fdatasync; the segments are preallocated, so an
// append changes no size).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// punch deallocates n bytes of f from off, which then read as zeros
// (FALLOC_FL_PUNCH_HOLE): it needs no free space.
func punch(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// freeSpace returns the bytes free to an unprivileged user on the file
// system of dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// nextData returns the offset of the first byte of data (not a hole) of f
// at or after off, or -1 if there is none (SEEK_DATA); off itself where the
// file system cannot tell.
func nextData(f *os.File, off int64) (int64, error) {
	n, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return -1, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		return off, nil
	}
	return n, err
}
