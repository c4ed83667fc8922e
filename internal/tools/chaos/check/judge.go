package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// batchOps (a variable for the tests) is how many operations CheckFile holds in memory at most, but
// for a single resource that has more: it reads the file once per batch of
// resources whose operations add up to this.
var batchOps = 1 << 18

// Check judges a history held in memory. It never fails: a history it
// cannot make sense of shows up as violations, and a linearizability check
// that times out fails the linearizable checker.
//
// Every checker judges each resource on its own (a txn counts in each
// resource it writes), so Check judges the history one resource at a time,
// in name order; CheckFile does the same with a history too large to hold.
func Check(ops []history.Op, faults []history.Fault, opts Options) Report {
	j := newJudge(opts, faults)
	j.progress(Progress{})
	for i := range ops {
		j.scan(&ops[i])
	}
	j.resolve()
	parts := make(map[string]*partition, len(j.sizes))
	for _, r := range j.resources() {
		parts[r] = &partition{resource: r}
	}
	for i := range ops {
		j.route(&ops[i], i, parts)
	}
	for _, r := range j.resources() {
		j.judge(parts[r])
		delete(parts, r)
	}
	return j.report()
}

// progressOps is how often the first pass through a history file tells
// Options.Progress how far it is, in ops.
const progressOps = 1 << 16

// progress tells Options.Progress, if set, where the check is.
func (j *judge) progress(p Progress) {
	if j.opts.Progress != nil {
		j.opts.Progress(p)
	}
}

// CheckFile judges the history in the file at path (see history.Read for
// the format), with the verdict Check would give on it, without holding it
// in memory: it reads the file once to count and index it, then once for
// each batch of resources, and keeps only that batch's operations, and the
// search of one resource at a time. It fails only if the file cannot be
// read or parsed.
func CheckFile(path string, opts Options) (Report, error) {
	j := newJudge(opts, nil)
	j.progress(Progress{})
	n := 0
	err := readHistory(path, func(e *history.Entry) error {
		if e.IsFault {
			j.faults = append(j.faults, e.Fault)
			return nil
		}
		n++
		j.scan(&e.Op)
		if n%progressOps == 0 {
			j.progress(Progress{Ops: n})
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	j.resolve()
	for _, batch := range j.batches(batchOps) {
		parts := make(map[string]*partition, len(batch))
		for _, r := range batch {
			parts[r] = &partition{resource: r}
		}
		seq := 0
		err := readHistory(path, func(e *history.Entry) error {
			if e.IsFault {
				return nil
			}
			op := e.Op
			j.route(&op, seq, parts)
			seq++
			return nil
		})
		if err != nil {
			return Report{}, err
		}
		if seq != n {
			return Report{}, fmt.Errorf("check: %s: %d ops, then %d: the history changed while it was checked", path, n, seq)
		}
		for _, r := range batch {
			j.judge(parts[r])
			delete(parts, r)
		}
	}
	return j.report(), nil
}

// readHistory calls fn for each entry of the history file at path.
func readHistory(path string, fn func(*history.Entry) error) error {
	if err := history.ReadFile(path, fn); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// write is one write of a history: a plain write, or one write of a txn.
type write struct {
	op       *history.Op
	seq      int // op's position in the history
	wi       int // the write's position in op.Writes (0 for a plain write)
	resource string
	key      string
	value    string
	token    uint64
}

// writesOf returns the writes of a write or txn op, and nil for other kinds.
func writesOf(op *history.Op, seq int) []write {
	switch op.Kind {
	case history.KindWrite:
		return []write{{op, seq, 0, op.Resource, op.Key, op.Value, op.Token}}
	case history.KindTxn:
		ws := make([]write, len(op.Writes))
		for i, w := range op.Writes {
			ws[i] = write{op, seq, i, w.Resource, w.Key, w.Value, w.Token}
		}
		return ws
	}
	return nil
}

// partition is the ops of one resource, in history order: those whose
// Resource it is, the reads of keys written only under it, and the txns
// that write it.
type partition struct {
	resource string
	ops      []*history.Op
	seqs     []int // each op's position in the history
}

// hist is one resource's partition with the derived views the checkers
// share.
type hist struct {
	resource     string
	ops          []*history.Op
	seqs         []int
	maxT         int64   // the latest Call or Return in the whole history
	acked        []write // this resource's writes of ok writes and ok txns, in history order
	fenceOnWrite bool
}

func newHist(p *partition, maxT int64, fenceOnWrite bool) *hist {
	h := &hist{resource: p.resource, ops: p.ops, seqs: p.seqs, maxT: maxT, fenceOnWrite: fenceOnWrite}
	for i, op := range p.ops {
		if op.Outcome != history.OK {
			continue
		}
		for _, w := range writesOf(op, p.seqs[i]) {
			if w.resource == h.resource {
				h.acked = append(h.acked, w)
			}
		}
	}
	return h
}

// writes returns the writes of op to the partition's resource.
func (h *hist) writes(op *history.Op, seq int) []write {
	ws := writesOf(op, seq)
	return slices.DeleteFunc(ws, func(w write) bool { return w.resource != h.resource })
}

// ret returns when op completed: its Return, or, when that is unknown, one
// second after the last event of the history (porcupine needs an end).
func (h *hist) ret(op *history.Op) int64 {
	if op.Outcome == history.Unknown || op.Return == 0 {
		return max(h.maxT+int64(time.Second), op.Call)
	}
	return max(op.Return, op.Call)
}

// mark is a token known to be acknowledged by a time: the Return of an ok
// write or grant.
type mark struct {
	at    int64
	token uint64
	op    *history.Op
}

// marks answers "which token is the highest acknowledged before time t".
type marks struct {
	ms  []mark // by at
	top []mark // top[i] is the mark with the highest token in ms[:i+1]
}

func newMarks(ms []mark) *marks {
	slices.SortFunc(ms, func(a, b mark) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op.ID, b.op.ID))
	})
	top := make([]mark, len(ms))
	for i, m := range ms {
		top[i] = m
		if i > 0 && top[i-1].token >= m.token {
			top[i] = top[i-1]
		}
	}
	return &marks{ms, top}
}

// before returns the mark with the highest token acknowledged strictly
// before t, and false if there is none.
func (m *marks) before(t int64) (mark, bool) {
	i, _ := slices.BinarySearchFunc(m.ms, t, func(m mark, t int64) int { return cmp.Compare(m.at, t) })
	if i == 0 {
		return mark{}, false
	}
	return m.top[i-1], true
}

// keyed is a violation with the place it takes in its checker's list.
type keyed struct {
	k1, k2 int
	v      Violation
}

// tally is one checker's findings across the partitions: the count, and
// the first Options.MaxViolations violations in the order of their keys.
type tally struct {
	max     int // <0: keep all
	count   int
	list    []keyed
	checked int
}

func (t *tally) add(k1, k2 int, v Violation) {
	t.count++
	t.list = append(t.list, keyed{k1, k2, v})
	if t.max > 0 && len(t.list) >= 2*t.max {
		t.trim()
	}
}

// trim sorts the list by key and keeps the first max.
func (t *tally) trim() {
	slices.SortStableFunc(t.list, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.k1, b.k1), cmp.Compare(a.k2, b.k2)) })
	if t.max > 0 && len(t.list) > t.max {
		t.list = t.list[:t.max]
	}
}

func (t *tally) result(name, note string) Result {
	t.trim()
	res := Result{Name: name, OK: t.count == 0, Count: t.count, Checked: t.checked, Note: note}
	for _, k := range t.list {
		res.Violations = append(res.Violations, k.v)
	}
	return res
}

// judge checks a history one partition at a time, and sums up.
type judge struct {
	opts   Options
	faults []history.Fault
	rep    Report
	maxT   int64
	// keyRes maps a key to the one resource it was written under, or to ""
	// when it was written under several: the resource of a read that names
	// none.
	keyRes     map[string]string
	sizes      map[string]int // ops per resource
	unresolved map[string]int // reads without a resource, by key, until resolve
	staleOps   map[int64]bool // the stale write attempts seen, by op id (a txn's, in its every resource)
	order      int            // a counter that keeps violations in the order they were found
	start      time.Time      // of the first linearizability search
	judged     int            // resources judged so far
	searchTime time.Duration

	tokenOrder, stale, monotonic, lost, lin, leases tally
	// The permits of semaphores, across their slots (checkPermits).
	permitGrants   []*history.Op
	permitReleases releases[slotHold]
	// The counts behind the notes.
	toResources, toNoRev    int
	tmResources             int
	lwNoRev, lwLate         int
	linUndecided            []string
	failed                  []porcupine.Operation // of the partitions that failed, for the visualisation
	failedOps               int
	failedLeftOut           []string
	linIllegal, linUnknownN int
}

func newJudge(opts Options, faults []history.Fault) *judge {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxViolations == 0 {
		opts.MaxViolations = DefaultMaxViolations
	}
	j := &judge{
		opts: opts, faults: faults,
		rep:        Report{Counts: make(map[string]int)},
		keyRes:     make(map[string]string),
		sizes:      make(map[string]int),
		unresolved: make(map[string]int), permitReleases: make(releases[slotHold]),
		staleOps: make(map[int64]bool),
	}
	for _, t := range []*tally{&j.tokenOrder, &j.stale, &j.monotonic, &j.lost, &j.lin, &j.leases} {
		t.max = opts.MaxViolations
	}
	return j
}

// scan counts op, the first time through the history.
func (j *judge) scan(op *history.Op) {
	j.rep.Ops++
	j.rep.Counts[string(op.Kind)+"/"+string(op.Outcome)]++
	if op.Outcome == history.Fenced && op.Mutates() {
		j.rep.Fenced++
	}
	j.maxT = max(j.maxT, op.Call, op.Return)
	j.notePermit(op)
	for _, w := range writesOf(op, 0) {
		if r, seen := j.keyRes[w.key]; seen && r != w.resource {
			j.keyRes[w.key] = ""
		} else {
			j.keyRes[w.key] = w.resource
		}
	}
	if op.Kind == history.KindRead && op.Resource == "" {
		j.unresolved[op.Key]++
		return
	}
	for _, r := range j.resourcesOf(op) {
		j.sizes[r]++
	}
	if op.Kind == history.KindTxn && len(op.Writes) == 0 {
		j.rep.Linearizability.Dropped++ // in no partition
	}
}

// resolve attributes the reads that name no resource, once every write has
// been scanned.
func (j *judge) resolve() {
	for k, n := range j.unresolved {
		j.sizes[j.keyRes[k]] += n
	}
	j.unresolved = nil
}

// resourcesOf returns the partitions op belongs to, the first its own (where
// it counts once, as a dropped op).
func (j *judge) resourcesOf(op *history.Op) []string {
	switch op.Kind {
	case history.KindTxn:
		var rs []string
		for _, w := range op.Writes {
			if !slices.Contains(rs, w.Resource) {
				rs = append(rs, w.Resource)
			}
		}
		return rs
	case history.KindRead:
		if op.Resource == "" {
			return []string{j.keyRes[op.Key]}
		}
	}
	return []string{op.Resource}
}

// resources returns the partitions' resources, in name order.
func (j *judge) resources() []string {
	rs := make([]string, 0, len(j.sizes))
	for r := range j.sizes {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// batches groups the resources, in name order, into runs of about n ops.
func (j *judge) batches(n int) [][]string {
	var out [][]string
	var cur []string
	size := 0
	for _, r := range j.resources() {
		if len(cur) > 0 && size+j.sizes[r] > n {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, r)
		size += j.sizes[r]
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// route adds op, the seq-th of the history, to the partitions in parts it
// belongs to.
func (j *judge) route(op *history.Op, seq int, parts map[string]*partition) {
	for _, r := range j.resourcesOf(op) {
		if p := parts[r]; p != nil {
			p.ops = append(p.ops, op)
			p.seqs = append(p.seqs, seq)
		}
	}
}

// judge runs the six checkers on one partition.
func (j *judge) judge(p *partition) {
	j.progress(Progress{Resource: p.resource, Done: j.judged, Total: len(j.sizes), Ops: len(p.ops)})
	j.judged++
	h := newHist(p, j.maxT, j.opts.FenceOnWrite)
	j.rep.Accepted += len(h.acked)
	j.checkTokenOrder(h)
	j.checkStaleAccepted(h)
	j.checkTokenMonotonic(h)
	j.checkLostWrites(h)
	j.checkLinearizable(h)
	j.checkLeaseExclusive(h)
}

// next returns a key that puts a violation after those found before it.
func (j *judge) next() int {
	j.order++
	return j.order
}

// report sums up.
func (j *judge) report() Report {
	rep := j.rep
	rep.Faults = len(j.faults)
	rep.Linearizability.DurationMS = j.searchTime.Milliseconds()
	defer j.progress(Progress{Done: j.judged, Total: len(j.sizes)})
	j.checkPermits()
	rep.Checkers = []Result{
		j.tokenOrderResult(),
		j.staleResult(),
		j.monotonicResult(),
		j.lostResult(),
		j.linResult(&rep),
		j.leaseResult(),
	}
	rep.OK = rep.Violations() == 0
	return rep
}
