package history

import "slices"

// Kind is the kind of an Op.
type Kind string

// The kinds of Op.
const (
	KindAcquire Kind = "acquire" // a lock acquire; Token is the token granted
	KindRead    Kind = "read"    // a read of one key; Value and Rev are what was read
	KindWrite   Kind = "write"   // a fenced write of one key; Token is the token sent
	KindTxn     Kind = "txn"     // a multi-key, multi-resource transaction; see Op.Writes
	KindRelease Kind = "release" // a lock release; Token is the token sent
	// KindRestore is the harness's record (client -1) of one resource's
	// state after a backup was restored into the store: Token is the
	// resource's fence, Writes its keys' values with their revisions
	// (Write.Rev), Call and Return bracket the reads that learnt them,
	// while no client ran. What was acknowledged after the backup was
	// taken is gone; tokens go on above every one issued before.
	KindRestore Kind = "restore"
	// KindProbe is a client's look at a resource's lock (GET
	// /v1/locks/{resource}) right after a multi-acquire of it was refused:
	// Value is the holder seen ("" if free), Token its token.
	KindProbe Kind = "probe"
)

// Valid reports whether k is one of the Kind constants.
func (k Kind) Valid() bool {
	switch k {
	case KindAcquire, KindRead, KindWrite, KindTxn, KindRelease, KindRestore, KindProbe:
		return true
	}
	return false
}

// Outcome is what became of an Op.
type Outcome string

// The outcomes of an Op. Only Unknown leaves the effect of a mutating Op open.
const (
	// OK means the operation was acknowledged (a 2xx): its effect is in.
	OK Outcome = "ok"
	// Fenced means the store answered 409 fenced: definitely not applied,
	// because the token was below the resource's last fence.
	Fenced Outcome = "fenced"
	// Rejected means another definite rejection (lock_held, lease_lost,
	// token_not_issued, precondition_failed, not_found, ...): not applied.
	Rejected Outcome = "rejected"
	// Fail means the operation definitely did not take effect, for example
	// because the connection was refused before the request was sent.
	Fail Outcome = "fail"
	// Unknown means the operation may or may not have taken effect: a
	// timeout, a reset connection, a 5xx. Its Return is 0.
	Unknown Outcome = "unknown"
)

// Valid reports whether o is one of the Outcome constants.
func (o Outcome) Valid() bool {
	switch o {
	case OK, Fenced, Rejected, Fail, Unknown:
		return true
	}
	return false
}

// Op is one operation of a chaos run, as one JSON line.
type Op struct {
	// ID is unique in the run.
	ID int64 `json:"id"`
	// Client is the client process index; -1 for the harness's own final
	// reads.
	Client int `json:"client"`
	// Kind is acquire, read, write, txn or release.
	Kind Kind `json:"kind"`
	// Resource is the lock and fence the op is about (acquire, read, write,
	// release). On a txn whose Outcome is Fenced it may name the resource
	// whose fence rejected it (the API names the first in byte order);
	// the checker then holds that resource alone responsible.
	Resource string `json:"resource,omitempty"`
	// Key is the key read or written (read, write).
	Key string `json:"key,omitempty"`
	// Token is, for an acquire, the token granted; for a write or a
	// release, the token sent.
	Token uint64 `json:"token,omitempty"`
	// Value is, for a write, the value sent; for a read, the value read
	// ("" with Rev 0 means the key was absent).
	Value string `json:"value,omitempty"`
	// Rev is, for a write or txn, the revision of the accepted write; for a
	// read, the revision of the item read.
	Rev uint64 `json:"rev,omitempty"`
	// Writes are a txn's writes, each with its resource's token. They all
	// get the txn's Rev when it is accepted.
	Writes []Write `json:"writes,omitempty"`
	// Call is the invocation time, in ns since the run's start (one clock
	// for all processes).
	Call int64 `json:"call"`
	// Return is the completion time, in ns since the run's start; 0 when
	// the outcome is Unknown.
	Return int64 `json:"return,omitempty"`
	// Until is, for an acquire of a lease in a session, the earliest time
	// (ns since the run's start) at which the lease may end: its session's
	// last renewal's call plus the TTL, for the lease ends with its session,
	// not a TTL after its own acquire. 0 otherwise.
	Until int64 `json:"until,omitempty"`
	// Shared is, for an acquire and a release, a shared hold's: holders of
	// one group share its token, and hold the resource at once. A permit's
	// acquire names its slot resource (fence.SlotResource) as Resource.
	Shared bool `json:"shared,omitempty"`
	// Outcome is ok, fenced, rejected, fail or unknown.
	Outcome Outcome `json:"outcome"`
	// Error is the error the client saw, if any, for humans.
	Error string `json:"error,omitempty"`
}

// Mutates reports whether op is a write or a txn.
func (op *Op) Mutates() bool { return op.Kind == KindWrite || op.Kind == KindTxn }

// Resources returns the resources op touches: its own, and a txn's (in
// the order of its writes), each once.
func (op *Op) Resources() []string {
	var rs []string
	if op.Resource != "" {
		rs = append(rs, op.Resource)
	}
	for _, w := range op.Writes {
		if !slices.Contains(rs, w.Resource) {
			rs = append(rs, w.Resource)
		}
	}
	return rs
}

// Write is one write of a txn.
type Write struct {
	Resource string `json:"resource"`
	Key      string `json:"key"`
	Value    string `json:"value"`
	Token    uint64 `json:"token"` // the token presented for Resource
	// Rev is, in a restore, the key's revision ("" with 0: absent).
	Rev uint64 `json:"rev,omitempty"`
}

// Fault is a fault the harness injected, as one JSON line with a "fault"
// member, for example {"fault":"pause","client":3,"start":1000,"end":9000}.
type Fault struct {
	// Kind names the fault: "pause", "kill", "partition", ... It is
	// written as the "fault" member, whose presence marks a fault line.
	Kind string `json:"fault"`
	// Client is the client process it hit, or -1 for a fault of the
	// server or the network as a whole.
	Client int `json:"client"`
	// Start and End bound the fault, in ns since the run's start. End is 0
	// (or equal to Start) for an instant fault such as kill -9.
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
	// Detail says more, for humans.
	Detail string `json:"detail,omitempty"`
}
