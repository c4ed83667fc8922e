package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// step is one kind of request whose latency is recorded, or the whole cycle.
type step int

const (
	stepAcquire step = iota
	stepWrite
	stepRenew
	stepRelease
	stepCycle
	nSteps
)

// stepNames are the steps' names in Report and Timeline.
var stepNames = [nSteps]string{"acquire", "write", "renew", "release", "cycle"}

const (
	// drainGrace bounds how long the clients may take, after the measured
	// time, to finish the requests in flight and give their leases back
	// (Timeout is shorter if it is smaller). Requests still running then are
	// cancelled.
	drainGrace = 3 * time.Second

	// cleanupTimeout bounds a release sent after the run was cancelled.
	cleanupTimeout = 2 * time.Second

	// maxBackoff bounds the pause after consecutive failed operations, which
	// grows from 1 ms; it keeps a client from spinning on a dead server.
	maxBackoff = 100 * time.Millisecond
)

// resource is one resource and what the benchmark knows of it, for the
// safety checks. The checks hold mu only for a few comparisons, never across
// a request.
type resource struct {
	name string
	endpoints

	mu         sync.Mutex
	holder     int       // the client whose lease is live as far as the benchmark knows; -1 if none
	validFrom  time.Time // when holder sent the acquire or renew that last succeeded: its lease lasts at least TTL from then
	last       int       // the client granted last; -1 if none
	maxToken   uint64    // the highest token of an accepted write
	maxTokenAt time.Time // when the answer to that write came
}

// runner is one run: the shared state of its clients.
type runner struct {
	cfg       Config
	resources []*resource
	value     []byte // the value of every PUT; read-only

	start, from, to time.Time // started, measuring from, measuring to
	timeline        *timeline // of the measured time

	stopped                         atomic.Pointer[time.Time] // when the caller's ctx was cancelled, if it was
	ops, errs                       atomic.Int64              // in the measured time, for Progress
	overlaps, regressions, expiries atomic.Int64              // in the whole run
}

// client is one closed-loop client. Only its own goroutine touches it until
// the run is over.
type client struct {
	r      *runner
	id     int
	holder string
	conn   *conn

	hist         [nSteps]Histogram
	ops          int64
	acquisitions int64
	handoffs     int64
	errors       map[string]int64
	samples      map[string]string // the first error message of each code
	streak       int               // failed operations in a row
	tally        tally             // the counts of the client's current interval of the timeline
}

// Run runs the benchmark cfg describes against a fence server and returns
// its Report. It first checks that the server answers GET /readyz, and
// returns an error if it does not or if cfg is not valid. Otherwise it runs
// for cfg.Warmup + cfg.Duration, or until ctx is cancelled, and returns the
// Report of what it measured, with every failed request counted in
// Report.Errors: a Report with Ops == 0 is a run in which nothing succeeded.
//
// Run gives back every lease it holds before it returns, unless the server
// does not answer within a short deadline.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Holder == "" {
		cfg.Holder = fmt.Sprintf("bench-%08x", rand.Uint32())
	}
	base := strings.TrimRight(cfg.Addr, "/")
	r := &runner{cfg: cfg, value: make([]byte, cfg.ValueSize), timeline: newTimeline(cfg.Duration)}
	for i := range r.value {
		r.value[i] = 'a' + byte(i%26)
	}
	for i := range cfg.Resources {
		name := ResourcePrefix + strconv.Itoa(i)
		r.resources = append(r.resources, &resource{
			name: name, endpoints: newEndpoints(base, name, cfg.Key), holder: -1, last: -1,
		})
	}
	clients := make([]*client, cfg.Clients)
	for i := range clients {
		holder := cfg.Holder + "-" + strconv.Itoa(i)
		clients[i] = &client{
			r: r, id: i, holder: holder,
			conn:    newConn(holder, cfg.TTL.Milliseconds(), cfg.Wait.Milliseconds()),
			errors:  map[string]int64{},
			samples: map[string]string{},
			tally:   tally{interval: -1},
		}
		clients[i].conn.authToken = cfg.AuthToken
		defer clients[i].conn.close()
	}

	readyCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err := clients[0].conn.ready(readyCtx, base)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s is not ready: %w", base, err)
	}

	r.start = time.Now()
	r.from = r.start.Add(cfg.Warmup)
	r.to = r.from.Add(cfg.Duration)
	stop := context.AfterFunc(ctx, func() {
		now := time.Now()
		r.stopped.Store(&now)
	})
	defer stop()
	runCtx, cancel := context.WithDeadline(ctx, r.to.Add(min(drainGrace, cfg.Timeout)))
	defer cancel()

	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.run(runCtx) })
	}
	doneC := make(chan struct{})
	var progress sync.WaitGroup
	if cfg.Progress != nil {
		progress.Go(func() { r.progress(doneC) })
	}
	wg.Wait()
	close(doneC)
	progress.Wait()

	return r.report(clients), nil
}

// progress calls cfg.Progress every ProgressInterval until doneC closes.
func (r *runner) progress(doneC <-chan struct{}) {
	t := time.NewTicker(r.cfg.ProgressInterval)
	defer t.Stop()
	var lastOps int64
	var rate float64
	lastAt := r.from
	for {
		select {
		case <-doneC:
			return
		case <-t.C:
		}
		now := time.Now()
		p := Progress{Ops: r.ops.Load(), Errors: r.errs.Load(), Remaining: max(r.to.Sub(now), 0)}
		if now.Before(r.from) {
			p.Warmup, p.Elapsed = true, now.Sub(r.start)
		} else {
			p.Elapsed = min(now.Sub(r.from), r.cfg.Duration)
			end := now
			if end.After(r.to) {
				end = r.to
			}
			switch d := end.Sub(lastAt); {
			case d >= r.cfg.ProgressInterval/2:
				rate = float64(p.Ops-lastOps) / d.Seconds()
				lastOps, lastAt = p.Ops, end
			case d > 0 && end.After(r.from):
				// A sliver of an interval (a late tick before the end, on
				// a loaded machine) says little: the rate of the whole
				// measured time so far instead, not 0 for no op in 5 ms.
				rate = float64(p.Ops) / end.Sub(r.from).Seconds()
				lastOps, lastAt = p.Ops, end
			} // else past the end: the last rate stands
			p.Rate = rate
		}
		r.cfg.Progress(p)
	}
}

// inWindow reports whether t is in the measured time: after the warm-up,
// before the end and before the run was cancelled.
func (r *runner) inWindow(t time.Time) bool {
	if s := r.stopped.Load(); s != nil && t.After(*s) {
		return false
	}
	return !t.Before(r.from) && !t.After(r.to)
}

// granted notes that client id was granted res: it sent the acquire at sent
// and had the answer at recv. If another client's lease was still live, the
// holders overlap. It reports whether the lock changed hands.
func (r *runner) granted(res *resource, id int, sent, recv time.Time) (handoff bool) {
	res.mu.Lock()
	defer res.mu.Unlock()
	if res.holder >= 0 && res.holder != id {
		// The other holder had not started to release. Its lease was granted
		// or renewed after validFrom, so it lasted at least until validFrom +
		// TTL; our grant happened before recv. Granted before then, the two
		// leases overlapped. Later, the other lease may just have expired.
		if recv.Before(res.validFrom.Add(r.cfg.TTL)) {
			r.overlaps.Add(1)
		} else {
			r.expiries.Add(1)
		}
	}
	handoff = res.last >= 0 && res.last != id
	res.holder, res.validFrom, res.last = id, sent, id
	return handoff
}

// renewed notes that client id renewed its lease on res with a request sent at sent.
func (r *runner) renewed(res *resource, id int, sent time.Time) {
	res.mu.Lock()
	defer res.mu.Unlock()
	if res.holder == id {
		res.validFrom = sent
	}
}

// releasing notes that client id no longer counts on its lease on res. It
// must be called before the release is sent: once the server has the
// release, it may grant the lock to another client, which must not find id
// still marked as the holder.
func (r *runner) releasing(res *resource, id int) {
	res.mu.Lock()
	defer res.mu.Unlock()
	if res.holder == id {
		res.holder = -1
	}
}

// accepted notes a write to res with token that was sent at sent and
// accepted, answered at recv. A write sent after the answer to a write with
// a higher token came should have been fenced: accepting it is a regression.
func (r *runner) accepted(res *resource, token uint64, sent, recv time.Time) {
	res.mu.Lock()
	defer res.mu.Unlock()
	if token < res.maxToken && sent.After(res.maxTokenAt) {
		r.regressions.Add(1)
	}
	if token > res.maxToken {
		res.maxToken, res.maxTokenAt = token, recv
	}
}

func (c *client) run(ctx context.Context) {
	if c.r.cfg.Workload == Write {
		c.writeLoop(ctx)
	} else {
		c.cycleLoop(ctx)
	}
}

// running reports whether the client should start another operation.
func (c *client) running(ctx context.Context) bool {
	return ctx.Err() == nil && time.Now().Before(c.r.to)
}

// cycleLoop is the Cycle and Contended workload: acquire → PUT → release.
func (c *client) cycleLoop(ctx context.Context) {
	res := c.r.resources[c.id%len(c.r.resources)]
	for c.running(ctx) {
		c.pause(ctx)
		t0 := time.Now()
		token, err := c.acquire(ctx, res)
		t1 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				c.abandon(ctx, res)
				return
			}
			c.fail(ctx, t1, err)
			continue
		}
		c.granted(res, t0, t1)
		counted := c.r.inWindow(t1)
		if !counted && !c.running(ctx) {
			// Granted after the end (a waiter of Contended): hand the lock on.
			c.r.releasing(res, c.id)
			if err := c.release(ctx, res, token); err != nil {
				c.fail(ctx, time.Now(), err)
			}
			return
		}
		// A cycle counts, as its acquisition does, by when it was granted:
		// one granted in the measured time is finished past its end (ctx
		// lasts drainGrace longer), so that each acquisition counted is
		// one cycle, an operation or the error of its write or release
		// (unless the run is interrupted, or the drain runs out).
		werr := c.put(ctx, res, token)
		t2 := time.Now()
		if werr != nil {
			c.fail(ctx, t1, werr) // counted by when the cycle was granted
		} else {
			c.r.accepted(res, token, t1, t2)
			c.record(stepWrite, t1, t2)
		}
		c.r.releasing(res, c.id)
		err = c.release(ctx, res, token)
		t3 := time.Now()
		if err != nil {
			if werr == nil { // one error per cycle
				c.fail(ctx, t1, err)
			}
			continue
		}
		c.record(stepRelease, t2, t3)
		if werr == nil && counted {
			c.hist[stepCycle].Record(t3.Sub(t0))
			c.at(t1).steps[stepCycle].record(t3.Sub(t0))
		}
		if werr == nil {
			c.succeed(t1)
		}
	}
}

// writeLoop is the Write workload: hold leases, loop fenced PUTs.
func (c *client) writeLoop(ctx context.Context) {
	type lease struct {
		res     *resource
		token   uint64    // 0 if not held
		renewed time.Time // when the last acquire or renew was sent
	}
	var leases []lease
	for j := c.id; j < len(c.r.resources); j += c.r.cfg.Clients {
		leases = append(leases, lease{res: c.r.resources[j]})
	}
	defer func() {
		for _, l := range leases {
			if l.token != 0 {
				c.r.releasing(l.res, c.id)
				if err := c.release(ctx, l.res, l.token); err != nil {
					c.fail(ctx, time.Now(), err)
				}
			}
		}
	}()
	renewEvery := c.r.cfg.TTL / 3
	for i := 0; c.running(ctx); i++ {
		c.pause(ctx)
		l := &leases[i%len(leases)]
		if l.token == 0 {
			t0 := time.Now()
			token, err := c.acquire(ctx, l.res)
			t1 := time.Now()
			if err != nil {
				if ctx.Err() != nil {
					c.abandon(ctx, l.res)
					return
				}
				c.fail(ctx, t1, err)
				continue
			}
			c.granted(l.res, t0, t1)
			l.token, l.renewed = token, t0
		}
		if time.Since(l.renewed) >= renewEvery {
			t0 := time.Now()
			err := c.renew(ctx, l.res, l.token)
			t1 := time.Now()
			if err != nil {
				c.fail(ctx, t1, err)
				if errorCode(err) == codeLeaseLost {
					c.r.releasing(l.res, c.id)
					l.token = 0
				}
				continue
			}
			c.r.renewed(l.res, c.id, t0)
			c.record(stepRenew, t0, t1)
			l.renewed = t0
		}
		t0 := time.Now()
		err := c.put(ctx, l.res, l.token)
		t1 := time.Now()
		if err != nil {
			c.fail(ctx, t1, err)
			if code := errorCode(err); code == codeFenced || code == codeNotIssued {
				// A newer holder has the resource: this lease is worthless.
				c.r.releasing(l.res, c.id)
				l.token = 0
			}
			continue
		}
		c.r.accepted(l.res, l.token, t0, t1)
		c.record(stepWrite, t0, t1)
		c.succeed(t1)
	}
}

func (c *client) acquire(ctx context.Context, res *resource) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.r.cfg.Timeout+c.r.cfg.Wait)
	defer cancel()
	return c.conn.acquire(ctx, &res.endpoints, true)
}

// abandon is called when an acquire of res was cancelled in flight because
// the run stopped. The server may have granted it all the same; then an
// acquire without waiting, by the same holder, answers that lease (a safe
// retry), which abandon releases. Otherwise it gets lock_held, or a fresh
// lease that it releases too.
//
// The cancelled request may also still be on its way, or queued behind
// another client's lease, and be granted after that: a second pass a
// moment later releases such a late grant too, rather than leave it held
// for its TTL.
func (c *client) abandon(ctx context.Context, res *resource) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.r.cfg.Timeout, cleanupTimeout))
	defer cancel()
	for pass := range 2 {
		if pass > 0 {
			select {
			case <-time.After(abandonAgain):
			case <-ctx.Done():
				return
			}
		}
		if token, err := c.conn.acquire(ctx, &res.endpoints, false); err == nil {
			_ = c.conn.release(ctx, &res.endpoints, token) // best effort: the run is over
		}
	}
}

// abandonAgain is how long abandon waits before its second pass.
const abandonAgain = 200 * time.Millisecond

func (c *client) put(ctx context.Context, res *resource, token uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.r.cfg.Timeout)
	defer cancel()
	return c.conn.put(ctx, &res.endpoints, token, c.r.value)
}

func (c *client) renew(ctx context.Context, res *resource, token uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.r.cfg.Timeout)
	defer cancel()
	return c.conn.renew(ctx, &res.endpoints, token)
}

// release gives a lease back, even after ctx is done: a lease must not
// outlive the run and keep the resource from the next one for its TTL.
func (c *client) release(ctx context.Context, res *resource, token uint64) error {
	// The end of the run does not cut a release short, even one already
	// on its way: the lease would stay held for its TTL.
	timeout := c.r.cfg.Timeout
	if ctx.Err() != nil {
		timeout = min(timeout, cleanupTimeout)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return c.conn.release(ctx, &res.endpoints, token)
}

// granted records an acquire of res sent at t0 and answered at t1.
func (c *client) granted(res *resource, t0, t1 time.Time) {
	handoff := c.r.granted(res, c.id, t0, t1)
	if c.r.inWindow(t1) {
		c.hist[stepAcquire].Record(t1.Sub(t0))
		c.at(t1).steps[stepAcquire].record(t1.Sub(t0))
		c.acquisitions++
		if handoff {
			c.handoffs++
		}
	}
}

// record records the latency of a step that ended in the measured time.
func (c *client) record(s step, t0, t1 time.Time) {
	if c.r.inWindow(t1) {
		c.hist[s].Record(t1.Sub(t0))
		c.at(t1).steps[s].record(t1.Sub(t0))
	}
}

// at returns the client's tally of the timeline's interval that holds t, a
// time in the measured window. When t is in another interval than the
// tally's, at adds the tally to the timeline and starts the one of t's
// interval. The times a client passes grow but for a cycle's operation,
// counted at its grant after its write and release were recorded: so this
// happens about once per interval.
func (c *client) at(t time.Time) *tally {
	i := c.r.timeline.index(t.Sub(c.r.from))
	if i != c.tally.interval {
		c.r.timeline.add(&c.tally)
		c.tally.interval = i
	}
	return &c.tally
}

// succeed counts an operation that completed at t (a cycle: that was
// granted at t).
func (c *client) succeed(t time.Time) {
	c.streak = 0
	if c.r.inWindow(t) {
		c.ops++
		c.at(t).ops++
		c.r.ops.Add(1)
	}
}

// fail counts err, which happened at t, by its code.
func (c *client) fail(ctx context.Context, t time.Time, err error) {
	if ctx.Err() != nil {
		return // the run was stopped: the request was cancelled, not failed
	}
	c.streak++
	if !c.r.inWindow(t) {
		return
	}
	code := errorCode(err)
	c.errors[code]++
	c.at(t).errors++
	if _, ok := c.samples[code]; !ok {
		c.samples[code] = err.Error()
	}
	c.r.errs.Add(1)
}

// pause waits after failed operations, 1 ms after the first and twice as
// long after each further one, up to maxBackoff.
func (c *client) pause(ctx context.Context) {
	if c.streak == 0 {
		return
	}
	d := min(time.Millisecond<<min(c.streak-1, 10), maxBackoff, time.Until(c.r.to))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
