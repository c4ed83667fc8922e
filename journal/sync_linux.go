package journal

import (
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
