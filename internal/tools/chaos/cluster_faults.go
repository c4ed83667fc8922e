package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

// leaderPauseFor draws how long leader-pause freezes the leader: past the
// election TTL (another server takes over), then one lease TTL (the new
// leader restores every lease for a full TTL before it may grant it
// anew), and one to three seconds more for the new holder's grant and
// writes, so that the old leader wakes with stale requests queued on it.
func leaderPauseFor(electionTTL, ttl time.Duration, rng *rand.Rand) time.Duration {
	return electionTTL + ttl + time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
}

// maxLeaderPause is the longest leaderPauseFor draws.
func maxLeaderPause(electionTTL, ttl time.Duration) time.Duration {
	return electionTTL + ttl + 3*time.Second
}

// clientTimeout is the clients' per-request timeout: an acquire may wait
// two TTLs. In a cluster run it outlasts a leader-pause: the request of a
// client pinned to the frozen leader is still waiting when it wakes, so
// that what the old leader does with it is in the history as ok, fenced or
// rejected, not unknown.
func clientTimeout(cfg Config) time.Duration {
	d := 2*cfg.TTL + time.Second
	if cfg.Cluster != "" {
		d = max(d, maxLeaderPause(cfg.electionTTL(), cfg.TTL)+2*time.Second)
	}
	return d
}

// leaderDown draws how long leader-kill leaves the killed leader down: about
// the election TTL, so that it comes back sometimes before and sometimes
// after another server has taken over.
func leaderDown(electionTTL time.Duration, rng *rand.Rand) time.Duration {
	return electionTTL/2 + time.Duration(rng.Int64N(int64(electionTTL)))
}

// findLeader returns the fence server that leads now, waiting a few
// seconds for one (a takeover may be under way).
func (r *run) findLeader(ctx context.Context) (int, uint64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	i, st, ok := r.cl.leader(ctx, -1)
	return i, st.Epoch, ok
}

// leaderKill kills the leading fence server with SIGKILL and restarts it on
// its port after a while: it rejoins as a standby.
func (r *run) leaderKill(ctx context.Context) {
	i, epoch, ok := r.findLeader(ctx)
	if !ok {
		r.cfg.Log.Warn("leader-kill skipped", "error", errNoLeader)
		return
	}
	s := r.cl.servers[i]
	start := r.now()
	s.kill()
	down := leaderDown(r.cl.electionTTL, r.rng)
	if !sleep(ctx, down) {
		return // aborted: cleanup stops everything
	}
	detail := fmt.Sprintf("kill -9 %s (leader, epoch %d); restarted after %s", s.name, epoch, down.Round(time.Millisecond))
	if err := s.restart(); err != nil {
		r.cfg.Log.Error("restarting a fence server failed", "server", s.name, "error", err)
		detail += fmt.Sprintf(" (restart failed: %v)", err)
	} else {
		r.restarts++
	}
	end := r.now()
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultLeaderKill, Client: -1, Start: start, End: end, Detail: detail})
}

// leaderPause freezes the leading fence server with SIGSTOP past the
// election TTL, watching another take over, then wakes it with SIGCONT:
// the requests of the clients pinned to it wait in its sockets, and it
// serves them as soon as it runs again. It is not cut short at the end of
// the run (only when the run is aborted): the pause must outlast the
// election TTL.
//
// First it stops one of the leader's clients just before a write (a write
// point), frozen with the leader. Once the new leader has granted that
// resource anew (or half a second before the old one wakes), the client
// runs again and sends its write, with its token now stale, to the frozen
// leader: the old leader must not acknowledge it. That is e2e's pause
// scenario, in every leader-pause.
//
// The standbys forward to the frozen leader too, until they see it gone, so
// every other client soon waits on it as well, through its own server. Once
// another server leads, the connections of those clients are reset, as
// their timeouts would end them: they go on through the new leader, which
// grants and writes while the old one sleeps.
func (r *run) leaderPause(ctx context.Context) {
	i, epoch, ok := r.findLeader(ctx)
	if !ok {
		r.cfg.Log.Warn("leader-pause skipped", "error", errNoLeader)
		return
	}
	s := r.cl.servers[i]
	d := leaderPauseFor(r.cl.electionTTL, r.cfg.TTL, r.rng)
	wp := r.armWritePoint(ctx, i)
	var held *os.Process // wp's client while it is frozen
	if wp != nil {
		held = wp.proc
	}
	if err := s.pause(); err != nil {
		r.cfg.Log.Warn("leader-pause skipped", "error", err)
		if held != nil {
			held.Signal(syscall.SIGCONT)
		}
		return
	}
	start := r.now()
	r.mu.Lock()
	seen := r.nops // the ops recorded from now on returned during the pause
	r.mu.Unlock()
	deadline := time.Now().Add(d)
	took, newEpoch := -1, uint64(0)
	var regranted uint64 // the token the new leader granted wp's resource, if it did before the client went on
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if held != nil {
			if t := r.grantedAbove(wp.resource, wp.token, seen); t > 0 || left <= 500*time.Millisecond {
				regranted = t
				held.Signal(syscall.SIGCONT) // its stale write goes to the frozen leader
				held = nil
			}
		}
		step := min(left, 100*time.Millisecond)
		if took < 0 {
			wctx, cancel := context.WithTimeout(ctx, min(left, time.Second))
			if j, st, ok := r.cl.leader(wctx, i); ok && st.Epoch > epoch {
				took, newEpoch = j, st.Epoch
				for k, p := range r.proxies {
					if k != i {
						p.ResetAll()
					}
				}
			}
			cancel()
			step = 0
		}
		if held == nil && took >= 0 {
			step = left
		}
		if !sleep(ctx, step) {
			break
		}
	}
	if held != nil {
		held.Signal(syscall.SIGCONT)
	}
	s.resume()
	end := r.now()
	detail := fmt.Sprintf("SIGSTOP %s (leader, epoch %d) for %s; ", s.name, epoch, time.Duration(end-start).Round(time.Millisecond))
	if took >= 0 {
		r.takeovers++
		detail += fmt.Sprintf("%s took over (epoch %d)", r.cl.servers[took].name, newEpoch)
	} else {
		detail += "no other server took over meanwhile"
	}
	if wp != nil {
		detail += fmt.Sprintf("; client-%d, stopped before its write to %s with token %d, sent it to the frozen leader", wp.client, wp.resource, wp.token)
		if regranted > 0 {
			detail += fmt.Sprintf(" after %s was granted token %d", wp.resource, regranted)
		}
	}
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultLeaderPause, Client: -1, Start: start, End: end, Detail: detail})
}

// heldWrite is a client frozen at a write point.
type heldWrite struct {
	client   int
	resource string
	token    uint64
	proc     *os.Process
}

// armWritePoint asks a client pinned to server i to stop just before its
// next write, waits up to two TTLs for it to get there, and freezes it with
// SIGSTOP; nil if no client got there (the client stays armed; a later
// write point of it is dropped).
func (r *run) armWritePoint(ctx context.Context, i int) *heldWrite {
	var pinned []int
	for c := range r.clients {
		if pin(c, len(r.cl.servers)) == i {
			pinned = append(pinned, c)
		}
	}
	if len(pinned) == 0 {
		return nil
	}
	for len(r.writeC) > 0 {
		<-r.writeC // stale points of earlier arms
	}
	c := pinned[r.rng.IntN(len(pinned))]
	r.clients[c].Process.Signal(syscall.SIGUSR2)
	timeout := time.NewTimer(2 * r.cfg.TTL)
	defer timeout.Stop()
	for {
		select {
		case p := <-r.writeC:
			if p.WritePoint.Client != c {
				continue // a client armed by an earlier leader-pause
			}
			proc := r.clients[c].Process
			proc.Signal(syscall.SIGSTOP)
			return &heldWrite{client: c, resource: p.WritePoint.Resource, token: p.WritePoint.Token, proc: proc}
		case <-timeout.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// grantedAbove returns a token above token that resource was granted by an
// op recorded after the first seen ops; 0 if none (or if it was granted so
// long ago that it is no longer among the last maxGrantMarks grants).
func (r *run) grantedAbove(resource string, token uint64, seen int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.grants[resource] {
		if g.n > seen && g.token > token {
			return g.token
		}
	}
	return 0
}

// engineKill crashes the engine's leader. etcd: kill -9 the Raft leader and
// restart it after a while. postgres: kill -9 the primary and promote the
// synchronous standby, once: after that no synchronous standby is left, and
// engine-kill is dropped from the schedule.
func (r *run) engineKill(ctx context.Context, sched *schedule) {
	start := r.now()
	var detail string
	switch {
	case r.cl.etcd != nil:
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := r.cl.etcd.Leader(lctx)
		cancel()
		if err != nil {
			r.cfg.Log.Warn("engine-kill skipped", "error", err)
			return
		}
		start = r.now()
		if err := m.Kill(); err != nil {
			r.cfg.Log.Error("engine-kill failed", "error", err)
			return
		}
		down := time.Duration(500+r.rng.IntN(1500)) * time.Millisecond
		sleep(ctx, down)
		if err := m.Start(); err != nil {
			r.cfg.Log.Error("restarting an etcd member failed", "member", m.Name, "error", err)
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r.cl.etcd.WaitHealthy(hctx)
		cancel()
		detail = fmt.Sprintf("kill -9 %s (Raft leader); restarted after %s", m.Name, down.Round(time.Millisecond))
	case r.cl.pg != nil:
		if err := r.cl.pg.Primary.Kill(); err != nil {
			r.cfg.Log.Error("engine-kill failed", "error", err)
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := r.cl.pg.Standby.Promote(pctx)
		cancel()
		sched.drop(FaultEngineKill)
		detail = "kill -9 the primary; promoted the synchronous standby " + r.cl.pg.Standby.Name
		if err != nil {
			r.cfg.Log.Error("promoting the standby failed", "error", err)
			detail += fmt.Sprintf(" (failed: %v)", err)
		}
		r.cfg.Log.Info("engine-kill is not repeated in this run: the promoted standby runs alone, with no synchronous standby to promote next")
	}
	end := r.now()
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultEngineKill, Client: -1, Start: start, End: end, Detail: detail})
}

// engineNet injects one network fault between the fence servers and the
// engine, on every node's proxy or on one node's, for a bounded window
// (up to twice the election TTL: a leader cut off that long loses its
// leadership).
func (r *run) engineNet(ctx context.Context) {
	targets, where := slices.Concat(r.cl.proxies...), "every "+r.cl.kind+" node"
	if r.rng.IntN(2) == 0 {
		n := r.rng.IntN(len(r.cl.proxies))
		targets, where = r.cl.proxies[n], r.cl.nodes[n]
	}
	each := func(f func(*proxy.Proxy)) {
		for _, p := range targets {
			f(p)
		}
	}
	start := r.now()
	d := 300*time.Millisecond + time.Duration(r.rng.Int64N(int64(2*r.cl.electionTTL)))
	var what string
	switch r.rng.IntN(4) {
	case 0:
		lat := time.Duration(20+r.rng.IntN(180)) * time.Millisecond
		what = fmt.Sprintf("latency %s ± %s", lat, lat/2)
		each(func(p *proxy.Proxy) { p.SetLatency(lat, lat/2) })
	case 1:
		what, d = "reset every connection", 0
		each(func(p *proxy.Proxy) { p.ResetAll() })
	case 2:
		what = "black-hole"
		each(func(p *proxy.Proxy) { p.Blackhole(true) })
	case 3:
		what = "refuse connections"
		each(func(p *proxy.Proxy) { p.Refuse(true); p.ResetAll() })
	}
	sleep(ctx, d)
	each(func(p *proxy.Proxy) { p.Heal() })
	end := r.now()
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultEngineNet, Client: -1, Start: start, End: end,
		Detail: fmt.Sprintf("%s between the fence servers and %s", what, where)})
}
