package testserver

import (
	"os"
	"os/exec"
	"testing"
)

// TinyDisk mounts a tmpfs of size (mount's size=, e.g. "8m") on a new
// temporary directory and returns it, unmounted when tb ends, so that
// writes into it run out of space. Mounting needs root: elsewhere tb is
// skipped, saying so, except under CI (CI set), which runs as root and
// where a skip would hide the test.
func TinyDisk(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		tb.Skipf("mounting a tmpfs needs root: %v: %s", err, out)
	}
	tb.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}
