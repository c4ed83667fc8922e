package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestIntervalFor(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{
		{time.Millisecond, 100 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{10 * time.Second, 100 * time.Millisecond},
		{10*time.Second + 1, 200 * time.Millisecond},
		{time.Minute, time.Second},
		{10 * time.Minute, 10 * time.Second},
		{time.Hour, time.Minute},
		{100 * time.Hour, time.Hour},
		{100*time.Hour + 1, 2 * time.Hour},
		{1000 * time.Hour, 10 * time.Hour},
	} {
		got := intervalFor(tc.d)
		if got != tc.want {
			t.Errorf("intervalFor(%v)=%v, want %v", tc.d, got, tc.want)
		}
		if n := (tc.d + got - 1) / got; n > MaxIntervals {
			t.Errorf("intervalFor(%v)=%v cuts it into %d intervals, more than %d", tc.d, got, n, MaxIntervals)
		}
	}
}

func TestCoarseHistogram(t *testing.T) {
	// The buckets tile the values: each starts where the previous ends.
	for i := 1; i < nCoarse; i++ {
		lo, _ := coarseBucketRange(i)
		plo, pw := coarseBucketRange(i - 1)
		if lo != plo+pw || coarseBucketOf(lo) != i || coarseBucketOf(lo-1) != i-1 {
			t.Fatalf("bucket %d starts at %d, after [%d, %d)", i, lo, plo, plo+pw)
		}
	}
	if i := coarseBucketOf(math.MaxInt64); i != nCoarse-1 {
		t.Fatalf("coarseBucketOf(MaxInt64)=%d, want the last bucket %d", i, nCoarse-1)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 1000, 50_000} {
		var h coarseHistogram
		sample := make([]time.Duration, n)
		for i := range sample {
			sample[i] = time.Duration(math.Exp(rng.NormFloat64()*1.5) * 1e6) // log-normal around 1 ms
			h.record(sample[i])
		}
		slices.Sort(sample)
		if h.count != int64(n) || time.Duration(h.max) != sample[n-1] {
			t.Fatalf("n=%d: count=%d max=%v, want %d, %v", n, h.count, time.Duration(h.max), n, sample[n-1])
		}
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
			got, want := h.quantile(q), exactQuantile(sample, q)
			if e := relErr(got, want); e > 0.07 {
				t.Errorf("n=%d: quantile(%v)=%v, want %v (relative error %.3f > 7%%)", n, q, got, want, e)
			}
		}
		var m coarseHistogram
		m.merge(&h)
		m.merge(&h)
		if m.count != 2*h.count || m.max != h.max || m.quantile(0.5) != h.quantile(0.5) {
			t.Errorf("n=%d: merged twice: count=%d max=%d p50=%v, want %d, %d, %v", n, m.count, m.max, m.quantile(0.5),
				2*h.count, h.max, h.quantile(0.5))
		}
	}
}

func TestTimeline(t *testing.T) {
	tl := newTimeline(450 * time.Millisecond) // 100 ms intervals, the last one 50 ms
	if tl.interval != 100*time.Millisecond || len(tl.intervals) != 5 {
		t.Fatalf("interval %v, %d intervals, want 100ms, 5", tl.interval, len(tl.intervals))
	}
	for since, want := range map[time.Duration]int{-time.Millisecond: 0, 0: 0, 99 * time.Millisecond: 0,
		100 * time.Millisecond: 1, 450 * time.Millisecond: 4, time.Second: 4} {
		if got := tl.index(since); got != want {
			t.Errorf("index(%v)=%d, want %d", since, got, want)
		}
	}
	// Two clients' tallies of interval 1, one of interval 3.
	for _, d := range []time.Duration{time.Millisecond, 3 * time.Millisecond} {
		ta := tally{interval: 1, ops: 2, errors: 1}
		ta.steps[stepWrite].record(d)
		ta.steps[stepWrite].record(d)
		tl.add(&ta)
		if ta.interval != -1 || ta.ops != 0 || ta.steps[stepWrite].count != 0 {
			t.Fatalf("the tally is not empty after add: %+v", ta)
		}
		tl.add(&ta) // an empty tally adds nothing
	}
	ta := tally{interval: 3, ops: 7}
	ta.steps[stepRelease].record(2 * time.Millisecond)
	tl.add(&ta)

	got := tl.result(250 * time.Millisecond) // interrupted in interval 2
	if got.Interval != 100*time.Millisecond || len(got.Intervals) != 3 {
		t.Fatalf("result: %+v, want 3 intervals of 100 ms", got)
	}
	iv := got.Intervals
	if iv[0].Ops != 0 || len(iv[0].Latency) != 0 || iv[1].Ops != 4 || iv[1].Errors != 2 || iv[2].End != 250*time.Millisecond {
		t.Fatalf("intervals %+v", iv)
	}
	w := iv[1].Latency["write"]
	if len(iv[1].Latency) != 1 || w.Count != 4 || w.Max != 3 || math.Abs(w.P50-1) > 0.07 || math.Abs(w.P90-3) > 0.2 {
		t.Fatalf("interval 1: latency %+v, want 4 writes, p50 1 ms, p90 and max 3 ms", iv[1].Latency)
	}
	if full := tl.result(450 * time.Millisecond); len(full.Intervals) != 5 || full.Intervals[3].Ops != 7 ||
		full.Intervals[3].Latency["release"].Count != 1 || full.Intervals[4].End != 450*time.Millisecond {
		t.Fatalf("result(450ms): %+v", full.Intervals)
	}
	if empty := tl.result(0); len(empty.Intervals) != 0 {
		t.Fatalf("result(0) has %d intervals, want none", len(empty.Intervals))
	}
}

func TestHistogram_LogBuckets(t *testing.T) {
	var h Histogram
	if b := h.LogBuckets(4); b != nil {
		t.Fatalf("LogBuckets of an empty histogram = %v, want none", b)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 20_000
	for range n {
		h.Record(time.Duration(math.Exp(rng.NormFloat64()) * 1e6))
	}
	h.Record(0) // counts in the bucket of 1 ns
	for _, per := range []int{1, 4, 8} {
		b := h.LogBuckets(per)
		var sum int64
		for i, bk := range b {
			sum += bk.Count
			if i > 0 && bk.Lo != b[i-1].Hi || bk.Hi <= bk.Lo && bk.Lo > 10 {
				t.Fatalf("perOctave %d: bucket %d is [%v, %v) after [%v, %v)", per, i, bk.Lo, bk.Hi, b[i-1].Lo, b[i-1].Hi)
			}
			if bk.Lo > 1000 && math.Abs(float64(bk.Hi)/float64(bk.Lo)-math.Exp2(1/float64(per))) > 0.001 {
				t.Fatalf("perOctave %d: bucket %d is [%v, %v), want a ratio of 2^(1/%d)", per, i, bk.Lo, bk.Hi, per)
			}
		}
		if sum != h.Count() || b[0].Lo != 1 || b[0].Count != 1 || b[len(b)-1].Hi <= h.Max() || b[len(b)-1].Count == 0 {
			t.Fatalf("perOctave %d: %d buckets from %v to %v, %d values in them; want %d from 1ns past %v",
				per, len(b), b[0].Lo, b[len(b)-1].Hi, sum, h.Count(), h.Max())
		}
	}
	// The values of one bucket of 4 per octave, [2^20, 2^20.25) ns, land in it.
	var one Histogram
	for v := int64(1 << 20); v < 1_240_000; v += 1000 {
		one.Record(time.Duration(v))
	}
	if b := one.LogBuckets(4); len(b) != 1 || b[0].Lo != 1<<20 || b[0].Count != one.Count() {
		t.Fatalf("LogBuckets(4) = %+v, want one bucket from 2^20 ns holding all %d", b, one.Count())
	}
}
