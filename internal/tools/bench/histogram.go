package bench

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, like HdrHistogram: values below subCount get
// one bucket each; above, each power of two [2^k, 2^(k+1)) is split into
// subCount/2 buckets of equal width. A bucket is then at most 1/64 of its
// lower bound wide, and its midpoint is within 1/128 (< 0.8%) of every value
// in it.
const (
	subBits  = 7
	subCount = 1 << subBits // 128
	subHalf  = subCount / 2 // 64
	maxShift = 63 - subBits // for the largest int64
	nBuckets = subCount + maxShift*subHalf
)

// Histogram records durations with a relative error below 1% in fixed
// memory (about 29 KiB), without allocating. The zero value is an empty
// histogram ready to use. A Histogram is not safe for concurrent use: give
// each goroutine its own and Merge them afterwards.
type Histogram struct {
	counts   [nBuckets]uint64
	count    int64
	sum      float64 // nanoseconds
	min, max int64   // nanoseconds, exact; meaningful only when count > 0
}

// bucketOf returns the index of the bucket that holds v >= 0.
func bucketOf(v int64) int { return logLinearBucket(v, subBits) }

// bucketRange returns the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width int64) { return logLinearRange(i, subBits) }

// logLinearBucket returns the bucket of v >= 0 in a log-linear scheme with
// 2^sub buckets below 2^sub and 2^(sub-1) buckets in each power of two
// above: Histogram's (sub = subBits) and the Timeline's coarser one.
func logLinearBucket(v int64, sub int) int {
	count, half := int64(1)<<sub, 1<<(sub-1)
	if v < count {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - sub // >= 1
	return int(count) + (shift-1)*half + int(v>>shift) - half
}

// logLinearRange returns the lowest value of bucket i of logLinearBucket's
// scheme and its width.
func logLinearRange(i, sub int) (lo, width int64) {
	count, half := 1<<sub, 1<<(sub-1)
	if i < count {
		return int64(i), 1
	}
	shift := (i-count)/half + 1
	return int64((i-count)%half+half) << shift, int64(1) << shift
}

// Record adds one duration. Negative durations count as zero. It never
// allocates.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count++
	h.sum += float64(v)
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.count == 0 || o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.sum += o.sum
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count returns the number of recorded values.
func (h *Histogram) Count() int64 { return h.count }

// Min returns the smallest recorded value, exactly; 0 if h is empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max returns the largest recorded value, exactly; 0 if h is empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the mean of the recorded values; 0 if h is empty.
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.count)))
}

// Quantile returns the q-quantile (0 <= q <= 1) of the recorded values: the
// value of rank ceil(q*Count) (at least 1) in sorted order, within 1% of it.
// Quantile(0) is Min and Quantile(1) is Max; an empty histogram returns 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := int64(math.Ceil(q * float64(h.count)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			lo, width := bucketRange(i)
			v := lo + width/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Bucket is a range of durations, [Lo, Hi), and the number of recorded
// values in it.
type Bucket struct {
	Lo, Hi time.Duration
	Count  int64
}

// LogBuckets returns the recorded values counted in buckets of a log scale,
// perOctave (1 to 16) per power of two: bucket k holds [2^(k/perOctave),
// 2^((k+1)/perOctave)) nanoseconds, values below 1 ns count in the bucket
// of 1 ns, and a value may count in a neighbour of its bucket when it is
// within 1% of the bound between them. The buckets run from the one of Min
// to the one of Max, empty ones included; an empty histogram has none.
func (h *Histogram) LogBuckets(perOctave int) []Bucket {
	if h.count == 0 {
		return nil
	}
	p := float64(min(max(perOctave, 1), 16))
	index := func(v int64) int { return int(math.Floor(p * math.Log2(float64(max(v, 1))))) }
	bound := func(k int) time.Duration { return time.Duration(math.Round(math.Exp2(float64(k) / p))) }
	first, last := index(h.min), index(h.max)
	out := make([]Bucket, last-first+1)
	for k := range out {
		out[k] = Bucket{Lo: bound(first + k), Hi: bound(first + k + 1)}
	}
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		lo, width := bucketRange(i)
		v := min(max(lo+width/2, h.min), h.max)
		out[index(v)-first].Count += int64(c)
	}
	return out
}
