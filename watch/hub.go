// Package watch is the event stream of a fence server: the lock service and
// the storage publish every change to a lock or a fence into a Hub, and each
// watcher subscribes to the events of a resource prefix.
//
// A Hub numbers its events from 1 and keeps the last RingSize of them, so a
// watcher that reconnects with the ID of the last event it received resumes
// without a gap while the hub still has what followed. Each hub has a random
// stream name, part of every ID: an ID from another hub (another process, or
// another term of a cluster's leader) cannot resume, and the subscriber
// learns that it lost events instead of silently missing them.
//
// Publishing never blocks, and costs the same however many subscribers
// there are: a subscriber that falls more than Buffer events behind is cut
// off (ErrSlow), and may reconnect to resume from the ring.
package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
)

// Type is the kind of an event, as the API names it.
type Type string

// The event types.
const (
	Granted       Type = "granted"          // a lease was granted
	Renewed       Type = "renewed"          // its holder renewed a lease
	Released      Type = "released"         // its holder released a lease
	Expired       Type = "expired"          // a lease ran out
	Revoked       Type = "revoked"          // an admin revoked the lock
	RevokeAsked   Type = "revoke_requested" // the holder was asked to let go by ExpiresAt
	FenceRaised   Type = "fence_raised"     // the resource's last fence rose
	WriteRejected Type = "write_rejected"   // a write presented a stale token
	Lost          Type = "lost"             // events were lost: the subscriber should list again
)

// Event is one change to a lock or a fence. Members that do not apply to its
// Type are zero.
type Event struct {
	ID        string      // "<stream>-<seq>", set by Publish
	Type      Type        // what happened
	Resource  string      // the resource it happened to
	Holder    string      // the lease's holder
	Token     fence.Token // the lease's token, or the token presented
	LastFence fence.Token // the resource's last fence after the change
	Revision  fence.Rev   // the store revision of the write that raised the fence
	Key       string      // the key of a rejected write
	Op        string      // the operation of a rejected write: put, delete, claim, txn
	ExpiresAt time.Time   // the lease's expiry
	Shared    bool        // a shared hold's event (granted, renewed, released, expired; revoked, one per holder of the group)
	Time      time.Time   // when the change was made; Publish sets it if zero
	Detail    string      // for Lost: why

	enc *encoding // set by Publish: the event's encoding, made once (Encoded)
}

// encoding is an event's encoding, shared by the copies of a published
// event that every subscriber takes.
type encoding struct {
	once sync.Once
	b    []byte
	err  error
}

// Encoded returns encode(e), run once for a published event however many
// subscribers send it (a server writes one event to thousands of
// streams); for another event, at every call. encode must depend on e
// alone.
func (e Event) Encoded(encode func(Event) ([]byte, error)) ([]byte, error) {
	if e.enc == nil {
		return encode(e)
	}
	e.enc.once.Do(func() { e.enc.b, e.enc.err = encode(e) })
	return e.enc.b, e.enc.err
}

// Limits of a Hub.
const (
	// RingSize is how many of the latest events a hub keeps for resuming.
	RingSize = 4096
	// Buffer is how many events (of any resource) a subscriber may have not
	// yet taken before it is cut off (beyond those of a replay or resume).
	Buffer = 1024
	// MaxReplay is the longest replay that leaves a subscriber Buffer of
	// room in the ring.
	MaxReplay = RingSize - Buffer
)

// Errors that end a subscription.
var (
	// ErrSlow means the subscriber fell more than Buffer events behind.
	ErrSlow = errors.New("watch: the watcher fell too far behind and was cut off")
	// ErrClosed means the hub closed: the server stops, or its term ended.
	ErrClosed = errors.New("watch: the event stream ended")
	// ErrBadID means a resume ID that is not "<stream>-<seq>".
	ErrBadID = errors.New("watch: malformed event ID")
)

// Hub fans events out to subscribers and keeps the latest for resuming. Its
// zero value is not usable; call NewHub. It is safe for concurrent use.
//
// An event is kept once, in the ring; each subscriber reads the ring from
// its own position. So Publish costs the same however many subscribers
// there are, and never waits for them: the lock service publishes while it
// holds a resource's lock. Subscribers are woken by a goroutine of the hub.
type Hub struct {
	stream string

	mu      sync.RWMutex
	seq     uint64  // of the last event published
	ring    []Event // ring[i%RingSize] is event seq i+1 of the last RingSize
	subs    atomic.Int64
	closed  bool
	changed chan struct{} // closed when events were published or the hub closed, then replaced

	kick   chan struct{} // a token: wake the subscribers
	waking bool          // the goroutine that wakes them runs
}

// NewHub returns a hub with a new random stream name.
func NewHub() *Hub {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	return &Hub{stream: hex.EncodeToString(b), ring: make([]Event, 0, RingSize),
		changed: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// Stream returns the hub's stream name, the first part of its event IDs.
func (h *Hub) Stream() string { return h.stream }

func (h *Hub) id(seq uint64) string { return h.stream + "-" + strconv.FormatUint(seq, 10) }

// Publish numbers e and keeps it, for every subscriber of its resource. It
// never blocks, and costs the same however many subscribers there are.
// Publishing on a nil or closed hub does nothing.
func (h *Hub) Publish(e Event) {
	if h == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.seq++
	e.ID = h.id(h.seq)
	e.enc = new(encoding)
	if len(h.ring) < RingSize {
		h.ring = append(h.ring, e)
	} else {
		h.ring[(h.seq-1)%RingSize] = e
	}
	switch {
	case h.waking:
		// Under the lock, so that wakeAll, which stops under it once
		// idle, cannot miss the token.
		select {
		case h.kick <- struct{}{}:
		default:
		}
	case h.subs.Load() > 0:
		h.waking = true
		go h.wakeAll()
		h.kick <- struct{}{}
	}
	h.mu.Unlock()
}

// wakeIdle is how long wakeAll waits for an event before it stops; the
// next Publish starts it again.
const wakeIdle = time.Second

// wakeAll wakes the subscribers that wait, every time events are
// published, until the hub closes or no event came for wakeIdle: closing a
// channel that thousands wait on takes a while, which Publish does not pay.
func (h *Hub) wakeAll() {
	idle := time.NewTimer(wakeIdle)
	defer idle.Stop()
	for {
		select {
		case <-h.kick:
		case <-idle.C:
			h.mu.Lock()
			if len(h.kick) == 0 {
				h.waking = false
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		old := h.changed
		h.changed = make(chan struct{})
		closed := h.closed
		if closed {
			h.waking = false
		}
		h.mu.Unlock()
		close(old)
		if closed {
			return
		}
		idle.Reset(wakeIdle)
	}
}

// Subscribe returns a subscription to the events of the resources that start
// with prefix. With after "", it starts with the next event published. With
// the ID of an event (a reconnecting watcher's Last-Event-ID), it starts
// with the events that followed it, if the hub still has them all;
// otherwise the subscription's first event is a Lost event, whose ID is the
// latest, and it goes on from there. A malformed after is ErrBadID.
func (h *Hub) Subscribe(prefix, after string) (*Sub, error) {
	var stream string
	var seq uint64
	if after != "" {
		var err error
		if stream, seq, err = ParseID(after); err != nil {
			return nil, err
		}
	}
	return h.subscribe(prefix, func(s *Sub) {
		if after == "" {
			return
		}
		oldest := h.seq - uint64(len(h.ring)) // events after oldest are kept
		switch {
		case stream != h.stream:
			s.lost("the event stream changed (the server restarted, or another server leads): list the locks again")
		case seq > h.seq:
			s.lost("the event ID is newer than any this server published: list the locks again")
		case seq < oldest:
			s.lost("the events that followed are no longer kept: list the locks again")
		default:
			s.next = seq + 1
		}
	})
}

// SubscribeReplay returns a subscription to the events of the resources
// that start with prefix that begins n events back: with those of the last
// n events published (at most the RingSize the hub keeps) and goes on with
// the next ones. Sub.Head tells the events replayed from the new ones. A
// replay of more than MaxReplay leaves less than Buffer of room: the next
// events may cut it off.
func (h *Hub) SubscribeReplay(prefix string, n int) (*Sub, error) {
	return h.subscribe(prefix, func(s *Sub) {
		s.next -= min(uint64(max(n, 0)), uint64(len(h.ring)))
	})
}

// subscribe makes a subscription that starts with the next event
// published, unless start, called under the hub's lock, moves it back.
func (h *Hub) subscribe(prefix string, start func(s *Sub)) (*Sub, error) {
	s := &Sub{hub: h, prefix: prefix, done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	s.next = h.seq + 1
	if h.seq > 0 {
		s.head = h.id(h.seq)
	}
	start(s)
	// A replay (or resume) may fall Buffer behind beyond its backlog, as
	// far as the ring keeps events.
	s.allow = min(RingSize, h.seq+1-s.next+Buffer)
	h.subs.Add(1)
	return s, nil
}

// Close ends every subscription with ErrClosed, once it has taken the
// events published before; later events are dropped. It stops the hub's
// goroutine (which otherwise stops after a second without events).
// Closing a nil hub does nothing.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	if h.waking {
		// wakeAll sees closed at its next token (this one, or one
		// already waiting) and returns.
		select {
		case h.kick <- struct{}{}:
		default:
		}
	} else {
		close(h.changed)
	}
	h.mu.Unlock()
}

// Subscribers returns the number of subscriptions open.
func (h *Hub) Subscribers() int { return int(h.subs.Load()) }

// ParseID splits an event ID into its stream name and sequence number. It
// returns an error wrapping ErrBadID if id is not "<stream>-<seq>".
func ParseID(id string) (stream string, seq uint64, err error) {
	i := strings.LastIndexByte(id, '-')
	if i > 0 {
		stream = id[:i]
		seq, err = strconv.ParseUint(id[i+1:], 10, 64)
		if err == nil && isStreamName(stream) {
			return stream, seq, nil
		}
	}
	return "", 0, fmt.Errorf("%w: %q is not <stream>-<seq>", ErrBadID, id)
}

func isStreamName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}

// Sub is one subscriber's view of a hub. Next takes its events in order. A
// Sub is used by one goroutine, but Close may be called from any.
type Sub struct {
	hub    *Hub
	prefix string
	next   uint64 // the sequence number of the next event to look at
	allow  uint64 // how many events may wait before it is cut off: Buffer, or more while it replays
	first  *Event // a Lost event to take before the ring's, if any
	head   string // the ID of the last event published when it subscribed
	err    error  // why it ended, once it has

	doneOnce sync.Once
	done     chan struct{} // closed by Close
}

// Head returns the ID of the last event the hub had published when s
// subscribed, "" if none: the events up to it are from before (a resume's
// or a replay's), those after it new.
func (s *Sub) Head() string { return s.head }

// lost puts a Lost event first; the caller holds hub.mu.
func (s *Sub) lost(detail string) {
	s.first = &Event{ID: s.hub.id(s.hub.seq), Type: Lost, Time: time.Now(), Detail: detail}
}

// Next returns the next event, waiting for one until ctx is done. After the
// subscription ends it returns ErrSlow (the subscriber fell more than
// Buffer events, of any resource, behind: it resumes from the hub's ring)
// or ErrClosed. It returns ctx's error when ctx ends first.
func (s *Sub) Next(ctx context.Context) (Event, error) {
	for {
		e, ok, changed, err := s.take()
		switch {
		case err != nil:
			return Event{}, err
		case ok:
			return e, nil
		}
		select {
		case <-changed:
		case <-s.done:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// take returns the next event of s's resources if there is one (ok); if
// not, a channel closed when there may be.
func (s *Sub) take() (e Event, ok bool, changed <-chan struct{}, err error) {
	if s.err != nil {
		return Event{}, false, nil, s.err
	}
	select {
	case <-s.done:
		s.err = ErrClosed
		return Event{}, false, nil, s.err
	default:
	}
	if s.first != nil {
		e, s.first = *s.first, nil
		return e, true, nil, nil
	}
	h := s.hub
	h.mu.RLock()
	defer h.mu.RUnlock()
	switch waiting := h.seq + 1 - s.next; {
	case waiting > s.allow:
		s.err = ErrSlow
		s.end()
		return Event{}, false, nil, s.err
	case waiting <= Buffer:
		s.allow = Buffer // caught up with its replay
	}
	for s.next <= h.seq {
		e := h.ring[(s.next-1)%RingSize]
		s.next++
		if strings.HasPrefix(e.Resource, s.prefix) {
			return e, true, nil, nil
		}
	}
	if h.closed {
		s.err = ErrClosed
		return Event{}, false, nil, s.err
	}
	return Event{}, false, h.changed, nil
}

// Pending returns how many events of its resources wait to be taken by
// Next.
func (s *Sub) Pending() int {
	if s.err != nil {
		return 0
	}
	n := 0
	if s.first != nil {
		n++
	}
	h := s.hub
	h.mu.RLock()
	defer h.mu.RUnlock()
	for i := s.next; i <= h.seq && i+RingSize > h.seq; i++ {
		if strings.HasPrefix(h.ring[(i-1)%RingSize].Resource, s.prefix) {
			n++
		}
	}
	return n
}

// Close ends the subscription. Next returns ErrClosed after it.
func (s *Sub) Close() {
	s.end()
}

// end takes the subscription out of the hub's count, once.
func (s *Sub) end() {
	s.doneOnce.Do(func() {
		close(s.done)
		s.hub.subs.Add(-1)
	})
}
