package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 8 << 20, floor: 64 << 20, base: 100, want: 700},  // 8 MiB + 700 % = 64 MiB
		{live: 32 << 20, floor: 64 << 20, base: 100, want: 100}, // GOGC reaches the floor by itself
		{live: 1 << 30, floor: 64 << 20, base: 100, want: 100},
		{live: 16 << 20, floor: 64 << 20, base: 400, want: 400},
		{live: 16 << 20, floor: 64 << 20, base: 50, want: 300},
		{live: 1, floor: 64 << 20, base: 100, want: maxPercent},
		{live: 0, floor: 64 << 20, base: 100, want: maxPercent},
		{live: 3 << 20, floor: 10 << 20, base: 100, want: 234},         // rounded up: 3 MiB * 3.34 >= 10 MiB
		{live: 1 << 10, floor: 64 << 20, base: 200_000, want: 200_000}, // never below the GOGC set
		{live: 5 << 20, floor: 1 << 62, base: 100, want: maxPercent},   // an absurd floor does not overflow
	} {
		if got := Percent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}

// gcogc returns the GOGC in force, -1 for off.
func gcogc() int {
	if p, on := gcPercent(); on {
		return p
	}
	return -1
}

// TestKeep checks that after a collection of a small heap GOGC is raised to
// reach the floor, and that stop restores it.
func TestKeep(t *testing.T) {
	before := gcogc()
	stop := Keep(1 << 30)
	deadline := time.Now().Add(10 * time.Second)
	for gcogc() == before {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC still %d after collections of a small heap, with a floor of 1 GiB", before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := gcogc(); p < 1000 {
		t.Errorf("GOGC = %d with a live heap far below the floor of 1 GiB", p)
	}
	stop()
	if p := gcogc(); p != before {
		t.Errorf("GOGC = %d after stop, want %d as before", p, before)
	}
	// Stopped, it no longer changes GOGC.
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcogc(); p != before {
		t.Errorf("GOGC = %d after stop and two collections, want %d", p, before)
	}
	stop() // a second stop does nothing
}

// TestKeepOnce checks that a Keep while another runs does nothing: GOGC
// has one owner, and the first one's stop restores it.
func TestKeepOnce(t *testing.T) {
	before := gcogc()
	stop := Keep(1 << 30)
	for deadline := time.Now().Add(10 * time.Second); gcogc() == before; runtime.GC() {
		if time.Now().After(deadline) {
			t.Fatal("GOGC not raised")
		}
	}
	second := Keep(1 << 20) // a floor under the live heap: GOGC as set, if it took over
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcogc(); p < 1000 {
		t.Errorf("GOGC %d after a second Keep with a floor of 1 MiB, want the first's, for 1 GiB", p)
	}
	second()
	if p := gcogc(); p == before {
		t.Errorf("the second Keep's stop restored GOGC %d", p)
	}
	stop()
	if p := gcogc(); p != before {
		t.Errorf("GOGC = %d after stop, want %d", p, before)
	}
}

// TestKeepOff checks that with GOGC=off Keep changes nothing.
func TestKeepOff(t *testing.T) {
	before := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(before)
	stop := Keep(1 << 30)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcogc(); p != -1 {
		t.Errorf("GOGC = %d, want off", p)
	}
	stop()
	if p := gcogc(); p != -1 {
		t.Errorf("GOGC = %d after stop, want off", p)
	}
}
