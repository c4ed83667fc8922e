package client

import (
	"sync"
	"time"

	"github.com/fence-lock/fence/wire"
)

// maxClockRTT is the longest round trip a lease answer may have taken for
// serverClock to learn from it: the estimate is within half of it.
const maxClockRTT = 500 * time.Millisecond

// serverClock estimates how far the server's clock is ahead of this
// process's, from the answers that grant or renew a lease of its own: the
// server made the change at its expires_at minus ttl_ms, at some moment
// between the request's sending and its answer here. The zero value knows
// nothing. It is safe for concurrent use.
type serverClock struct {
	mu    sync.Mutex
	known bool
	ahead time.Duration // the server's clock minus ours
	slack time.Duration // half the round trip it was learnt from
}

// learn updates the estimate from l, sent at sent and answered at recv.
// Only an exclusive lease of its own is expires = now + ttl on the server.
func (s *serverClock) learn(sent, recv time.Time, l wire.Lease) {
	rtt := recv.Sub(sent)
	if rtt < 0 || rtt > maxClockRTT || l.Mode != "" || l.Session != nil || l.TTLMS <= 0 {
		return
	}
	expires, err := wire.ParseTimestamp(l.ExpiresAt)
	if err != nil {
		return
	}
	changed := expires.Add(-time.Duration(l.TTLMS) * time.Millisecond)
	s.mu.Lock()
	s.known, s.ahead, s.slack = true, changed.Sub(sent.Add(rtt/2)), rtt/2
	s.mu.Unlock()
}

// toServer returns t on the server's clock, late by the estimate's slack
// (so that a deadline errs towards serving), and whether it is known.
func (s *serverClock) toServer(t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.Add(s.ahead + s.slack), s.known
}

// forget drops the estimate: the server refused a deadline that the
// client had not reached (another server leads now, its clock elsewhere).
func (s *serverClock) forget() {
	s.mu.Lock()
	s.known = false
	s.mu.Unlock()
}
