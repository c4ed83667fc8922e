package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

type pauseRecord struct {
	client     int
	resource   string
	token      uint64
	start, end int64
}

// injectFaults runs the fault schedule until ctx ends: a quiet gap, one
// fault, and again. The faults of a cluster run to their end unless abort
// ends first (the run was interrupted).
func (r *run) injectFaults(ctx, abort context.Context) {
	favour := ""
	if r.cfg.UnsafeEpoch {
		// The negative control: a deposed leader commits only what was
		// under way in it when it froze, and only if that wins the race
		// with its own step-down when it wakes (its etcd client sees the
		// lost lease at once, without a round trip): about one
		// leader-pause in two. So two faults in three are leader-pauses.
		favour = FaultLeaderPause
		if !slices.Contains(r.cfg.Faults, FaultLeaderPause) {
			favour = FaultPartition // held-back paths, its zombie-leader variant
		}
	}
	if r.cfg.UnsafeClock {
		favour = FaultClockSkew // its negative control
	}
	sched := newSchedule(r.cfg.Faults, favour)
	for {
		if len(sched.kinds) == 0 {
			<-ctx.Done()
			return
		}
		if !sleep(ctx, faultGap(r.cfg.FaultEvery, r.rng)) {
			return
		}
		kind, _ := sched.next(r.rng)
		switch kind {
		case FaultPause:
			r.pause(ctx)
		case FaultKill:
			r.kill(ctx)
		case FaultNet:
			r.net(ctx)
		case FaultBitflip:
			r.bitflip(ctx)
		case FaultLoseUnsynced:
			r.loseUnsynced(ctx)
		case FaultRestore:
			r.restore(ctx)
		case FaultClockSkew:
			r.clockSkew(ctx)
		case FaultLeaderKill:
			r.leaderKill(abort)
		case FaultLeaderPause:
			r.leaderPause(abort)
		case FaultEngineKill:
			r.engineKill(abort, sched)
		case FaultEngineNet:
			r.engineNet(abort)
		case FaultPartition:
			r.partition(abort)
		}
	}
}

// faultGap draws the quiet gap before a fault: uniform from 0.4 to 1.6
// times every, in whole milliseconds. For DefaultFaultEvery it draws what
// the harness drew before the gap could be set (500 + IntN(1500) ms), so
// that a seed gives the same runs as before.
func faultGap(every time.Duration, rng *rand.Rand) time.Duration {
	lo := every * 2 / 5
	span := max(int(every*6/5/time.Millisecond), 1)
	return lo + time.Duration(rng.IntN(span))*time.Millisecond
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// addWindow records a fault's window: operations that return unknown in it
// (or shortly before it) show that it bit.
func (r *run) addWindow(start, end int64) {
	r.mu.Lock()
	r.netWindows = append(r.netWindows, [2]int64{start, end})
	r.mu.Unlock()
}

func (r *run) addFault(f history.Fault) {
	err := r.hist.WriteFault(f)
	r.mu.Lock()
	r.faults = append(r.faults, f)
	if err != nil && r.histErr == nil {
		r.histErr = err
	}
	r.mu.Unlock()
	// One sentence, as fence chaos prints it: "fault net at 553ms for 1ms:
	// reset every connection"; the detail names the client, if one.
	r.cfg.Log.Info(fmt.Sprintf("fault %s at %s for %s: %s", f.Kind, time.Duration(f.Start).Round(time.Millisecond),
		time.Duration(f.End-f.Start).Round(time.Millisecond), f.Detail))
}

// pause arms a client, waits for it to stop between its acquire and its
// write, and freezes it for one and a half to three TTLs, and then on until
// another client has been granted its resource (up to maxPauseTTLs TTLs in
// all), and lets it send its write after SIGCONT before it returns: so
// that the write is stale, and sent before the run ends, however slowly the
// others ran meanwhile (a loaded machine). That write is what fencing must
// refuse and what a negative control must see accepted.
func (r *run) pause(ctx context.Context) {
	c := r.rng.IntN(len(r.clients))
	proc := r.clients[c].Process
	for len(r.pauseC) > 0 {
		<-r.pauseC // stale points of earlier arms
	}
	proc.Signal(syscall.SIGUSR1)
	var p pausePoint
	select {
	case p = <-r.pauseC:
	case <-time.After(3 * r.cfg.TTL):
		return // it never got a lease in time; it stays armed for later
	case <-ctx.Done():
		return
	}
	proc = r.clients[p.PausePoint.Client].Process
	d := r.cfg.TTL + time.Duration(r.rng.Int64N(int64(2*r.cfg.TTL)))
	d = max(d, r.cfg.TTL*3/2)
	proc.Signal(syscall.SIGSTOP)
	start := r.now()
	time.Sleep(d) // not cut short at the end of the run: the pause must outlast the TTL
	for deadline := time.Now().Add(time.Duration(maxPauseTTLs)*r.cfg.TTL - d); r.grantedAbove(p.PausePoint.Resource, p.PausePoint.Token, 0) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	woke := r.nops
	r.mu.Unlock()
	proc.Signal(syscall.SIGCONT)
	end := r.now()
	// Let it send its write before the run may end and stop the clients:
	// that write is what the pause was for.
	for deadline := time.Now().Add(2 * r.cfg.TTL); !r.movedSince(p.PausePoint.Client, woke) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	r.pauses = append(r.pauses, pauseRecord{p.PausePoint.Client, p.PausePoint.Resource, p.PausePoint.Token, start, end})
	r.mu.Unlock()
	r.addFault(history.Fault{Kind: FaultPause, Client: p.PausePoint.Client, Start: start, End: end,
		Detail: fmt.Sprintf("SIGSTOP client-%d holding %s token %d", p.PausePoint.Client, p.PausePoint.Resource, p.PausePoint.Token)})
}

// maxPauseTTLs bounds a pause, in TTLs, while it waits for its resource
// to be granted to another client.
const maxPauseTTLs = 6

// movedSince reports whether client has recorded a write, a txn or an
// acquire since the history had n ops.
func (r *run) movedSince(client, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.moved[client] > n
}

// kill kills the server with SIGKILL and restarts it on the same data.
func (r *run) kill(ctx context.Context) {
	start := r.now()
	r.server.kill()
	down := time.Duration(100+r.rng.IntN(700)) * time.Millisecond
	time.Sleep(down)
	if err := r.server.start(); err != nil {
		r.cfg.Log.Error("restarting the server failed", "error", err)
		return
	}
	r.restarted()
	r.addFault(history.Fault{Kind: FaultKill, Client: -1, Start: start, End: r.now(), Detail: "kill -9 fence serve, restart on the same data"})
}

// net injects one network fault on every proxy.
func (r *run) net(ctx context.Context) {
	start := r.now()
	var detail string
	d := time.Duration(300+r.rng.IntN(int(2*r.cfg.TTL/time.Millisecond))) * time.Millisecond
	switch r.rng.IntN(4) {
	case 0:
		lat := time.Duration(20+r.rng.IntN(180)) * time.Millisecond
		detail = fmt.Sprintf("latency %s ± %s", lat, lat/2)
		r.eachProxy(func(p *proxy.Proxy) { p.SetLatency(lat, lat/2) })
	case 1:
		detail = "reset every connection"
		d = 0
		r.eachProxy(func(p *proxy.Proxy) { p.ResetAll() })
	case 2:
		detail = "black-hole"
		r.eachProxy(func(p *proxy.Proxy) { p.Blackhole(true) })
	case 3:
		detail = "refuse connections"
		r.eachProxy(func(p *proxy.Proxy) { p.Refuse(true); p.ResetAll() })
	}
	sleep(ctx, d)
	r.eachProxy(func(p *proxy.Proxy) { p.Heal() })
	end := r.now()
	r.mu.Lock()
	r.netWindows = append(r.netWindows, [2]int64{start, end})
	r.mu.Unlock()
	r.addFault(history.Fault{Kind: FaultNet, Client: -1, Start: start, End: end, Detail: detail})
}

func (r *run) eachProxy(f func(*proxy.Proxy)) {
	for _, p := range r.proxies {
		f(p)
	}
}
