package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a run. Its JSON form is the output of
// `fence bench -o json`; the member names are documented there too.
type Report struct {
	Workload  Workload `json:"workload"`
	Addr      string   `json:"addr"`
	Clients   int      `json:"clients"`
	Resources int      `json:"resources"`
	TTLMS     int64    `json:"ttl_ms"`
	WaitMS    int64    `json:"wait_ms"`
	ValueSize int      `json:"value_size"`
	Key       string   `json:"key"`

	// WarmupS is the warm-up, in seconds; nothing in it is counted.
	WarmupS float64 `json:"warmup_s"`
	// DurationS is the time measured, in seconds: Config.Duration, or less
	// if the run was interrupted.
	DurationS float64 `json:"duration_s"`
	// Interrupted is true if the run was cancelled before its end.
	Interrupted bool `json:"interrupted"`

	// Ops is the number of operations completed: whole cycles whose
	// acquire was granted in the measured time (cycle, contended: finished
	// past its end, so that each acquisition counted is one cycle, an
	// operation or the error of its write or release, unless the run was
	// interrupted) or writes accepted in it (write).
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_s"`
	// Acquisitions counts the acquires granted in the measured time.
	Acquisitions       int64   `json:"acquisitions"`
	AcquisitionsPerSec float64 `json:"acquisitions_per_s"`
	// Handoffs counts the acquisitions of a resource whose previous grant
	// (as seen by this run) went to another client.
	Handoffs int64 `json:"handoffs"`
	// ClientOpsMin and ClientOpsMax are the fewest and most operations one
	// client completed: how fairly the clients were served.
	ClientOpsMin int64 `json:"client_ops_min"`
	ClientOpsMax int64 `json:"client_ops_max"`

	// Latency has the latency of each step, in milliseconds.
	Latency Steps `json:"latency_ms"`

	// Errors counts the failed requests of the measured time by the
	// problem's code (lock_held, fenced, ...), or "network", "timeout" or
	// "bad_response" when there was no problem to read. It is never nil.
	Errors map[string]int64 `json:"errors"`
	// ErrorsTotal is the sum of Errors.
	ErrorsTotal int64 `json:"errors_total"`
	// ErrorSamples holds the first error message of each code in Errors.
	ErrorSamples map[string]string `json:"error_samples,omitempty"`

	// Fenced is Errors["fenced"]: writes rejected as stale. It is 0 unless a
	// lease expired (or another program used the same resources).
	Fenced int64 `json:"fenced"`
	// Overlaps counts grants to one client while the benchmark knew another
	// client's lease on the same resource to be live (not yet released,
	// within its TTL). The lock service must keep it at 0.
	Overlaps int64 `json:"overlaps"`
	// Regressions counts writes accepted with a token lower than one whose
	// write on the same resource had already been accepted. Fenced storage
	// must keep it at 0.
	Regressions int64 `json:"regressions"`
	// ExpiredLeases counts grants while another client had not yet released
	// its lease but that lease may have expired: legitimate, and the reason
	// for fenced writes.
	ExpiredLeases int64 `json:"expired_leases"`

	// Timeline is the measured time cut into intervals: throughput and
	// latency over time. It is not part of the JSON form.
	Timeline *Timeline `json:"-"`
	// Histograms holds the histogram of the latencies of each step that
	// Latency has, by the step's name ("acquire", "write", "renew",
	// "release", "cycle"). It is not part of the JSON form.
	Histograms map[string]*Histogram `json:"-"`
}

// Steps holds the latency of each step a workload measures; the steps it
// does not have are nil. Cycle and contended have Acquire (the wait for the
// lock, in contended), Write, Release and Cycle; write has Acquire, Write and
// Renew.
type Steps struct {
	Acquire *Latency `json:"acquire,omitempty"`
	Write   *Latency `json:"write,omitempty"`
	Renew   *Latency `json:"renew,omitempty"`
	Release *Latency `json:"release,omitempty"`
	Cycle   *Latency `json:"cycle,omitempty"`
}

// Latency summarizes the latencies of one step, in milliseconds. The
// quantiles are within 1% of the exact ones; Max is exact.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// NewLatency summarizes h.
func NewLatency(h *Histogram) *Latency {
	return &Latency{
		Count: h.Count(),
		Mean:  ms(h.Mean()),
		P50:   ms(h.Quantile(0.5)),
		P99:   ms(h.Quantile(0.99)),
		P999:  ms(h.Quantile(0.999)),
		Max:   ms(h.Max()),
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// step returns the field of s's latency.
func (s *Steps) step(st step) **Latency {
	switch st {
	case stepAcquire:
		return &s.Acquire
	case stepWrite:
		return &s.Write
	case stepRenew:
		return &s.Renew
	case stepRelease:
		return &s.Release
	}
	return &s.Cycle
}

// report sums the clients' counts into the Report.
func (r *runner) report(clients []*client) *Report {
	cfg := r.cfg
	end := r.to
	s := r.stopped.Load()
	interrupted := s != nil && s.Before(r.to)
	if interrupted {
		end = *s
	}
	elapsed := max(end.Sub(r.from), 0)
	rep := &Report{
		Workload: cfg.Workload, Addr: cfg.Addr, Clients: cfg.Clients, Resources: cfg.Resources,
		TTLMS: cfg.TTL.Milliseconds(), WaitMS: cfg.Wait.Milliseconds(), ValueSize: cfg.ValueSize, Key: cfg.Key,
		WarmupS: cfg.Warmup.Seconds(), DurationS: elapsed.Seconds(), Interrupted: interrupted,
		Errors:        map[string]int64{},
		ErrorSamples:  map[string]string{},
		Overlaps:      r.overlaps.Load(),
		Regressions:   r.regressions.Load(),
		ExpiredLeases: r.expiries.Load(),
		Histograms:    map[string]*Histogram{},
	}
	var hist [nSteps]Histogram
	for i, c := range clients {
		r.timeline.add(&c.tally)
		for s := range hist {
			hist[s].Merge(&c.hist[s])
		}
		rep.Ops += c.ops
		rep.Acquisitions += c.acquisitions
		rep.Handoffs += c.handoffs
		if i == 0 || c.ops < rep.ClientOpsMin {
			rep.ClientOpsMin = c.ops
		}
		rep.ClientOpsMax = max(rep.ClientOpsMax, c.ops)
		for code, n := range c.errors {
			rep.Errors[code] += n
			rep.ErrorsTotal += n
			if _, ok := rep.ErrorSamples[code]; !ok {
				rep.ErrorSamples[code] = c.samples[code]
			}
		}
	}
	rep.Fenced = rep.Errors[codeFenced]
	if elapsed > 0 {
		rep.OpsPerSec = float64(rep.Ops) / elapsed.Seconds()
		rep.AcquisitionsPerSec = float64(rep.Acquisitions) / elapsed.Seconds()
	}
	steps := []step{stepAcquire, stepWrite, stepRelease, stepCycle}
	if cfg.Workload == Write {
		steps = []step{stepAcquire, stepWrite, stepRenew}
	}
	for _, s := range steps {
		*rep.Latency.step(s) = NewLatency(&hist[s])
		rep.Histograms[stepNames[s]] = &hist[s]
	}
	rep.Timeline = r.timeline.result(elapsed)
	return rep
}

// WriteText writes r for people: throughput, a latency table, errors and
// the safety checks.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fence bench: %s workload, %d client(s), %d resource(s), %s\n", r.Workload, r.Clients, r.Resources, r.Addr)
	wait := ""
	if r.WaitMS > 0 {
		wait = fmt.Sprintf(", wait %s", time.Duration(r.WaitMS)*time.Millisecond)
	}
	fmt.Fprintf(&b, "measured %.2fs after %.2gs warm-up; ttl %s%s, %d-byte values\n",
		r.DurationS, r.WarmupS, time.Duration(r.TTLMS)*time.Millisecond, wait, r.ValueSize)
	if r.Interrupted {
		b.WriteString("interrupted: the figures cover the time measured before the interrupt\n")
	}
	b.WriteString("\n")
	opName := "cycles"
	if r.Workload == Write {
		opName = "writes"
	}
	fmt.Fprintf(&b, "%-16s %10d  %10.1f/s   per client %d–%d\n", opName, r.Ops, r.OpsPerSec, r.ClientOpsMin, r.ClientOpsMax)
	fmt.Fprintf(&b, "%-16s %10d  %10.1f/s   changing hands %d\n", "acquisitions", r.Acquisitions, r.AcquisitionsPerSec, r.Handoffs)

	fmt.Fprintf(&b, "\n%-16s %10s %9s %9s %9s %9s %9s\n", "latency ms", "count", "mean", "p50", "p99", "p99.9", "max")
	acquire := "acquire"
	if r.Workload == Contended {
		acquire = "acquire (wait)"
	}
	for _, s := range []struct {
		name string
		l    *Latency
	}{{acquire, r.Latency.Acquire}, {"write", r.Latency.Write}, {"renew", r.Latency.Renew}, {"release", r.Latency.Release}, {"cycle", r.Latency.Cycle}} {
		if s.l == nil {
			continue
		}
		if s.l.Count == 0 {
			fmt.Fprintf(&b, "  %-14s %10d %9s %9s %9s %9s %9s\n", s.name, 0, "-", "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(&b, "  %-14s %10d %9s %9s %9s %9s %9s\n", s.name, s.l.Count,
			FormatMS(s.l.Mean), FormatMS(s.l.P50), FormatMS(s.l.P99), FormatMS(s.l.P999), FormatMS(s.l.Max))
	}

	fmt.Fprintf(&b, "\n%-16s %10d\n", "errors", r.ErrorsTotal)
	codes := slices.SortedFunc(maps.Keys(r.Errors), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.Errors[b], r.Errors[a]), cmp.Compare(a, b))
	})
	for _, code := range codes {
		fmt.Fprintf(&b, "  %-14s %10d   e.g. %s\n", code, r.Errors[code], r.ErrorSamples[code])
	}
	fmt.Fprintf(&b, "%-16s fenced %d, overlaps %d, regressions %d, expired leases %d\n",
		"checks", r.Fenced, r.Overlaps, r.Regressions, r.ExpiredLeases)
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatMS formats milliseconds as WriteText does, with three or four
// significant digits.
func FormatMS(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	case v < 1000:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
