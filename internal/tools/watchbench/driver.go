package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/bench"
)

// The driver's changes: acquire/release cycles on resources under prefix.
// An acquire publishes granted and fence_raised, a release released.
const (
	prefix         = "wb/"
	holder         = "watchbench"
	leaseTTL       = time.Minute // far longer than a cycle: no lease expires
	eventsAcquire  = 2
	eventsRelease  = 1
	eventsPerCycle = eventsAcquire + eventsRelease
	opTimeout      = 10 * time.Second
	lateGrace      = time.Second // how late after the run's end a change may still start
)

// driver makes the changes whose events the watchers read.
type driver struct {
	api       *client.API
	resources []string
}

// newDriver returns a driver of the server at url on n resources. Its
// client does not retry: a retried acquire would publish an event the
// driver does not count (renewed).
func newDriver(url string, n int) (*driver, error) {
	api, err := client.NewAPI(url)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = n + 8
	api.HTTPClient = &http.Client{Transport: tr}
	api.Retries = 0
	d := &driver{api: api}
	for i := range n {
		d.resources = append(d.resources, prefix+strconv.Itoa(i))
	}
	return d, nil
}

// warmUp makes one cycle on every resource at once (opening the driver's
// connections) and returns the events it published.
func (d *driver) warmUp(ctx context.Context) (int64, error) {
	errs := make([]error, len(d.resources))
	var wg sync.WaitGroup
	for i, r := range d.resources {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, opTimeout)
			defer cancel()
			l, err := d.api.Acquire(ctx, r, holder, leaseTTL, 0)
			if err == nil {
				err = d.api.Release(ctx, r, l.Token)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("warm-up cycle on %s: %w", d.resources[i], err)
		}
	}
	return int64(len(d.resources) * eventsPerCycle), nil
}

// driveResult is what a run of the driver did.
type driveResult struct {
	ops, errs     int64
	skipped       int64 // changes not started by the end of the run (and lateGrace): the server answered too slowly
	firstErr      error
	events        int64         // published by the changes that were answered 200
	elapsed       time.Duration // from the first change scheduled to the last answer
	latency       bench.Histogram
	maxLag        time.Duration // the latest a change started after its scheduled time
	scheduledRate float64       // events per second the schedule asked for
}

// eventRate returns the events published per second.
func (r *driveResult) eventRate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.events) / r.elapsed.Seconds()
}

// op is one change, scheduled at at: the k-th of the run.
type op struct {
	k  int
	at time.Time
}

// run makes changes publishing rate events per second for dur, open loop:
// change k (an acquire when k is even, a release of that lease when odd,
// on resource (k/2) mod R) is scheduled at start + k/(rate×2/3), whatever
// the answers to the ones before; a ticker hands every change due to its
// resource's worker, which makes its resource's changes in order. A change
// not started within lateGrace of the end of dur is skipped (and so is the
// release of an acquire skipped or failed): a server that answers too
// slowly gets fewer. It returns when every change started has been
// answered.
func (d *driver) run(ctx context.Context, rate float64, dur time.Duration) *driveResult {
	opRate := rate * 2 / eventsPerCycle
	cycles := max(1, int(rate*dur.Seconds()/eventsPerCycle+0.5))
	total := 2 * cycles
	interval := time.Duration(float64(time.Second) / opRate)

	type workerResult struct {
		ops, errs, events int64
		skipped           int64
		firstErr          error
		latency           bench.Histogram
		maxLag            time.Duration
		last              time.Time
	}
	queues := make([]chan op, len(d.resources))
	results := make([]workerResult, len(d.resources))
	start := time.Now()
	end := start.Add(dur + lateGrace)
	var wg sync.WaitGroup
	for i := range d.resources {
		queues[i] = make(chan op, total/len(d.resources)+2)
		wg.Go(func() {
			res, r := d.resources[i], &results[i]
			var lease fence.Lease
			for o := range queues[i] {
				start := time.Now()
				if start.After(end) || (o.k%2 == 1 && lease.Token == 0) {
					r.skipped++ // too late, or the release of an acquire skipped or failed
					continue
				}
				r.maxLag = max(r.maxLag, start.Sub(o.at))
				ctx, cancel := context.WithTimeout(ctx, opTimeout)
				var err error
				var events int64
				if o.k%2 == 0 {
					lease, err = d.api.Acquire(ctx, res, holder, leaseTTL, 0)
					events = eventsAcquire
				} else {
					err = d.api.Release(ctx, res, lease.Token)
					lease, events = fence.Lease{}, eventsRelease
				}
				cancel()
				done := time.Now()
				r.ops++
				r.latency.Record(done.Sub(start))
				r.last = done
				if err != nil {
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
					continue
				}
				r.events += events
			}
		})
	}

	tick := time.NewTicker(time.Millisecond)
	for k := 0; k < total; {
		now := time.Now()
		for ; k < total; k++ {
			at := start.Add(time.Duration(k) * interval)
			if at.After(now) {
				break
			}
			queues[(k/2)%len(d.resources)] <- op{k: k, at: at} // never blocks: room for all
		}
		if k < total {
			<-tick.C
		}
	}
	tick.Stop()
	for _, q := range queues {
		close(q)
	}
	wg.Wait()

	out := &driveResult{scheduledRate: float64(cycles*eventsPerCycle) / (float64(total) * interval.Seconds())}
	var last time.Time
	for i := range results {
		r := &results[i]
		out.ops += r.ops
		out.skipped += r.skipped
		out.errs += r.errs
		out.events += r.events
		if out.firstErr == nil {
			out.firstErr = r.firstErr
		}
		out.latency.Merge(&r.latency)
		out.maxLag = max(out.maxLag, r.maxLag)
		if r.last.After(last) {
			last = r.last
		}
	}
	out.elapsed = last.Sub(start)
	return out
}
