package check

import (
	"time"
)

// The names of the checkers, as they appear in Result.Name.
const (
	TokenOrder     = "token-order"
	StaleAccepted  = "stale-accepted"
	TokenMonotonic = "token-monotonic"
	LostWrites     = "lost-writes"
	Linearizable   = "linearizable"
	LeaseExclusive = "lease-exclusive"
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
	// Timeout bounds the linearizability check of all the partitions
	// together; a check that runs out of time fails. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// HTMLDir, when not empty and the history is not linearizable (or the
	// check timed out), receives porcupine's visualisation of the
	// partitions that failed as HTMLFile, with the faults drawn as
	// annotations (up to htmlMaxOps operations in all: larger partitions
	// are left out, and HTMLError names them). It is created if needed.
	HTMLDir string
	// MaxViolations is how many violations each checker lists; the count
	// stays exact. Zero means DefaultMaxViolations; negative, no limit.
	MaxViolations int
	// FenceOnWrite says that the storage raises a resource's fence only
	// when it accepts a write, as a guard does (it knows nothing of the
	// lock service), and not when the lock service grants a token, as
	// fence's own storage does. A grant's token then neither counts
	// against later writes (stale-accepted) nor enters the model
	// (linearizable): a stale holder's write is accepted until a newer
	// holder has written. False (the default): fence's own storage.
	FenceOnWrite bool
	// Progress, when not nil, is told where the check is: when it starts,
	// every progressOps ops of CheckFile's first pass through the file,
	// before it judges each resource, and when it is done. It is called on
	// the goroutine that called Check or CheckFile, and holds it up: it
	// should return at once.
	Progress func(Progress)
	// TTL is the TTL of every lease the clients took. With it,
	// lease-exclusive checks that no grant came while another client's
	// lease could still run; zero checks nothing there.
	TTL time.Duration
}

// Progress is where a check is, for Options.Progress.
type Progress struct {
	// Resource is the resource being judged; "" while the history is read
	// and indexed, and once every resource is judged.
	Resource string
	// Done is the number of resources judged, of Total; Total is 0 until
	// the history is indexed.
	Done, Total int
	// Ops is, while the history is indexed, the number of ops read so far;
	// while a resource is judged, the number of ops of its partition.
	Ops int
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
	Ops      int    `json:"ops"`     // ops in the model's history of this resource
	Unknown  int    `json:"unknown"` // of which with an unknown outcome
	// Result is "ok", "illegal", or "unknown" (the check timed out).
	Result string `json:"result"`
}

// Linearizability describes the linearizability check.
type Linearizability struct {
	// Result is "illegal" if a partition is not linearizable, else
	// "timeout" if the check ran out of time before deciding one, else "ok".
	Result     string      `json:"result"`
	DurationMS int64       `json:"duration_ms"` // of the search, all partitions together
	Ops        int         `json:"ops"`         // ops in the model
	Dropped    int         `json:"dropped"`     // history ops left out of the model
	MaxOps     int         `json:"max_ops"`     // ops in the largest partition
	Partitions []Partition `json:"partitions"`  // one per resource, by name
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
	// Checkers are the six checkers' results, in the order of the package doc.
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
