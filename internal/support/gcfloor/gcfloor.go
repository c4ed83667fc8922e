// Package gcfloor keeps the garbage collector from running often while the
// heap is small.
//
// With GOGC=100 the collector runs each time the heap doubles. A server
// whose live heap is a few megabytes, allocating a few kilobytes per
// request, then collects hundreds of times a second under load, at several
// percent of its CPU. Keep raises GOGC after each collection so that the
// next one comes no sooner than at a floor of heap, and leaves GOGC as it
// was set once the live heap is large enough for that setting to reach the
// floor by itself: a large heap is collected as GOGC says, and GOMEMLIMIT
// still caps the heap.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// maxPercent bounds the GOGC that Keep sets, for a nearly empty heap.
const maxPercent = 100_000

// active is set while a Keep runs: GOGC has one owner at a time.
var active atomic.Bool

// Keep makes each collection's heap goal at least floor bytes, until stop
// is called, which restores the GOGC of before. While it runs it owns
// GOGC: a GOGC set meanwhile by others is overwritten after the next
// collection. With GOGC=off, or while another Keep runs, it does nothing.
func Keep(floor uint64) (stop func()) {
	base, on := gcPercent()
	if !on || !active.CompareAndSwap(false, true) {
		return func() {}
	}
	k := &keeper{floor: floor, base: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	k.arm()
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if !k.stopped {
			k.stopped = true
			debug.SetGCPercent(k.base)
			active.Store(false)
		}
	}
}

// gcPercent returns the GOGC in force, and false if it is off.
func gcPercent() (int, bool) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	p := s[0].Value.Uint64()
	if p > math.MaxInt32 { // off: -1, as an unsigned number
		return 0, false
	}
	return int(p), true
}

type keeper struct {
	floor uint64
	base  int // GOGC as it was set

	mu      sync.Mutex // guards what follows
	stopped bool
	sample  []metrics.Sample
}

// arm has adjust run after the next collection: a cleanup of an object
// that nothing references runs once a collection has found it unreachable.
func (k *keeper) arm() {
	runtime.AddCleanup(new([32]byte), func(k *keeper) {
		if k.adjust() {
			k.arm()
		}
	}, k)
}

// adjust sets GOGC for the live heap that the last collection left, and
// reports whether to go on.
func (k *keeper) adjust() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	metrics.Read(k.sample)
	debug.SetGCPercent(Percent(k.sample[0].Value.Uint64(), k.floor, k.base))
	return true
}

// Percent is the GOGC that puts the heap goal of a live heap of live bytes
// at floor bytes at least, and never below base: base, if base already
// does; at most maxPercent (or base, if higher).
func Percent(live, floor uint64, base int) int {
	floor = min(floor, maxFloor)
	d := uint64(100 + base)
	if live >= (floor*100+d-1)/d { // live * (100+base)/100 >= floor
		return base
	}
	if live == 0 {
		return max(base, maxPercent)
	}
	p := (floor*100+live-1)/live - 100 // rounded up: the goal is not below the floor
	return max(base, int(min(p, maxPercent)))
}

// maxFloor bounds the floor (1 PiB), so that Percent's sums cannot overflow.
const maxFloor = 1 << 50
