package testserver

import (
	"errors"
	"os"
	"testing"
)

// requireServers names the environment variable that, set to "1", turns a
// missing server into a test failure instead of a skip (CI sets it).
const requireServers = "FENCE_REQUIRE_SERVERS"

// Require skips tb when err wraps ErrNotInstalled and FENCE_REQUIRE_SERVERS
// is not "1"; otherwise it fails tb on a non-nil err.
func Require(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrNotInstalled) && os.Getenv(requireServers) != "1" {
		tb.Skipf("%v (%s=1 makes this a failure)", err, requireServers)
	}
	tb.Fatal(err)
}

// TempDir returns a new directory made by MkdirTemp, which StartPostgres
// accepts when running as root (tb.TempDir's are private to root), and
// removes it when tb and its subtests have completed. Register the servers'
// Close after calling it, so that they stop before it is removed.
func TempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := MkdirTemp("fence-testserver-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("testserver: remove %s: %v", dir, err)
		}
	})
	return dir
}
