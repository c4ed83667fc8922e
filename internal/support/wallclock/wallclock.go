// Package wallclock is fence serve's clock seam for the chaos harness's
// clock-skew fault. Go reads the clock without libc, so faketime cannot
// skew it; instead fence serve --test-clock-file names a file holding an
// offset (a Go duration, "+3s", "-1.5s"), which Watch reads as it changes.
//
// The offset moves the wall clock as a step of the machine's clock would
// move Go's: every wall time the server reports or records (expires_at,
// event times, a sequencer's expiry, the expiries in the store) is off by
// it, while durations and deadlines, which Go measures on the monotonic
// clock, are not. (Report applies the offset of the moment it is called to
// an instant taken before: close enough for steps that last seconds.) Leases are timed that way,
// so a skewed server must neither end a lease early nor grant it twice.
// Now is the clock of the negative control (fence serve
// --unsafe-wall-clock-leases, through LeaseClock): the skewed wall clock
// alone, which a lease service that trusted it would time leases by.
//
// Without Watch the offset is 0 and every function is the identity.
package wallclock

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

var (
	offset atomic.Int64 // nanoseconds
	// byWall says that times are taken from Now already, so that Report
	// must not add the offset again (LeaseClock).
	byWall atomic.Bool
)

// Offset returns the offset of the wall clock.
func Offset() time.Duration { return time.Duration(offset.Load()) }

// Report returns the wall time to report for the instant t.
func Report(t time.Time) time.Time {
	if o := offset.Load(); o != 0 && !byWall.Load() {
		return t.Add(time.Duration(o))
	}
	return t
}

// Now returns the skewed wall clock's reading, without the monotonic
// clock's: comparisons of its readings follow every step of the offset.
func Now() time.Time { return time.Now().Round(0).Add(Offset()) }

// LeaseClock returns Now, for a lease service to time its leases by (the
// negative control), and makes Report the identity: the times such a
// service reports are read from the skewed clock already.
func LeaseClock() func() time.Time {
	byWall.Store(true)
	return Now
}

// pollEvery is how often Watch reads the file.
const pollEvery = 5 * time.Millisecond

// Watch sets the offset from file, now and whenever it changes, until ctx
// ends. A file that is missing or does not parse leaves the offset as it
// was.
func Watch(ctx context.Context, file string) {
	read := func() {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		if d, err := time.ParseDuration(strings.TrimPrefix(strings.TrimSpace(string(b)), "+")); err == nil {
			offset.Store(int64(d))
		}
	}
	read()
	go func() {
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				read()
			}
		}
	}()
}
