package check

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
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
func (j *judge) checkTokenOrder(h *hist) {
	var ws []write
	for _, w := range h.acked {
		if w.op.Rev == 0 {
			j.toNoRev++ // cannot be placed in the order
			continue
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return
	}
	j.tokenOrder.checked += len(ws)
	j.toResources++
	r := h.resource
	slices.SortStableFunc(ws, func(a, b write) int { return cmp.Compare(a.op.Rev, b.op.Rev) })
	var top write // the write with the highest token so far
	for i, w := range ws {
		if i > 0 && w.token < top.token {
			j.tokenOrder.add(j.next(), 0, Violation{
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

func (j *judge) tokenOrderResult() Result {
	note := fmt.Sprintf("%d acknowledged writes in %d resources", j.tokenOrder.checked, j.toResources)
	if j.toNoRev > 0 {
		note += fmt.Sprintf("; %d acknowledged writes without a revision skipped", j.toNoRev)
	}
	return j.tokenOrder.result(TokenOrder, note)
}

// checkStaleAccepted: no write is acknowledged with a token lower than one
// acknowledged for its resource (by a write, or a grant unless
// Options.FenceOnWrite) before the write was invoked. It also counts the
// stale attempts into the report.
func (j *judge) checkStaleAccepted(h *hist) {
	// The marks: the resource's ok grants and its acknowledged writes.
	var ms []mark
	var attempts []write
	for i, op := range h.ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.OK && !h.fenceOnWrite {
			ms = append(ms, mark{h.ret(op), op.Token, op})
		}
		attempts = append(attempts, h.writes(op, h.seqs[i])...)
	}
	for _, w := range h.acked {
		ms = append(ms, mark{h.ret(w.op), w.token, w.op})
	}
	j.stale.checked += len(attempts)
	if len(ms) == 0 {
		return
	}
	index := newMarks(ms)
	reported := make(map[int64]bool) // one violation per op (and resource)
	for _, w := range attempts {
		top, ok := index.before(w.op.Call)
		if !ok || top.token <= w.token {
			continue
		}
		if !j.staleOps[w.op.ID] {
			j.staleOps[w.op.ID] = true
			j.rep.StaleAttempts++
			if w.op.Outcome == history.Fenced {
				j.rep.StaleRejected++
			}
		}
		if w.op.Outcome != history.OK || reported[w.op.ID] {
			continue
		}
		reported[w.op.ID] = true
		how := "accepted"
		if top.op.Kind == history.KindAcquire {
			how = "granted"
		}
		j.stale.add(w.seq, w.wi, Violation{
			Checker: StaleAccepted,
			Message: fmt.Sprintf("resource %q: %s of key %q was accepted with token %d, but token %d had been %s by %s before it was invoked (returned at %d ns, invoked at %d ns)",
				w.resource, describe(w.op), w.key, w.token, top.token, how, describe(top.op), top.at, w.op.Call),
			Ops: []int64{w.op.ID, top.op.ID},
		})
	}
}

func (j *judge) staleResult() Result {
	note := fmt.Sprintf("%d write attempts, %d of them stale, %d of those fenced", j.stale.checked, j.rep.StaleAttempts, j.rep.StaleRejected)
	return j.stale.result(StaleAccepted, note)
}

// checkTokenMonotonic: per resource, grants in real-time order have strictly
// increasing tokens (one client's retry may get its token again), no token
// goes to two clients, and no token is granted again after its release;
// but a shared group's token goes to every holder that joins it, while
// others have left.
func (j *judge) checkTokenMonotonic(h *hist) {
	var grants []*history.Op
	released := make(map[uint64]*history.Op) // token -> first ok release
	for _, op := range h.ops {
		if op.Outcome != history.OK || op.Resource != h.resource {
			continue
		}
		switch op.Kind {
		case history.KindAcquire:
			grants = append(grants, op)
		case history.KindRelease:
			if prev := released[op.Token]; prev == nil || h.ret(op) < h.ret(prev) {
				released[op.Token] = op
			}
		}
	}
	if len(grants) == 0 {
		return
	}
	j.monotonic.checked += len(grants)
	j.tmResources++
	r := h.resource
	add := func(msg string, ids ...int64) {
		j.monotonic.add(j.next(), 0, Violation{Checker: TokenMonotonic, Message: msg, Ops: ids})
	}
	slices.SortFunc(grants, func(a, b *history.Op) int { return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.ID, b.ID)) })
	ms := make([]mark, len(grants))
	for i, op := range grants {
		ms[i] = mark{h.ret(op), op.Token, op}
	}
	index := newMarks(ms)
	owner := make(map[uint64]*history.Op) // token -> first grant of it
	for _, op := range grants {
		if top, ok := index.before(op.Call); ok && top.token > op.Token {
			add(fmt.Sprintf("resource %q: %s got token %d after %s had got token %d (returned at %d ns, invoked at %d ns)",
				r, describe(op), op.Token, describe(top.op), top.token, top.at, op.Call), op.ID, top.op.ID)
		}
		if first, ok := owner[op.Token]; !ok {
			owner[op.Token] = op
		} else if first.Client != op.Client && !(first.Shared && op.Shared) {
			add(fmt.Sprintf("resource %q: token %d was granted to client %d (op %d) and to client %d (op %d)",
				r, op.Token, first.Client, first.ID, op.Client, op.ID), op.ID, first.ID)
		}
		if rel := released[op.Token]; rel != nil && h.ret(rel) < op.Call && !op.Shared {
			add(fmt.Sprintf("resource %q: %s got token %d again after %s had released it",
				r, describe(op), op.Token, describe(rel)), op.ID, rel.ID)
		}
	}
}

func (j *judge) monotonicResult() Result {
	return j.monotonic.result(TokenMonotonic, fmt.Sprintf("%d grants in %d resources", j.monotonic.checked, j.tmResources))
}

// checkLostWrites: every acknowledged write is in the final read of its key,
// or its key's final revision is higher. Keys without a final read are
// skipped and counted into the report.
func (j *judge) checkLostWrites(h *hist) {
	// A restore of a backup cuts the history: what was acknowledged before
	// it answers to the harness's last reads before it (those of the
	// backup), and the restore to those reads.
	var restores []*history.Op
	seqOf := make(map[*history.Op]int)
	for i, op := range h.ops {
		if op.Kind == history.KindRestore && op.Outcome == history.OK && op.Resource == h.resource {
			restores = append(restores, op)
			seqOf[op] = h.seqs[i]
		}
	}
	slices.SortFunc(restores, func(a, b *history.Op) int { return cmp.Compare(a.Call, b.Call) })
	segment := func(t int64) int {
		n, _ := slices.BinarySearchFunc(restores, t, func(r *history.Op, t int64) int { return cmp.Compare(r.Call, t) })
		return n
	}
	type segKey struct {
		seg int
		key string
	}
	lastRead := make(map[segKey]*history.Op) // the harness's last read of a key in a segment
	for _, op := range h.ops {
		if op.Client != -1 || op.Kind != history.KindRead || op.Outcome != history.OK {
			continue
		}
		k := segKey{segment(op.Call), op.Key}
		if prev := lastRead[k]; prev == nil || op.Call > prev.Call {
			lastRead[k] = op
		}
	}
	for i, rop := range restores {
		for _, w := range rop.Writes {
			b := lastRead[segKey{i, w.Key}]
			if b == nil || b.Value == w.Value && b.Rev == w.Rev {
				continue
			}
			j.rep.LostAckedWrites++
			j.lost.add(seqOf[rop], 0, Violation{
				Checker: LostWrites,
				Message: fmt.Sprintf("resource %q key %q: the restore (op %d) brought back revision %d, value %q, but the backup's read (op %d) showed revision %d, value %q",
					h.resource, w.Key, rop.ID, w.Rev, truncate(w.Value), b.ID, b.Rev, truncate(b.Value)),
				Ops: []int64{rop.ID, b.ID},
			})
		}
	}
	final := func(w write) *history.Op { return lastRead[segKey{segment(w.op.Call), w.key}] }
	written := make(map[string]bool)
	for i, w := range h.acked {
		written[w.key] = true
		if overwritten(h.acked, i) {
			continue // a later write of the same txn overwrote it
		}
		f := final(w)
		if f == nil {
			continue
		}
		if w.op.Rev == 0 {
			j.lwNoRev++
			continue
		}
		if h.ret(w.op) >= f.Call {
			j.lwLate++ // not over when the final read began: linearizable judges it
			continue
		}
		j.lost.checked++
		if f.Rev > w.op.Rev || (f.Rev == w.op.Rev && f.Value == w.value) {
			continue
		}
		j.rep.LostAckedWrites++
		j.lost.add(w.seq, w.wi, Violation{
			Checker: LostWrites,
			Message: fmt.Sprintf("resource %q key %q: %s was acknowledged with token %d at revision %d, value %q, but the final read (op %d) shows revision %d, value %q",
				w.resource, w.key, describe(w.op), w.token, w.op.Rev, truncate(w.value), f.ID, f.Rev, truncate(f.Value)),
			Ops: []int64{w.op.ID, f.ID},
		})
	}
	for k := range written {
		if lastRead[segKey{len(restores), k}] != nil {
			j.rep.FinalReadKeys++
		} else {
			j.rep.KeysWithoutFinalRead++
		}
	}
}

func (j *judge) lostResult() Result {
	note := fmt.Sprintf("%d acknowledged writes to %d keys with a final read; %d written keys without a final read skipped",
		j.lost.checked, j.rep.FinalReadKeys, j.rep.KeysWithoutFinalRead)
	if j.lwNoRev > 0 {
		note += fmt.Sprintf("; %d acknowledged writes without a revision skipped", j.lwNoRev)
	}
	if j.lwLate > 0 {
		note += fmt.Sprintf("; %d acknowledged writes that returned after their key's final read began skipped", j.lwLate)
	}
	return j.lost.result(LostWrites, note)
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
