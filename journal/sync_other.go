//go:build !linux && !darwin

package journal

import "os"

// datasync makes what was written to f durable: fsync, where neither
// fdatasync nor F_FULLFSYNC is available.
func datasync(f *os.File) error { return f.Sync() }
