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
// Publishing never blocks: a subscriber that falls more than Buffer events
// behind is cut off (ErrSlow), and may reconnect to resume from the ring.
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
}

// Limits of a Hub.
const (
	// RingSize is how many of the latest events a hub keeps for resuming.
	RingSize = 4096
	// Buffer is how many events a subscriber may have not yet taken before
	// it is cut off.
	Buffer = 1024
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
type Hub struct {
	stream string

	mu     sync.Mutex
	seq    uint64  // of the last event published
	ring   []Event // ring[i%RingSize] is event seq i+1 of the last RingSize
	subs   map[*Sub]struct{}
	closed bool
}

// NewHub returns a hub with a new random stream name.
func NewHub() *Hub {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	return &Hub{stream: hex.EncodeToString(b), ring: make([]Event, 0, RingSize), subs: make(map[*Sub]struct{})}
}

// Stream returns the hub's stream name, the first part of its event IDs.
func (h *Hub) Stream() string { return h.stream }

func (h *Hub) id(seq uint64) string { return h.stream + "-" + strconv.FormatUint(seq, 10) }

// Publish numbers e, keeps it, and hands it to every subscriber of its
// resource. It never blocks. Publishing on a nil or closed hub does nothing.
func (h *Hub) Publish(e Event) {
	if h == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.seq++
	e.ID = h.id(h.seq)
	if len(h.ring) < RingSize {
		h.ring = append(h.ring, e)
	} else {
		h.ring[(h.seq-1)%RingSize] = e
	}
	for s := range h.subs {
		if strings.HasPrefix(e.Resource, s.prefix) {
			s.push(e)
		}
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
	s := &Sub{hub: h, prefix: prefix, notify: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if after != "" {
		oldest := h.seq - uint64(len(h.ring)) // events after oldest are kept
		switch {
		case stream != h.stream:
			s.lost("the event stream changed (the server restarted, or another server leads): list the locks again")
		case seq > h.seq:
			s.lost("the event ID is newer than any this server published: list the locks again")
		case seq < oldest:
			s.lost("the events that followed are no longer kept: list the locks again")
		default:
			for i := seq + 1; i <= h.seq; i++ {
				if e := h.ring[(i-1)%RingSize]; strings.HasPrefix(e.Resource, prefix) {
					s.queue = append(s.queue, e)
				}
			}
		}
	}
	h.subs[s] = struct{}{}
	return s, nil
}

// Close ends every subscription with ErrClosed; later events are dropped.
// Closing a nil hub does nothing.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		s.end(ErrClosed)
		delete(h.subs, s)
	}
}

// Subscribers returns the number of subscriptions open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

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

// Sub is one subscriber's view of a hub. Next takes its events in order.
type Sub struct {
	hub    *Hub
	prefix string
	notify chan struct{} // a token when queue or err changed

	// Guarded by hub.mu.
	queue []Event
	err   error
}

// lost puts a Lost event first; the caller holds hub.mu.
func (s *Sub) lost(detail string) {
	s.queue = append(s.queue, Event{ID: s.hub.id(s.hub.seq), Type: Lost, Time: time.Now(), Detail: detail})
}

// push queues e, or cuts the subscriber off when it is Buffer behind; the
// caller holds hub.mu.
func (s *Sub) push(e Event) {
	if s.err != nil {
		return
	}
	if len(s.queue) >= Buffer {
		s.end(ErrSlow)
		delete(s.hub.subs, s)
		return
	}
	s.queue = append(s.queue, e)
	s.wake()
}

// end ends the subscription with err; the caller holds hub.mu.
func (s *Sub) end(err error) {
	if s.err == nil {
		s.err = err
	}
	s.wake()
}

func (s *Sub) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting for one until ctx is done. After the
// subscription ends it returns ErrSlow or ErrClosed (a slow subscriber's
// queued events are dropped: it resumes from the hub's ring). It returns
// ctx's error when ctx ends first.
func (s *Sub) Next(ctx context.Context) (Event, error) {
	for {
		s.hub.mu.Lock()
		if s.err == ErrSlow {
			s.queue = nil
		}
		if len(s.queue) > 0 {
			e := s.queue[0]
			s.queue[0] = Event{}
			s.queue = s.queue[1:]
			s.hub.mu.Unlock()
			return e, nil
		}
		err := s.err
		s.hub.mu.Unlock()
		if err != nil {
			return Event{}, err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Pending returns how many events wait to be taken by Next.
func (s *Sub) Pending() int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return len(s.queue)
}

// Close ends the subscription. Next returns ErrClosed after it.
func (s *Sub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.subs, s)
	s.end(ErrClosed)
}
