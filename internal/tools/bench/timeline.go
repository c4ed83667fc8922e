package bench

import (
	"sync"
	"time"
)

// Timeline is a run's measured time cut into intervals of equal length:
// throughput and latency over time, for plots (`fence bench --report`). Its
// size is bounded whatever the run's length: at most MaxIntervals
// intervals, each with a small histogram per step.
type Timeline struct {
	// Interval is the length of every interval but the last, which is
	// shorter when the run was interrupted or Interval does not divide the
	// measured time. It is the shortest of 100ms, 200ms, 500ms, 1s, 2s, 5s,
	// 10s, 15s, 30s, 1m, 2m, 5m, 10m, 15m, 30m and 1h (then whole hours)
	// that cuts Config.Duration into at most MaxIntervals intervals.
	Interval time.Duration

	// Intervals holds the intervals in order, from the start of the
	// measurement to its end (or the interrupt); an interval in which
	// nothing completed is there with zero counts.
	Intervals []Interval
}

// MaxIntervals bounds the number of intervals of a Timeline.
const MaxIntervals = 100

// Interval is one interval of a Timeline. Operations, errors and latencies
// count in the interval in which they ended, as in Report.
type Interval struct {
	// Start and End are the interval's bounds, from the start of the
	// measurement.
	Start, End time.Duration

	// Ops and Errors count the operations completed and the failed requests
	// in the interval.
	Ops, Errors int64

	// Latency holds the latencies of the steps that ended in the interval,
	// by step name ("acquire", "write", "renew", "release", "cycle"); a step
	// that none ended in is missing. It is never nil.
	Latency map[string]Quantiles
}

// Seconds returns the interval's length in seconds.
func (iv Interval) Seconds() float64 { return (iv.End - iv.Start).Seconds() }

// Quantiles summarizes the latencies of one step in one interval, in
// milliseconds. The quantiles are within 7% of the exact ones; Max is exact.
type Quantiles struct {
	Count         int64
	P50, P90, P99 float64
	Max           float64
}

// intervals lists the lengths a Timeline's interval may have, shortest
// first; longer runs use whole hours.
var intervals = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour,
}

// intervalFor returns the interval of the Timeline of a run measured for d.
func intervalFor(d time.Duration) time.Duration {
	for _, iv := range intervals {
		if d <= iv*MaxIntervals {
			return iv
		}
	}
	per := (d + MaxIntervals - 1) / MaxIntervals
	return (per + time.Hour - 1) / time.Hour * time.Hour
}

// The histograms of a Timeline are coarse versions of Histogram: values
// below coarseSub get one bucket each; above, each power of two is split
// into coarseHalf buckets, each at most 1/8 of its lower bound wide, so that
// a bucket's midpoint is within 1/16 of every value in it. Values of 2^40 ns
// (18 minutes) and more share the last bucket.
const (
	coarseBits     = 4
	coarseSub      = 1 << coarseBits // 16
	coarseHalf     = coarseSub / 2   // 8
	coarseMaxShift = 40 - coarseBits
	nCoarse        = coarseSub + coarseMaxShift*coarseHalf // 304
)

// coarseHistogram records durations with a relative error below 7%, in
// about 2.4 KiB. The zero value is empty.
type coarseHistogram struct {
	counts [nCoarse]uint64
	count  int64
	max    int64 // nanoseconds, exact
}

// coarseBucketOf returns the bucket of v >= 0; 2^40 ns and more share the last.
func coarseBucketOf(v int64) int { return min(logLinearBucket(v, coarseBits), nCoarse-1) }

// coarseBucketRange returns the lowest value of bucket i and its width.
func coarseBucketRange(i int) (lo, width int64) { return logLinearRange(i, coarseBits) }

func (h *coarseHistogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[coarseBucketOf(v)]++
	h.count++
	h.max = max(h.max, v)
}

func (h *coarseHistogram) merge(o *coarseHistogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.count += o.count
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q < 1) of the recorded values, the
// midpoint of the bucket of rank ceil(q*count), at most the maximum.
func (h *coarseHistogram) quantile(q float64) time.Duration {
	rank := max(int64(q*float64(h.count)+0.999999), 1)
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			lo, width := coarseBucketRange(i)
			return time.Duration(min(lo+width/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// timeline is the Timeline of a run as it is being recorded. The clients
// keep their counts of the current interval to themselves (tally) and add
// them here when they move on to another interval, so mu is taken about
// once per interval and client.
type timeline struct {
	interval time.Duration

	mu        sync.Mutex
	intervals []timelineInterval
}

type timelineInterval struct {
	ops, errors int64
	steps       [nSteps]*coarseHistogram // nil until a latency of the step is added
}

func newTimeline(d time.Duration) *timeline {
	iv := intervalFor(d)
	n := int((d + iv - 1) / iv)
	return &timeline{interval: iv, intervals: make([]timelineInterval, n)}
}

// index returns the interval of a time since the start of the measurement.
func (tl *timeline) index(since time.Duration) int {
	return min(max(int(since/tl.interval), 0), len(tl.intervals)-1)
}

// tally is one client's counts of one interval of the timeline.
type tally struct {
	interval    int // -1 when empty
	ops, errors int64
	steps       [nSteps]coarseHistogram
}

// add adds t to the timeline and empties t.
func (tl *timeline) add(t *tally) {
	if t.interval < 0 {
		return
	}
	tl.mu.Lock()
	iv := &tl.intervals[t.interval]
	iv.ops += t.ops
	iv.errors += t.errors
	for s := range t.steps {
		if t.steps[s].count == 0 {
			continue
		}
		if iv.steps[s] == nil {
			iv.steps[s] = new(coarseHistogram)
		}
		iv.steps[s].merge(&t.steps[s])
	}
	tl.mu.Unlock()
	for s := range t.steps {
		if t.steps[s].count > 0 {
			t.steps[s] = coarseHistogram{}
		}
	}
	t.interval, t.ops, t.errors = -1, 0, 0
}

// result returns the Timeline of the measured time, which may be shorter
// than the run's Duration. It must be called once the clients are done.
func (tl *timeline) result(measured time.Duration) *Timeline {
	out := &Timeline{Interval: tl.interval, Intervals: []Interval{}}
	for i, iv := range tl.intervals {
		start := time.Duration(i) * tl.interval
		if start >= measured {
			break
		}
		item := Interval{Start: start, End: min(start+tl.interval, measured), Ops: iv.ops, Errors: iv.errors,
			Latency: map[string]Quantiles{}}
		for s, h := range iv.steps {
			if h == nil {
				continue
			}
			item.Latency[stepNames[s]] = Quantiles{
				Count: h.count,
				P50:   ms(h.quantile(0.5)),
				P90:   ms(h.quantile(0.9)),
				P99:   ms(h.quantile(0.99)),
				Max:   ms(time.Duration(h.max)),
			}
		}
		out.Intervals = append(out.Intervals, item)
	}
	return out
}
