package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the definition Quantile approximates: the value of rank
// ceil(q*n), at least 1, in sorted.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	if q <= 0 {
		return sorted[0]
	}
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[min(rank, len(sorted))-1]
}

func relErr(got, want time.Duration) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got-want)) / float64(want)
}

var quantiles = []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1}

func TestHistogram_Quantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, gen := range map[string]func() time.Duration{
		// Latency-like: log-normal around 1 ms with a long tail.
		"LogNormal": func() time.Duration { return time.Duration(math.Exp(rng.NormFloat64()*1.5) * 1e6) },
		"Uniform":   func() time.Duration { return time.Duration(rng.Int64N(int64(time.Second))) },
		"Small":     func() time.Duration { return time.Duration(rng.Int64N(1000)) },
		"Wide":      func() time.Duration { return time.Duration(math.Exp(rng.Float64() * 40)) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1000, 100_000} {
				var h Histogram
				sample := make([]time.Duration, n)
				for i := range sample {
					sample[i] = gen()
					h.Record(sample[i])
				}
				slices.Sort(sample)
				if h.Count() != int64(n) {
					t.Fatalf("n=%d: Count=%d", n, h.Count())
				}
				if h.Min() != sample[0] || h.Max() != sample[n-1] {
					t.Fatalf("n=%d: Min,Max=%v,%v, want %v,%v", n, h.Min(), h.Max(), sample[0], sample[n-1])
				}
				for _, q := range quantiles {
					got, want := h.Quantile(q), exactQuantile(sample, q)
					if e := relErr(got, want); e > 0.02 {
						t.Errorf("n=%d: Quantile(%v)=%v, want %v (relative error %.4f > 2%%)", n, q, got, want, e)
					}
				}
				var sum float64
				for _, v := range sample {
					sum += float64(v)
				}
				if want := time.Duration(math.Round(sum / float64(n))); relErr(h.Mean(), want) > 1e-9 {
					t.Errorf("n=%d: Mean=%v, want %v", n, h.Mean(), want)
				}
			}
		})
	}
}

func TestHistogram_Merge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var parts [8]Histogram
	var all []time.Duration
	for i := range 50_000 {
		v := time.Duration(rng.ExpFloat64() * 5e5)
		parts[i%len(parts)].Record(v)
		all = append(all, v)
	}
	var h Histogram
	h.Merge(&Histogram{}) // merging an empty histogram changes nothing
	for i := range parts {
		h.Merge(&parts[i])
	}
	slices.Sort(all)
	if h.Count() != int64(len(all)) || h.Min() != all[0] || h.Max() != all[len(all)-1] {
		t.Fatalf("Count,Min,Max=%d,%v,%v, want %d,%v,%v", h.Count(), h.Min(), h.Max(), len(all), all[0], all[len(all)-1])
	}
	for _, q := range quantiles {
		if got, want := h.Quantile(q), exactQuantile(all, q); relErr(got, want) > 0.02 {
			t.Errorf("Quantile(%v)=%v, want %v", q, got, want)
		}
	}
}

func TestHistogram_Edges(t *testing.T) {
	t.Run("Empty", func(t *testing.T) {
		var h Histogram
		if h.Count() != 0 || h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Min() != 0 || h.Max() != 0 {
			t.Fatalf("empty histogram: %d %v %v", h.Count(), h.Quantile(0.5), h.Mean())
		}
	})
	t.Run("NegativeIsZero", func(t *testing.T) {
		var h Histogram
		h.Record(-time.Second)
		if h.Quantile(0.5) != 0 || h.Min() != 0 {
			t.Fatalf("Quantile(0.5)=%v, want 0", h.Quantile(0.5))
		}
	})
	t.Run("Huge", func(t *testing.T) {
		var h Histogram
		h.Record(100 * time.Hour)
		h.Record(time.Duration(math.MaxInt64))
		if h.Max() != time.Duration(math.MaxInt64) || h.Quantile(1) != h.Max() {
			t.Fatalf("Max=%v", h.Max())
		}
		if got := h.Quantile(0.5); got > h.Max() || got < time.Hour {
			t.Fatalf("Quantile(0.5)=%v, want a value clamped into range", got)
		}
	})
	t.Run("Reset", func(t *testing.T) {
		var h Histogram
		h.Record(time.Millisecond)
		h.Reset()
		if h.Count() != 0 || h.Quantile(1) != 0 {
			t.Fatal("Reset left values")
		}
	})
	t.Run("BucketsCoverEveryValue", func(t *testing.T) {
		// Every bucket's range maps back to the bucket, and buckets tile the line.
		next := int64(0)
		for i := range nBuckets {
			lo, w := bucketRange(i)
			if lo != next {
				t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
			}
			if bucketOf(lo) != i || bucketOf(lo+w-1) != i {
				t.Fatalf("bucket %d [%d,%d) maps to %d,%d", i, lo, lo+w, bucketOf(lo), bucketOf(lo+w-1))
			}
			if lo >= subCount && float64(w)/float64(lo) > 1.0/subHalf {
				t.Fatalf("bucket %d: width %d is more than 1/%d of %d", i, w, subHalf, lo)
			}
			next = lo + w
		}
		if lo, w := bucketRange(nBuckets - 1); lo+(w-1) != math.MaxInt64 {
			t.Fatalf("the last bucket ends at %d, want %d", lo+(w-1), int64(math.MaxInt64))
		}
	})
}

func TestHistogram_RecordDoesNotAllocate(t *testing.T) {
	var h, o Histogram
	d := time.Duration(12345)
	if n := testing.AllocsPerRun(1000, func() {
		h.Record(d)
		d = d*3 + 7
		_ = h.Quantile(0.99)
	}); n != 0 {
		t.Fatalf("Record+Quantile allocated %v times per run, want 0", n)
	}
	if n := testing.AllocsPerRun(10, func() { o.Merge(&h) }); n != 0 {
		t.Fatalf("Merge allocated %v times per run, want 0", n)
	}
}

func BenchmarkHistogram_Record(b *testing.B) {
	var h Histogram
	d := time.Duration(1)
	for b.Loop() {
		h.Record(d)
		d = (d*31 + 17) % time.Minute
	}
}
