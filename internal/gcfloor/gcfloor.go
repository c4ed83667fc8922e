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
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GOGC that Keep sets, for a nearly empty heap.
const maxPercent = 100_000

// Keep makes each collection's heap goal at least floor bytes, until stop
// is called, which restores the GOGC of before. With GOGC=off it does
// nothing.
func Keep(floor uint64) (stop func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return func() {}
	}
	k := &keeper{floor: floor, base: base, last: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	k.arm()
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if !k.stopped {
			k.stopped = true
			debug.SetGCPercent(k.base)
		}
	}
}

type keeper struct {
	floor uint64
	base  int // GOGC as it was set

	mu      sync.Mutex // guards what follows
	stopped bool
	last    int // the GOGC set last
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
	if p := Percent(k.sample[0].Value.Uint64(), k.floor, k.base); p != k.last {
		debug.SetGCPercent(p)
		k.last = p
	}
	return true
}

// Percent is the GOGC that puts the heap goal of a live heap of live bytes
// at floor bytes at least: base, if base already does.
func Percent(live, floor uint64, base int) int {
	if live == 0 {
		return maxPercent
	}
	if live+live*uint64(base)/100 >= floor {
		return base
	}
	return int(min(floor/live*100+floor%live*100/live-100, maxPercent))
}
