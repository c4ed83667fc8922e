package httpapi

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fence-lock/fence/wire"
	"golang.org/x/time/rate"
)

// limiterIdle is how long a client's limiter lives unused before a sweep
// drops it; a dropped client starts again with a full burst.
const limiterIdle = 5 * time.Minute

// limiters holds one token bucket per client, dropping those idle for
// limiterIdle in sweeps made lazily, at most once per limiterIdle.
type limiters struct {
	mu        sync.Mutex
	clients   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// allow takes a token from key's bucket. If none is left it returns the time
// until one is.
func (ls *limiters) allow(key string, limit rate.Limit, burst int, now time.Time) (bool, time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.clients == nil {
		ls.clients = make(map[string]*bucket)
		ls.lastSweep = now
	}
	if now.Sub(ls.lastSweep) >= limiterIdle {
		for k, c := range ls.clients {
			if now.Sub(c.used) >= limiterIdle {
				delete(ls.clients, k)
			}
		}
		ls.lastSweep = now
	}
	c := ls.clients[key]
	if c == nil {
		c = &bucket{lim: rate.NewLimiter(limit, max(burst, 1))}
		ls.clients[key] = c
	}
	c.used = now
	r := c.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// len returns the number of clients tracked, for tests.
func (ls *limiters) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.clients)
}

// clientKey identifies the client of r for rate limiting: a hash of its
// Authorization header if it has one (so one principal is one client, from
// any address), else its remote IP.
func clientKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		sum := sha256.Sum256([]byte(a))
		return fmt.Sprintf("auth:%x", sum[:16])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// rateLimit checks r against its client's limiter, if s.RateLimit is set.
func (s *Server) rateLimit(r *http.Request, now time.Time) error {
	if s.RateLimit <= 0 || s.RateLimit == rate.Inf {
		return nil
	}
	ok, d := s.limiters.allow(clientKey(r), s.RateLimit, s.RateBurst, now)
	if ok {
		return nil
	}
	rateLimitedTotal.Inc()
	return &wire.RateLimitedError{RetryAfter: d}
}
