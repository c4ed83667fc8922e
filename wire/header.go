package wire

import (
	"strconv"
	"time"

	"github.com/fence-lock/fence"
)

// Headers of the API.
const (
	// TokenHeader carries a fencing token: on a storage write, the
	// writer's; on a GET of a key, the token of the write that stored it.
	TokenHeader = "Fencing-Token"
	// SequencerHeader carries a lease's sequencer (its signed token) next
	// to its Fencing-Token, for guards that verify it offline.
	SequencerHeader = "Fence-Sequencer"
	// ForwardedHeader marks a request that a standby forwarded to the
	// leader; its value is the standby's advertise URL. A server that does
	// not lead answers such a request not_leader instead of forwarding it
	// again, so that servers with different views of who leads never pass
	// a request around in circles.
	ForwardedHeader = "Fence-Forwarded-By"
	// LastEventIDHeader names, on GET /v1/watch, the last event a
	// reconnecting watcher received.
	LastEventIDHeader = "Last-Event-ID"

	// EventHeadHeader, on a GET /v1/watch answer, is the ID of the last
	// event the server had published when the stream opened (absent if
	// none): the events up to it that the stream sends first (a resume's
	// catch-up, a replay) are from before; those after it are new.
	EventHeadHeader = "Fence-Event-Head"

	// DeadlineHeader, on a renewal, is when its client stops waiting for
	// the answer (RFC 3339), on the server's clock as the client estimates
	// it. A server that reads the request later than that applies nothing:
	// the client has already given the lease up.
	DeadlineHeader = "Fence-Deadline"
)

// Watch streams, as GET /v1/watch answers them.
const (
	// HeartbeatInterval is how often an idle watch stream gets a comment
	// line, so that proxies and clients know it is alive.
	HeartbeatInterval = 15 * time.Second
	// WatchRetry is the reconnection delay a watch stream suggests.
	WatchRetry = time.Second
)

// ETag returns the entity tag of a key at revision rev: the decimal
// revision in double quotes, as If-Match takes it.
func ETag(rev fence.Rev) string { return `"` + strconv.FormatUint(uint64(rev), 10) + `"` }
