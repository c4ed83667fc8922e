package wallclock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatch checks that the offset follows the file, that a file that does
// not parse leaves it as it was, and that Report and Now move by it while
// time.Now's monotonic reading does not.
func TestWatch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "offset")
	waitFor := func(want time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); Offset() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("offset %s, want %s", Offset(), want)
			}
		}
	}
	t.Cleanup(func() { offset.Store(0) })
	os.WriteFile(file, []byte("+3s\n"), 0o600)
	Watch(t.Context(), file)
	waitFor(3 * time.Second)

	at := time.Now()
	if got := Report(at).Sub(at.Round(0)); got != 3*time.Second {
		t.Fatalf("Report is %s off, want 3s", got)
	}
	if d := Now().Sub(time.Now().Round(0)); d < 2900*time.Millisecond || d > 3100*time.Millisecond {
		t.Fatalf("Now is %s off the wall clock, want about 3s", d)
	}

	os.WriteFile(file, []byte("-1.5s"), 0o600)
	waitFor(-1500 * time.Millisecond)
	os.WriteFile(file, []byte("soon"), 0o600)
	time.Sleep(20 * pollEvery)
	if Offset() != -1500*time.Millisecond {
		t.Fatalf("a file that does not parse moved the offset to %s", Offset())
	}
	if time.Since(at) > time.Minute {
		t.Fatal("the monotonic clock moved with the offset")
	}
}
