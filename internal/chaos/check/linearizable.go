package check

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fence-lock/fence/internal/chaos/history"
)

// linHistory turns a history into porcupine operations, grouped by resource
// in name order, and returns how many history ops it left out.
//
// Acknowledged reads enter; other reads tell nothing. Acknowledged grants
// raise the fence; grants of unknown outcome may have raised it. Writes and
// txns enter when acknowledged, fenced or unknown; failed and otherwise
// rejected ones did nothing and are left out, as are releases. An op with an
// unknown outcome gets a Return one second after the end of the history, so it
// may take effect at any point after its call — except a grant of unknown
// outcome, which does not enter the model at all: it may have raised the
// fence to an unknown token at an unknown time, so every fenced write of that
// resource that returned after the grant was called counts as explained (it
// is not strict). Accepted writes stay strictly checked. As model ops, the
// thousands of grants cut short by kills and network faults in a long run
// would each stay concurrent with everything after them, and porcupine's
// search would explode.
func linHistory(h *hist) (ops []porcupine.Operation, dropped int) {
	type item struct {
		in  *linInput
		out linOutput
		op  *history.Op
	}
	var items []item
	// fuzzySince is, per resource, the call of its first grant of unknown outcome.
	fuzzySince := map[string]int64{}
	for i := range h.ops {
		op := &h.ops[i]
		if op.Kind == history.KindAcquire && op.Outcome == history.Unknown {
			if t, ok := fuzzySince[op.Resource]; !ok || op.Call < t {
				fuzzySince[op.Resource] = max(op.Call, 1)
			}
		}
	}
	for i := range h.ops {
		op := &h.ops[i]
		n := len(items)
		switch {
		case op.Kind == history.KindRead && op.Outcome == history.OK:
			if r := h.resourceOf(op); r != "" {
				items = append(items, item{&linInput{resource: r, kind: linRead, key: op.Key}, linOutput{outcome: history.OK, value: op.Value, rev: op.Rev}, op})
			}
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			items = append(items, item{&linInput{resource: op.Resource, kind: linGrant, token: op.Token}, linOutput{outcome: history.OK}, op})
		case op.Mutates() && (op.Outcome == history.OK || op.Outcome == history.Fenced || op.Outcome == history.Unknown):
			// One model write per resource, with that resource's token.
			var groups []*linInput
			for _, w := range writesOf(op) {
				j := slices.IndexFunc(groups, func(in *linInput) bool { return in.resource == w.resource })
				if j < 0 {
					groups = append(groups, &linInput{resource: w.resource, kind: linWrite, txn: op.Kind == history.KindTxn})
					j = len(groups) - 1
				}
				g := groups[j]
				g.token = max(g.token, w.token) // one token per resource; a txn sends one
				g.writes = append(g.writes, kv{w.key, w.value})
			}
			for _, g := range groups {
				g.strict = (len(groups) == 1 || op.Resource == g.resource) &&
					!(op.Outcome == history.Fenced && fuzzySince[g.resource] != 0 && fuzzySince[g.resource] < h.ret(op))
				out := linOutput{outcome: op.Outcome}
				if op.Outcome == history.OK {
					out.rev = op.Rev
				}
				items = append(items, item{g, out, op})
			}
		}
		if len(items) == n {
			dropped++
		}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		return cmp.Or(strings.Compare(a.in.resource, b.in.resource), cmp.Compare(a.op.Call, b.op.Call))
	})

	// Porcupine draws one row per ClientId and wants a row's ops not to
	// overlap. A client's ops overlap when one has an unknown outcome (it
	// lasts until the end), or for a txn's writes: such ops go to another
	// row ("lane") of the same client. Rows are numbered by client, then lane.
	type lane struct{ client, lane int }
	lanes := make([]lane, len(items))
	ends := make(map[string]map[int][]int64) // resource -> client -> lane -> last return
	used := make(map[lane]bool)
	for i, it := range items {
		byClient := ends[it.in.resource]
		if byClient == nil {
			byClient = make(map[int][]int64)
			ends[it.in.resource] = byClient
		}
		ls := byClient[it.op.Client]
		l := slices.IndexFunc(ls, func(end int64) bool { return end < it.op.Call })
		if l < 0 {
			ls = append(ls, 0)
			l = len(ls) - 1
		}
		ls[l] = h.ret(it.op)
		byClient[it.op.Client] = ls
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

// checkLinearizable runs porcupine and fills rep.Linearizability.
func checkLinearizable(h *hist, faults []history.Fault, opts Options, rep *Report) Result {
	res := Result{Name: Linearizable}
	lin := &rep.Linearizability
	ops, dropped := linHistory(h)
	lin.Ops, lin.Dropped = len(ops), dropped
	model := fencedModel()
	parts := partitionByResource(ops)

	start := time.Now()
	result, info := porcupine.CheckOperationsVerbose(model, ops, opts.Timeout)
	lin.DurationMS = time.Since(start).Milliseconds()
	partials := info.PartialLinearizations()

	var undecided []string
	for p, part := range parts {
		in := part[0].Input.(*linInput)
		pr := Partition{Resource: in.resource, Ops: len(part), Result: "ok"}
		for _, op := range part {
			if op.Output.(linOutput).outcome == history.Unknown {
				pr.Unknown++
			}
		}
		lin.MaxOps = max(lin.MaxOps, len(part))
		var longest []int
		if p < len(partials) {
			for _, l := range partials[p] {
				if len(l) > len(longest) {
					longest = l
				}
			}
		}
		switch {
		case len(longest) == len(part):
		case result == porcupine.Unknown:
			pr.Result = "unknown"
			undecided = append(undecided, fmt.Sprintf("%q (%d ops)", in.resource, len(part)))
		default:
			pr.Result = "illegal"
			res.Violations = append(res.Violations, explain(model, in.resource, part, longest))
		}
		lin.Partitions = append(lin.Partitions, pr)
	}
	switch result {
	case porcupine.Ok:
		lin.Result = "ok"
	case porcupine.Illegal:
		lin.Result = "illegal"
	default:
		lin.Result = "timeout"
		res.Violations = append(res.Violations, Violation{
			Checker: Linearizable,
			Message: fmt.Sprintf("porcupine timed out after %v without deciding: %s; the history is too concurrent or too long (partition sizes are in the report)",
				opts.Timeout, strings.Join(undecided, ", ")),
		})
	}
	res.Checked = len(ops)
	res.Note = fmt.Sprintf("%d ops in %d partitions (largest %d), %d history ops left out, %s in %d ms",
		len(ops), len(parts), lin.MaxOps, dropped, lin.Result, lin.DurationMS)

	if result != porcupine.Ok && opts.HTMLDir != "" {
		path := filepath.Join(opts.HTMLDir, HTMLFile)
		if err := writeHTML(model, info, faults, path); err != nil {
			lin.HTMLError = err.Error()
		} else {
			lin.HTML = path
		}
	}
	return res
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

// writeHTML writes porcupine's visualisation with the faults as annotations.
func writeHTML(model porcupine.Model, info porcupine.LinearizationInfo, faults []history.Fault, path string) (err error) {
	defer func() {
		if p := recover(); p != nil { // porcupine panics on a model it cannot replay
			err = fmt.Errorf("visualisation: %v", p)
		}
	}()
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
