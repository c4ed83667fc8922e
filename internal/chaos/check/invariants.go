package check

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fence-lock/fence/internal/chaos/history"
)

// describe names an op for a message: "write op 12 (client 3)".
func describe(op *history.Op) string {
	kind := string(op.Kind)
	if op.Kind == history.KindAcquire {
		kind = "grant"
	}
	if op.Client < 0 {
		return fmt.Sprintf("%s op %d (harness)", kind, op.ID)
	}
	return fmt.Sprintf("%s op %d (client %d)", kind, op.ID, op.Client)
}

// checkTokenOrder: per resource, the acknowledged writes sorted by revision
// never go down in token.
func checkTokenOrder(h *hist) Result {
	res := Result{Name: TokenOrder}
	var norev int
	var ws []write
	for _, w := range h.acked {
		if w.op.Rev == 0 {
			norev++ // cannot be placed in the order
			continue
		}
		ws = append(ws, w)
	}
	res.Checked = len(ws)
	groups, names := byResource(ws, func(w write) string { return w.resource })
	for _, r := range names {
		g := groups[r]
		slices.SortStableFunc(g, func(a, b write) int { return cmp.Compare(a.op.Rev, b.op.Rev) })
		var top write // the write with the highest token so far
		for i, w := range g {
			if i > 0 && w.token < top.token {
				res.Violations = append(res.Violations, Violation{
					Checker: TokenOrder,
					Message: fmt.Sprintf("resource %q: %s was accepted with token %d at revision %d, after %s had been accepted with token %d at revision %d",
						r, describe(w.op), w.token, w.op.Rev, describe(top.op), top.token, top.op.Rev),
					Ops: []int64{w.op.ID, top.op.ID},
				})
			}
			if i == 0 || w.token > top.token {
				top = w
			}
		}
	}
	res.Note = fmt.Sprintf("%d acknowledged writes in %d resources", len(ws), len(names))
	if norev > 0 {
		res.Note += fmt.Sprintf("; %d acknowledged writes without a revision skipped", norev)
	}
	return res
}

// checkStaleAccepted: no write is acknowledged with a token lower than one
// acknowledged for its resource (by a write or a grant) before the write was
// invoked. It also counts the stale attempts into rep.
func checkStaleAccepted(h *hist, rep *Report) Result {
	res := Result{Name: StaleAccepted}
	// The marks of a resource: its ok grants and its acknowledged writes
	// (a txn's writes each under their own resource).
	marksBy := make(map[string][]mark)
	var attempts []write
	for i := range h.ops {
		op := &h.ops[i]
		if op.Kind == history.KindAcquire && op.Outcome == history.OK {
			marksBy[op.Resource] = append(marksBy[op.Resource], mark{h.ret(op), op.Token, op})
		}
		attempts = append(attempts, writesOf(op)...)
	}
	for _, w := range h.acked {
		marksBy[w.resource] = append(marksBy[w.resource], mark{h.ret(w.op), w.token, w.op})
	}
	index := make(map[string]*marks, len(marksBy))
	for r, m := range marksBy {
		index[r] = newMarks(m)
	}
	staleOps := make(map[int64]bool)
	type opRes struct {
		id       int64
		resource string
	}
	reported := make(map[opRes]bool)
	for _, w := range attempts {
		m, ok := index[w.resource]
		if !ok {
			continue
		}
		top, ok := m.before(w.op.Call)
		if !ok || top.token <= w.token {
			continue
		}
		if !staleOps[w.op.ID] {
			staleOps[w.op.ID] = true
			rep.StaleAttempts++
			if w.op.Outcome == history.Fenced {
				rep.StaleRejected++
			}
		}
		if w.op.Outcome != history.OK || reported[opRes{w.op.ID, w.resource}] {
			continue // one violation per op and resource
		}
		reported[opRes{w.op.ID, w.resource}] = true
		how := "accepted"
		if top.op.Kind == history.KindAcquire {
			how = "granted"
		}
		res.Violations = append(res.Violations, Violation{
			Checker: StaleAccepted,
			Message: fmt.Sprintf("resource %q: %s of key %q was accepted with token %d, but token %d had been %s by %s before it was invoked (returned at %d ns, invoked at %d ns)",
				w.resource, describe(w.op), w.key, w.token, top.token, how, describe(top.op), top.at, w.op.Call),
			Ops: []int64{w.op.ID, top.op.ID},
		})
	}
	res.Checked = len(attempts)
	res.Note = fmt.Sprintf("%d write attempts, %d of them stale, %d of those fenced", len(attempts), rep.StaleAttempts, rep.StaleRejected)
	return res
}

// checkTokenMonotonic: per resource, grants in real-time order have strictly
// increasing tokens (one client's retry may get its token again), no token
// goes to two clients, and no token is granted again after its release.
func checkTokenMonotonic(h *hist) Result {
	res := Result{Name: TokenMonotonic}
	var grants []*history.Op
	released := make(map[string]map[uint64]*history.Op) // resource -> token -> first ok release
	for i := range h.ops {
		op := &h.ops[i]
		if op.Outcome != history.OK {
			continue
		}
		switch op.Kind {
		case history.KindAcquire:
			grants = append(grants, op)
		case history.KindRelease:
			if released[op.Resource] == nil {
				released[op.Resource] = make(map[uint64]*history.Op)
			}
			if prev := released[op.Resource][op.Token]; prev == nil || h.ret(op) < h.ret(prev) {
				released[op.Resource][op.Token] = op
			}
		}
	}
	res.Checked = len(grants)
	groups, names := byResource(grants, func(op *history.Op) string { return op.Resource })
	add := func(msg string, ids ...int64) {
		res.Violations = append(res.Violations, Violation{Checker: TokenMonotonic, Message: msg, Ops: ids})
	}
	for _, r := range names {
		g := groups[r]
		slices.SortFunc(g, func(a, b *history.Op) int { return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.ID, b.ID)) })
		ms := make([]mark, len(g))
		for i, op := range g {
			ms[i] = mark{h.ret(op), op.Token, op}
		}
		index := newMarks(ms)
		owner := make(map[uint64]*history.Op) // token -> first grant of it
		for _, op := range g {
			if top, ok := index.before(op.Call); ok && top.token > op.Token {
				add(fmt.Sprintf("resource %q: %s got token %d after %s had got token %d (returned at %d ns, invoked at %d ns)",
					r, describe(op), op.Token, describe(top.op), top.token, top.at, op.Call), op.ID, top.op.ID)
			}
			if first, ok := owner[op.Token]; !ok {
				owner[op.Token] = op
			} else if first.Client != op.Client {
				add(fmt.Sprintf("resource %q: token %d was granted to client %d (op %d) and to client %d (op %d)",
					r, op.Token, first.Client, first.ID, op.Client, op.ID), op.ID, first.ID)
			}
			if rel := released[r][op.Token]; rel != nil && h.ret(rel) < op.Call {
				add(fmt.Sprintf("resource %q: %s got token %d again after %s had released it",
					r, describe(op), op.Token, describe(rel)), op.ID, rel.ID)
			}
		}
	}
	res.Note = fmt.Sprintf("%d grants in %d resources", len(grants), len(names))
	return res
}

// checkLostWrites: every acknowledged write is in the final read of its key,
// or its key's final revision is higher. Keys without a final read are
// skipped and counted into rep.
func checkLostWrites(h *hist, rep *Report) Result {
	res := Result{Name: LostWrites}
	type rk struct{ resource, key string }
	final := make(map[rk]*history.Op)
	for i := range h.ops {
		op := &h.ops[i]
		if op.Client != -1 || op.Kind != history.KindRead || op.Outcome != history.OK {
			continue
		}
		k := rk{h.resourceOf(op), op.Key}
		if prev := final[k]; prev == nil || op.Call > prev.Call {
			final[k] = op
		}
	}
	written := make(map[rk]bool)
	var norev, late int
	for i, w := range h.acked {
		k := rk{w.resource, w.key}
		written[k] = true
		if overwritten(h.acked, i) {
			continue // a later write of the same txn overwrote it
		}
		f := final[k]
		if f == nil {
			continue
		}
		if w.op.Rev == 0 {
			norev++
			continue
		}
		if h.ret(w.op) >= f.Call {
			late++ // not over when the final read began: linearizable judges it
			continue
		}
		res.Checked++
		if f.Rev > w.op.Rev || (f.Rev == w.op.Rev && f.Value == w.value) {
			continue
		}
		rep.LostAckedWrites++
		res.Violations = append(res.Violations, Violation{
			Checker: LostWrites,
			Message: fmt.Sprintf("resource %q key %q: %s was acknowledged with token %d at revision %d, value %q, but the final read (op %d) shows revision %d, value %q",
				w.resource, w.key, describe(w.op), w.token, w.op.Rev, truncate(w.value), f.ID, f.Rev, truncate(f.Value)),
			Ops: []int64{w.op.ID, f.ID},
		})
	}
	for k := range written {
		if final[k] != nil {
			rep.FinalReadKeys++
		} else {
			rep.KeysWithoutFinalRead++
		}
	}
	res.Note = fmt.Sprintf("%d acknowledged writes to %d keys with a final read; %d written keys without a final read skipped",
		res.Checked, rep.FinalReadKeys, rep.KeysWithoutFinalRead)
	if norev > 0 {
		res.Note += fmt.Sprintf("; %d acknowledged writes without a revision skipped", norev)
	}
	if late > 0 {
		res.Note += fmt.Sprintf("; %d acknowledged writes that returned after their key's final read began skipped", late)
	}
	return res
}

// truncate shortens a value for a message.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// overwritten reports whether ws[i] is followed by a write of the same op
// (the writes of one txn are adjacent) to the same key.
func overwritten(ws []write, i int) bool {
	for j := i + 1; j < len(ws) && ws[j].op == ws[i].op; j++ {
		if ws[j].resource == ws[i].resource && ws[j].key == ws[i].key {
			return true
		}
	}
	return false
}
