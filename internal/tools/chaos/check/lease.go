package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// leaseSlack is what lease-exclusive allows for the clocks of the
// processes that stamp the history, which are read at different moments.
const leaseSlack = 2 * time.Millisecond

// checkLeaseExclusive: no lease is granted while another client's could
// still run. A grant's lease runs for at least Options.TTL from its
// acquire's call (a lease in a session: until its op's Until, the
// session's last renewal's call plus the TTL) (the lock service counts it from when the request
// arrived, and a restart or a failover gives it its full TTL again), so
// the next grant of the resource must return after that, or after the
// holder released it (a release sent, whatever its answer), or after a
// restore of a backup, which ends every lease. A grant in between ended a
// lease early for its holder, who still believed it held the lock: what a
// server whose clock jumped ahead, and timed its leases by it, would do.
// It needs Options.TTL; without it the checker checks nothing.
func (j *judge) checkLeaseExclusive(h *hist) {
	ttl := int64(j.opts.TTL)
	if ttl <= 0 {
		return
	}
	var grants []*history.Op
	released := make(map[uint64]int64) // token -> first call of a release sent
	var restores []int64               // calls of the resource's restores
	for _, op := range h.ops {
		if op.Resource != h.resource {
			continue
		}
		switch {
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			grants = append(grants, op)
		case op.Kind == history.KindRelease && op.Outcome != history.Fail:
			if at, ok := released[op.Token]; !ok || op.Call < at {
				released[op.Token] = op.Call
			}
		case op.Kind == history.KindRestore:
			restores = append(restores, op.Call)
		}
	}
	slices.SortFunc(grants, func(a, b *history.Op) int { return cmp.Or(cmp.Compare(a.Token, b.Token), cmp.Compare(a.Call, b.Call)) })
	j.leases.checked += len(grants)
	for i := 1; i < len(grants); i++ {
		prev, next := grants[i-1], grants[i]
		if next.Token == prev.Token {
			continue // the same holder again: its lease refreshed
		}
		until := prev.Call + ttl
		if prev.Until != 0 {
			until = prev.Until // in a session: it ends with the session
		}
		ends := until - int64(leaseSlack)
		ret := h.ret(next)
		if ret >= ends {
			continue
		}
		if at, ok := released[prev.Token]; ok && at < ret {
			continue
		}
		if slices.ContainsFunc(restores, func(at int64) bool { return at > prev.Call && at < ret }) {
			continue
		}
		j.leases.add(j.next(), 0, Violation{
			Checker: LeaseExclusive,
			Message: fmt.Sprintf("resource %q: %s got token %d, returning at %d ns, while the lease of token %d that %s had got (invoked at %d ns, TTL %s) could run until %d ns and was not released",
				h.resource, describe(next), next.Token, ret, prev.Token, describe(prev), prev.Call, time.Duration(ttl), until),
			Ops: []int64{next.ID, prev.ID},
		})
	}
}

func (j *judge) leaseResult() Result {
	if j.opts.TTL <= 0 {
		return j.leases.result(LeaseExclusive, "not checked: the leases' TTL is not known")
	}
	return j.leases.result(LeaseExclusive, fmt.Sprintf("%d grants, each lease at least %s from its acquire's call", j.leases.checked, j.opts.TTL))
}
