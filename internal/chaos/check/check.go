package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/fence-lock/fence/internal/chaos/history"
)

// The names of the checkers, as they appear in Result.Name.
const (
	TokenOrder     = "token-order"
	StaleAccepted  = "stale-accepted"
	TokenMonotonic = "token-monotonic"
	LostWrites     = "lost-writes"
	Linearizable   = "linearizable"
)

// Defaults for Options.
const (
	DefaultTimeout       = 60 * time.Second
	DefaultMaxViolations = 100
)

// HTMLFile is the name of the visualisation Check writes into Options.HTMLDir.
const HTMLFile = "linearizability.html"

// Options tune Check. The zero value is ready to use.
type Options struct {
	// Timeout bounds the linearizability check (porcupine); a check that
	// runs out of time fails. Zero means DefaultTimeout.
	Timeout time.Duration
	// HTMLDir, when not empty and the history is not linearizable (or the
	// check timed out), receives porcupine's visualisation as HTMLFile,
	// with the faults drawn as annotations. It is created if needed.
	HTMLDir string
	// MaxViolations is how many violations each checker lists; the count
	// stays exact. Zero means DefaultMaxViolations; negative, no limit.
	MaxViolations int
}

// Violation is one breach of an invariant.
type Violation struct {
	Checker string  `json:"checker"`
	Message string  `json:"message"`
	Ops     []int64 `json:"ops,omitempty"` // the ids of the ops involved, culprit first
}

// Result is what one checker found.
type Result struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Count is the number of violations found; Violations lists the first
	// Options.MaxViolations of them.
	Count      int         `json:"count"`
	Violations []Violation `json:"violations,omitempty"`
	// Checked is how many things the checker looked at (writes, grants,
	// keys or ops; see Note).
	Checked int    `json:"checked"`
	Note    string `json:"note,omitempty"`
}

// Partition is the linearizability check of one resource.
type Partition struct {
	Resource string `json:"resource"`
	Ops      int    `json:"ops"`     // ops in porcupine's history of this resource
	Unknown  int    `json:"unknown"` // of which with an unknown outcome
	// Result is "ok", "illegal", or "unknown" (the check timed out).
	Result string `json:"result"`
}

// Linearizability describes the porcupine run.
type Linearizability struct {
	// Result is "ok", "illegal" or "timeout".
	Result     string      `json:"result"`
	DurationMS int64       `json:"duration_ms"`
	Ops        int         `json:"ops"`        // ops given to porcupine
	Dropped    int         `json:"dropped"`    // history ops left out of the model
	MaxOps     int         `json:"max_ops"`    // ops in the largest partition
	Partitions []Partition `json:"partitions"` // one per resource, by name
	HTML       string      `json:"html,omitempty"`
	HTMLError  string      `json:"html_error,omitempty"`
}

// Report is the verdict on one history. It marshals to JSON as it is.
type Report struct {
	// OK is true when no checker found a violation.
	OK     bool `json:"ok"`
	Ops    int  `json:"ops"`
	Faults int  `json:"faults"`
	// Counts are the ops by kind and outcome, keyed "write/ok".
	Counts map[string]int `json:"counts"`
	// Accepted is the number of acknowledged writes, a txn's counted one
	// by one; Fenced the number of writes and txns answered "fenced".
	Accepted int `json:"accepted"`
	Fenced   int `json:"fenced"`
	// StaleAttempts are the writes and txns invoked with a token below one
	// already acknowledged for their resource; StaleRejected those of them
	// answered "fenced". A run whose faults made no stale attempt proved
	// little.
	StaleAttempts int `json:"stale_attempts"`
	StaleRejected int `json:"stale_rejected"`
	// LostAckedWrites is the number of acknowledged writes missing from the
	// final reads.
	LostAckedWrites int `json:"lost_acked_writes"`
	// FinalReadKeys is the number of written keys with a final read;
	// KeysWithoutFinalRead those without, which lost-writes skipped.
	FinalReadKeys        int             `json:"final_read_keys"`
	KeysWithoutFinalRead int             `json:"keys_without_final_read"`
	Linearizability      Linearizability `json:"linearizability"`
	// Checkers are the five checkers' results, in the order of the package doc.
	Checkers []Result `json:"checkers"`
}

// Violations returns the number of violations all checkers found.
func (r *Report) Violations() int {
	n := 0
	for _, c := range r.Checkers {
		n += c.Count
	}
	return n
}

// Result returns the result of the named checker, or nil.
func (r *Report) Result(name string) *Result {
	for i := range r.Checkers {
		if r.Checkers[i].Name == name {
			return &r.Checkers[i]
		}
	}
	return nil
}

// Check judges a history. It never fails: a history it cannot make sense of
// shows up as violations, and a linearizability check that times out fails
// the linearizable checker.
func Check(ops []history.Op, faults []history.Fault, opts Options) Report {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxViolations == 0 {
		opts.MaxViolations = DefaultMaxViolations
	}
	h := newHist(ops)
	rep := Report{Ops: len(ops), Faults: len(faults), Counts: make(map[string]int)}
	for i := range ops {
		op := &ops[i]
		rep.Counts[string(op.Kind)+"/"+string(op.Outcome)]++
		if op.Outcome == history.Fenced && op.Mutates() {
			rep.Fenced++
		}
	}
	rep.Accepted = len(h.acked)

	stale := checkStaleAccepted(h, &rep)
	lost := checkLostWrites(h, &rep)
	lin := checkLinearizable(h, faults, opts, &rep)
	rep.Checkers = []Result{
		checkTokenOrder(h),
		stale,
		checkTokenMonotonic(h),
		lost,
		lin,
	}
	for i := range rep.Checkers {
		c := &rep.Checkers[i]
		c.Count = len(c.Violations)
		c.OK = c.Count == 0
		if opts.MaxViolations > 0 && len(c.Violations) > opts.MaxViolations {
			c.Violations = c.Violations[:opts.MaxViolations]
		}
	}
	rep.OK = rep.Violations() == 0
	return rep
}

// write is one write of a history: a plain write, or one write of a txn.
type write struct {
	op       *history.Op
	resource string
	key      string
	value    string
	token    uint64
}

// hist is a history with the derived views the checkers share.
type hist struct {
	ops   []history.Op
	maxT  int64   // the latest Call or Return in the history
	acked []write // the writes of ok writes and ok txns, in history order
	// keyRes maps a key to the one resource it was written under, or to ""
	// when it was written under several (see resourceOf).
	keyRes map[string]string
}

func newHist(ops []history.Op) *hist {
	h := &hist{ops: ops, keyRes: make(map[string]string)}
	for i := range ops {
		op := &ops[i]
		h.maxT = max(h.maxT, op.Call, op.Return)
		for _, w := range writesOf(op) {
			if r, seen := h.keyRes[w.key]; seen && r != w.resource {
				h.keyRes[w.key] = ""
			} else {
				h.keyRes[w.key] = w.resource
			}
			if op.Outcome == history.OK {
				h.acked = append(h.acked, w)
			}
		}
	}
	return h
}

// writesOf returns the writes of a write or txn op, and nil for other kinds.
func writesOf(op *history.Op) []write {
	switch op.Kind {
	case history.KindWrite:
		return []write{{op, op.Resource, op.Key, op.Value, op.Token}}
	case history.KindTxn:
		ws := make([]write, len(op.Writes))
		for i, w := range op.Writes {
			ws[i] = write{op, w.Resource, w.Key, w.Value, w.Token}
		}
		return ws
	}
	return nil
}

// resourceOf returns the resource of a read: its Resource, or else the one
// resource its key was written under, or "" if that is not known.
func (h *hist) resourceOf(op *history.Op) string {
	if op.Resource != "" {
		return op.Resource
	}
	return h.keyRes[op.Key]
}

// ret returns when op completed: its Return, or, when that is unknown, one
// second after the last event of the history (porcupine needs an end).
func (h *hist) ret(op *history.Op) int64 {
	if op.Outcome == history.Unknown || op.Return == 0 {
		return max(h.maxT+int64(time.Second), op.Call)
	}
	return max(op.Return, op.Call)
}

// byResource groups items by resource and returns the resources in order.
func byResource[T any](items []T, res func(T) string) (map[string][]T, []string) {
	m := make(map[string][]T)
	for _, it := range items {
		r := res(it)
		m[r] = append(m[r], it)
	}
	names := make([]string, 0, len(m))
	for r := range m {
		names = append(names, r)
	}
	slices.Sort(names)
	return m, names
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
