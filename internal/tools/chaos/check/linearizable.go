package check

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// htmlMaxOps bounds the operations drawn in the visualisation: porcupine's
// own check, which the visualisation needs, takes memory quadratic in the
// length of a partition (see search.go).
const htmlMaxOps = 50_000

// linHistory turns a partition into porcupine operations, and returns how
// many of its ops (of those that count in it, see judge.resourcesOf) it left
// out.
//
// Acknowledged reads enter; other reads tell nothing. Acknowledged grants
// raise the fence (unless Options.FenceOnWrite: then grants stay out);
// grants of unknown outcome may have raised it. Writes and txns enter when
// acknowledged, fenced or unknown; failed and otherwise rejected ones did
// nothing and are left out, as are releases. An op with an unknown outcome
// gets a Return one second after the end of the history, so it may take
// effect at any point after its call — except a grant of unknown outcome,
// which does not enter the model at all: it may have raised the fence to an
// unknown token at an unknown time, so every fenced write of that resource
// that returned after the grant was called counts as explained (it is not
// strict). Accepted writes stay strictly checked. As model ops, the
// thousands of grants cut short by kills and network faults in a long run
// would each stay concurrent with everything after them, and the search
// would explode.
func (j *judge) linHistory(h *hist) (ops []porcupine.Operation, dropped int) {
	type item struct {
		in  *linInput
		out linOutput
		op  *history.Op
	}
	var items []item
	// fuzzySince is the call of the resource's first grant of unknown outcome.
	var fuzzySince int64
	for _, op := range h.ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.Unknown && op.Resource == h.resource && !h.fenceOnWrite {
			if fuzzySince == 0 || op.Call < fuzzySince {
				fuzzySince = max(op.Call, 1)
			}
		}
	}
	for _, op := range h.ops {
		n := len(items)
		switch {
		case op.Kind == history.KindRead && op.Outcome == history.OK:
			if h.resource != "" {
				items = append(items, item{&linInput{resource: h.resource, kind: linRead, key: op.Key}, linOutput{outcome: history.OK, value: op.Value, rev: op.Rev}, op})
			}
		case op.Kind == history.KindRestore && op.Outcome == history.OK && op.Resource == h.resource:
			in := &linInput{resource: h.resource, kind: linRestore, token: op.Token}
			for _, w := range op.Writes {
				in.writes = append(in.writes, kv{w.Key, w.Value})
				in.revs = append(in.revs, w.Rev)
			}
			items = append(items, item{in, linOutput{outcome: history.OK}, op})
		case op.Kind == history.KindAcquire && op.Outcome == history.OK && !h.fenceOnWrite:
			items = append(items, item{&linInput{resource: op.Resource, kind: linGrant, token: op.Token}, linOutput{outcome: history.OK}, op})
		case op.Mutates() && (op.Outcome == history.OK || op.Outcome == history.Fenced || op.Outcome == history.Unknown):
			// One model write in this resource, with its token; the
			// txn's writes to other resources are theirs.
			g := &linInput{resource: h.resource, kind: linWrite, txn: op.Kind == history.KindTxn}
			resources := 0
			var seen []string
			for _, w := range writesOf(op, 0) {
				if !slices.Contains(seen, w.resource) {
					seen = append(seen, w.resource)
					resources++
				}
				if w.resource != h.resource {
					continue
				}
				g.token = max(g.token, w.token) // one token per resource; a txn sends one
				g.writes = append(g.writes, kv{w.key, w.value})
			}
			if len(g.writes) == 0 {
				break
			}
			g.strict = (resources == 1 || op.Resource == g.resource) &&
				!(op.Outcome == history.Fenced && fuzzySince != 0 && fuzzySince < h.ret(op))
			out := linOutput{outcome: op.Outcome}
			if op.Outcome == history.OK {
				out.rev = op.Rev
			}
			items = append(items, item{g, out, op})
		}
		if len(items) == n && j.resourcesOf(op)[0] == h.resource {
			dropped++
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.op.Call, b.op.Call) })

	// Porcupine draws one row per ClientId and wants a row's ops not to
	// overlap. A client's ops overlap when one has an unknown outcome (it
	// lasts until the end), or for a txn's writes: such ops go to another
	// row ("lane") of the same client. Rows are numbered by client, then lane.
	type lane struct{ client, lane int }
	lanes := make([]lane, len(items))
	ends := make(map[int][]int64) // client -> lane -> last return
	used := make(map[lane]bool)
	for i, it := range items {
		ls := ends[it.op.Client]
		l := slices.IndexFunc(ls, func(end int64) bool { return end < it.op.Call })
		if l < 0 {
			ls = append(ls, 0)
			l = len(ls) - 1
		}
		ls[l] = h.ret(it.op)
		ends[it.op.Client] = ls
		lanes[i] = lane{it.op.Client, l}
		used[lanes[i]] = true
	}
	rows := make([]lane, 0, len(used))
	for l := range used {
		rows = append(rows, l)
	}
	slices.SortFunc(rows, func(a, b lane) int { return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.lane, b.lane)) })
	row := make(map[lane]int, len(rows))
	for i, l := range rows {
		row[l] = i
	}

	ops = make([]porcupine.Operation, len(items))
	for i, it := range items {
		ops[i] = porcupine.Operation{
			ClientId: row[lanes[i]],
			Input:    it.in,
			Call:     it.op.Call,
			Output:   it.out,
			Return:   h.ret(it.op),
			Metadata: it.op,
		}
	}
	return ops, dropped
}

// checkLinearizable checks one partition with search (see search.go), within
// what is left of Options.Timeout, and keeps a failed partition for the
// visualisation.
func (j *judge) checkLinearizable(h *hist) {
	lin := &j.rep.Linearizability
	ops, dropped := j.linHistory(h)
	lin.Dropped += dropped
	if len(ops) == 0 {
		return
	}
	lin.Ops += len(ops)
	lin.MaxOps = max(lin.MaxOps, len(ops))
	j.lin.checked += len(ops)
	if j.start.IsZero() {
		j.start = time.Now()
	}
	ctx, cancel := context.WithDeadline(context.Background(), j.start.Add(j.opts.Timeout))
	defer cancel()
	model := fencedModel()
	began := time.Now()
	result, longest := search(ctx, model, ops)
	j.searchTime += time.Since(began)

	pr := Partition{Resource: h.resource, Ops: len(ops), Result: "ok"}
	for _, op := range ops {
		if op.Output.(linOutput).outcome == history.Unknown {
			pr.Unknown++
		}
	}
	switch result {
	case searchUnknown:
		pr.Result = "unknown"
		j.linUnknownN++
		j.linUndecided = append(j.linUndecided, fmt.Sprintf("%q (%d ops)", h.resource, len(ops)))
	case searchIllegal:
		pr.Result = "illegal"
		j.linIllegal++
		j.lin.add(j.next(), 0, explain(model, h.resource, ops, longest))
	}
	lin.Partitions = append(lin.Partitions, pr)
	if result != searchOK && j.opts.HTMLDir != "" {
		if j.failedOps+len(ops) <= htmlMaxOps {
			j.failed = append(j.failed, ops...)
			j.failedOps += len(ops)
		} else {
			j.failedLeftOut = append(j.failedLeftOut, fmt.Sprintf("%q (%d ops)", h.resource, len(ops)))
		}
	}
}

// linResult sums up the linearizability check into rep, and writes the
// visualisation of the partitions that failed.
func (j *judge) linResult(rep *Report) Result {
	lin := &rep.Linearizability
	switch {
	case j.linIllegal > 0:
		lin.Result = "illegal"
	case j.linUnknownN > 0:
		lin.Result = "timeout"
	default:
		lin.Result = "ok"
	}
	if len(j.linUndecided) > 0 {
		j.lin.add(j.next(), 0, Violation{
			Checker: Linearizable,
			Message: fmt.Sprintf("the linearizability check timed out after %v without deciding: %s; the history is too concurrent or too long (partition sizes are in the report)",
				j.opts.Timeout, strings.Join(j.linUndecided, ", ")),
		})
	}
	if len(j.failed) > 0 || len(j.failedLeftOut) > 0 {
		path := filepath.Join(j.opts.HTMLDir, HTMLFile)
		var errs []string
		if len(j.failed) > 0 {
			if err := writeHTML(j.failed, j.faults, j.opts.Timeout, path); err != nil {
				errs = append(errs, err.Error())
			} else {
				lin.HTML = path
			}
		}
		if len(j.failedLeftOut) > 0 {
			errs = append(errs, fmt.Sprintf("left out of the visualisation, over %d ops in all: %s", htmlMaxOps, strings.Join(j.failedLeftOut, ", ")))
		}
		lin.HTMLError = strings.Join(errs, "; ")
		j.failed = nil
	}
	note := fmt.Sprintf("%d ops in %d partitions (largest %d), %d history ops left out, %s in %d ms",
		lin.Ops, len(lin.Partitions), lin.MaxOps, lin.Dropped, lin.Result, lin.DurationMS)
	return j.lin.result(Linearizable, note)
}

// explain names the ops of a partition that no linearization can place:
// those that could come right after the longest linearizable prefix, and
// cannot.
func explain(model porcupine.Model, resource string, part []porcupine.Operation, longest []int) Violation {
	state := model.Init()
	done := make([]bool, len(part))
	for _, id := range longest {
		_, state = model.Step(state, part[id].Input, part[id].Output)
		done[id] = true
	}
	// The ops that may come next: every op not yet placed that was called
	// before the first of them returned.
	first := int64(1<<63 - 1)
	for i, op := range part {
		if !done[i] {
			first = min(first, op.Return)
		}
	}
	var next, bad []int
	for i, op := range part {
		if !done[i] && op.Call <= first {
			next = append(next, i)
			if ok, _ := model.Step(state, op.Input, op.Output); !ok {
				bad = append(bad, i)
			}
		}
	}
	if len(bad) == 0 {
		bad = next
	}
	slices.SortFunc(bad, func(a, b int) int { return cmp.Compare(part[a].Call, part[b].Call) })
	const show = 5
	var ids []int64
	var descs []string
	for _, i := range bad {
		op := part[i].Metadata.(*history.Op)
		ids = append(ids, op.ID)
		if len(descs) < show {
			descs = append(descs, fmt.Sprintf("op %d (client %d) %s", op.ID, op.Client, model.DescribeOperation(part[i].Input, part[i].Output)))
		}
	}
	if len(bad) > show {
		descs = append(descs, fmt.Sprintf("and %d more", len(bad)-show))
	}
	return Violation{
		Checker: Linearizable,
		Message: fmt.Sprintf("resource %q is not linearizable: after the longest linearizable prefix (%d of %d ops), in state %s, none of these can come next: %s",
			resource, len(longest), len(part), model.DescribeState(state), strings.Join(descs, "; ")),
		Ops: ids,
	}
}

// writeHTML runs porcupine's own check on ops, the partitions that failed,
// for the record its visualisation needs, and writes the visualisation with
// the faults as annotations.
func writeHTML(ops []porcupine.Operation, faults []history.Fault, timeout time.Duration, path string) (err error) {
	defer func() {
		if p := recover(); p != nil { // porcupine panics on a model it cannot replay
			err = fmt.Errorf("visualisation: %v", p)
		}
	}()
	model := fencedModel()
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	var anns []porcupine.Annotation
	for _, f := range faults {
		tag := "faults: all"
		if f.Client >= 0 {
			tag = fmt.Sprintf("faults: client %d", f.Client)
		}
		color := "#e5e7eb"
		switch f.Kind {
		case "pause", "leader-pause":
			color = "#fde68a"
		case "kill", "crash", "restart", "leader-kill", "engine-kill":
			color = "#fca5a5"
		case "partition", "network", "latency", "drop", "reset", "net", "engine-net":
			color = "#bfdbfe"
		}
		anns = append(anns, porcupine.Annotation{
			Tag:             tag,
			Start:           f.Start,
			End:             max(f.End, f.Start),
			Description:     f.Kind,
			Details:         strings.TrimSpace(fmt.Sprintf("%s %s [%d, %d] ns", f.Kind, f.Detail, f.Start, f.End)),
			BackgroundColor: color,
		})
	}
	info.AddAnnotations(anns)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(model, info, path)
}
