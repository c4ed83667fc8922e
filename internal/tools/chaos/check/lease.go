package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// leaseSlack is what lease-exclusive allows for the clocks of the
// processes that stamp the history, which are read at different moments.
const leaseSlack = 2 * time.Millisecond

// holdKey names one holder's hold: a token and the client it was granted
// to (the holders of a shared group share its token).
type holdKey struct {
	token  uint64
	client int
}

// releases are the calls of the releases sent, by hold. A hold may be
// granted again to its holder after a release whose answer was lost (the
// server restarted, and restored it), so a release counts only for the
// grants before it.
type releases[K comparable] map[K][]int64

func (r releases[K]) add(k K, call int64) { r[k] = append(r[k], call) }

// after returns the first release of k sent after t.
func (r releases[K]) after(k K, t int64) (int64, bool) {
	first, ok := int64(0), false
	for _, at := range r[k] {
		if at > t && (!ok || at < first) {
			first, ok = at, true
		}
	}
	return first, ok
}

// checkLeaseExclusive: no lease is granted while another client's could
// still run. A grant's lease runs for at least Options.TTL from its
// acquire's call (a lease in a session: until its op's Until, the
// session's last renewal's call plus the TTL) (the lock service counts it from when the request
// arrived, and a restart or a failover gives it its full TTL again), so
// the next grant of the resource must return after that, or after the
// holder released it (a release sent, whatever its answer) or asked for
// a newer hold of it (a downgrade to shared), or after a restore of a
// backup, which ends every lease. A grant in between ended a
// lease early for its holder, who still believed it held the lock: what a
// server whose clock jumped ahead, and timed its leases by it, would do.
// The grants of one token are one hold: one holder's lease (granted again
// to the same holder's retries), or a shared group, whose holders hold at
// once; so every grant of the next token must come after every hold of
// the token before it has ended: never shared beside exclusive.
// It needs Options.TTL; without it the checker checks nothing.
func (j *judge) checkLeaseExclusive(h *hist) {
	ttl := int64(j.opts.TTL)
	if ttl <= 0 {
		return
	}
	var grants []*history.Op
	byClient := make(map[int][]*history.Op) // the grants, by client
	released := make(releases[holdKey])     // -> the calls of the releases sent
	var restores []int64                    // calls of the resource's restores
	for _, op := range h.ops {
		if op.Resource != h.resource {
			continue
		}
		switch {
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			grants = append(grants, op)
			byClient[op.Client] = append(byClient[op.Client], op)
		case op.Kind == history.KindRelease && op.Outcome != history.Fail:
			released.add(holdKey{op.Token, op.Client}, op.Call)
		case op.Kind == history.KindRestore:
			restores = append(restores, op.Call)
		}
	}
	j.checkRefusedHoldsNothing(h)
	slices.SortFunc(grants, func(a, b *history.Op) int { return cmp.Or(cmp.Compare(a.Token, b.Token), cmp.Compare(a.Call, b.Call)) })
	j.leases.checked += len(grants)
	// ran reports whether prev's hold could still run when next returned.
	ran := func(prev, next *history.Op) (until int64, ok bool) {
		until = prev.Call + ttl
		if prev.Until != 0 {
			until = prev.Until // in a session: it ends with the session
		}
		ret := h.ret(next)
		if ret >= until-int64(leaseSlack) {
			return until, false
		}
		if at, ok := released.after(holdKey{prev.Token, prev.Client}, prev.Call); ok && at < ret {
			return until, false
		}
		if slices.ContainsFunc(restores, func(at int64) bool { return at > prev.Call && at < ret }) {
			return until, false
		}
		// Its holder asked for a newer hold of the resource: a downgrade to
		// shared, which ends the exclusive lease in the same change (its
		// release was refused, say, by a server that was down, and the
		// lease went on).
		if slices.ContainsFunc(byClient[prev.Client], func(g *history.Op) bool {
			return g.Token > prev.Token && g.Call > prev.Call && g.Call < ret
		}) {
			return until, false
		}
		return until, true
	}
	var prevHold []*history.Op // the grants of the token before
	for start := 0; start < len(grants); {
		end := start + 1
		for end < len(grants) && grants[end].Token == grants[start].Token {
			end++
		}
		hold := grants[start:end]
	nexts:
		for _, next := range hold {
			for _, prev := range prevHold {
				until, running := ran(prev, next)
				if !running {
					continue
				}
				kind := func(op *history.Op) string {
					if op.Shared {
						return "shared hold"
					}
					return "lease"
				}
				j.leases.add(j.next(), 0, Violation{
					Checker: LeaseExclusive,
					Message: fmt.Sprintf("resource %q: %s got token %d (a %s), returning at %d ns, while the %s of token %d that %s had got (invoked at %d ns, TTL %s) could run until %d ns and was not released",
						h.resource, describe(next), next.Token, kind(next), h.ret(next), kind(prev), prev.Token, describe(prev), prev.Call, time.Duration(ttl), until),
					Ops: []int64{next.ID, prev.ID},
				})
				continue nexts // one violation per grant
			}
		}
		prevHold, start = hold, end
	}
}

// checkRefusedHoldsNothing: a multi-acquire that was refused holds none
// of its resources afterwards. The probe its client made of each lock
// right after the refusal must not find the client holding it with a
// token that no acquire of the client's was granted (one of unknown
// outcome, before the probe, may have been). Part of lease-exclusive.
func (j *judge) checkRefusedHoldsNothing(h *hist) {
	for _, p := range h.ops {
		if p.Kind != history.KindProbe || p.Resource != h.resource || p.Outcome != history.OK || p.Token == 0 ||
			p.Value != "client-"+strconv.Itoa(p.Client) {
			continue
		}
		j.leases.checked++
		excused := slices.ContainsFunc(h.ops, func(op *history.Op) bool {
			return op.Kind == history.KindAcquire && op.Client == p.Client && op.Resource == p.Resource && op.Call < p.Call &&
				(op.Outcome == history.OK && op.Token == p.Token || op.Outcome == history.Unknown)
		})
		if excused {
			continue
		}
		j.leases.add(j.next(), 0, Violation{
			Checker: LeaseExclusive,
			Message: fmt.Sprintf("resource %q: %s found client %d holding it with token %d after its multi-acquire was refused, a token no acquire of it was granted: the refused request held a resource",
				h.resource, describe(p), p.Client, p.Token),
			Ops: []int64{p.ID},
		})
	}
}

// permitHold is one permit granted: its slot's grant, and the release of
// it, if one was sent.
type permitHold struct {
	grant    *history.Op
	released int64 // the first call of a release sent; 0 if none
}

// notePermit collects, in the first pass, the grants and releases of the
// slots of semaphores (fence.SlotResource names), which checkPermits
// counts across the slots once the history is read.
func (j *judge) notePermit(op *history.Op) {
	if _, _, _, ok := fence.ParseSlot(op.Resource); !ok {
		return
	}
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		g := *op
		j.permitGrants = append(j.permitGrants, &g)
	case op.Kind == history.KindRelease && op.Outcome != history.Fail:
		j.permitReleases.add(slotHold{op.Resource, holdKey{op.Token, op.Client}}, op.Call)
	}
}

// slotHold names a hold of one slot.
type slotHold struct {
	slot string
	holdKey
}

// checkPermits: never more than N permits of a semaphore of limit N held
// at once, counting each permit as held from its grant's return until a
// TTL after its acquire's call or the release's call, whichever is first
// (so that what is counted surely overlapped). The grants of one hold (a
// holder given its own permit again, after a release that did not reach
// the server) count as one, from the first to the last. Part of
// lease-exclusive.
func (j *judge) checkPermits() {
	ttl := int64(j.opts.TTL)
	if ttl <= 0 || len(j.permitGrants) == 0 {
		return
	}
	type edge struct {
		at    int64
		delta int
		op    *history.Op
	}
	type span struct {
		from, until int64
		op          *history.Op
	}
	holds := make(map[slotHold]*span)
	var order []slotHold
	for _, g := range j.permitGrants {
		from, until := max(g.Return, g.Call), g.Call+ttl-int64(leaseSlack)
		k := slotHold{g.Resource, holdKey{g.Token, g.Client}}
		if at, ok := j.permitReleases.after(k, g.Call); ok {
			until = min(until, at)
		}
		if s := holds[k]; s != nil {
			s.from, s.until = min(s.from, from), max(s.until, until)
			continue
		}
		holds[k] = &span{from, until, g}
		order = append(order, k)
	}
	bySem := make(map[string][]edge)
	limits := make(map[string]int)
	for _, k := range order {
		s := holds[k]
		base, _, n, _ := fence.ParseSlot(k.slot)
		limits[base] = n
		if s.until <= s.from {
			continue
		}
		bySem[base] = append(bySem[base], edge{s.from, 1, s.op}, edge{s.until, -1, s.op})
	}
	for _, base := range slices.Sorted(maps.Keys(bySem)) {
		edges := bySem[base]
		// Ends before starts at one instant: holds that only touch do not overlap.
		slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
		held := 0
		for _, e := range edges {
			held += e.delta
			if e.delta > 0 && held > limits[base] {
				j.leases.add(j.next(), 0, Violation{
					Checker: LeaseExclusive,
					Message: fmt.Sprintf("semaphore %q: %s got a permit on %s (token %d) at %d ns, while %d permits were held already: more than its limit %d",
						base, describe(e.op), e.op.Resource, e.op.Token, e.at, held-1, limits[base]),
					Ops: []int64{e.op.ID},
				})
				break // one violation per semaphore
			}
		}
	}
}

func (j *judge) leaseResult() Result {
	if j.opts.TTL <= 0 {
		return j.leases.result(LeaseExclusive, "not checked: the leases' TTL is not known")
	}
	return j.leases.result(LeaseExclusive, fmt.Sprintf("%d grants, each lease at least %s from its acquire's call", j.leases.checked, j.opts.TTL))
}
