package httpapi

import (
	"sync"

	"github.com/fence-lock/fence/wire"
)

// slots counts what clients hold of something bounded (acquires that
// wait, watch streams), so that no client holds more than perClient of it
// and all together no more than total. A cap of 0 is no cap.
type slots struct {
	mu    sync.Mutex
	held  map[string]int // by client (clientKey), only those holding some
	total int
}

// take gives key one slot and reports true, or false if key holds
// perClient already or all hold total.
func (s *slots) take(key string, perClient, total int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if total > 0 && s.total >= total || perClient > 0 && s.held[key] >= perClient {
		return false
	}
	if s.held == nil {
		s.held = map[string]int{}
	}
	s.held[key]++
	s.total++
	return true
}

// give returns a slot that key took.
func (s *slots) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key]--; s.held[key] <= 0 {
		delete(s.held, key)
	}
	s.total--
}

// perClient returns the cap per client that applies to c: none for a
// request a standby forwarded without credentials, which comes from the
// standby's address on behalf of all its clients (the totals still apply).
func perClient(c *call, n int) int {
	if c.caller == nil && c.r.Header.Get(wire.ForwardedHeader) != "" {
		return 0
	}
	return n
}

// clientSlotKey is the client a request's slots are counted against: its
// caller, once authenticated, else its source address (as the rate limit
// counts them), in one space.
func clientSlotKey(c *call) string {
	key, caller := clientKey(c)
	if caller {
		return "caller " + key
	}
	return "addr " + key
}
