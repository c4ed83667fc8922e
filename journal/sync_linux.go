package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes what was written to f durable: its data, and the metadata
// needed to read it back (fdatasync; the segments are preallocated, so an
// append changes no size).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
