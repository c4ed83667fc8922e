package httpapi

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fence-lock/fence/wire"
	"golang.org/x/time/rate"
)

// limiterIdle is how long a client's limiter lives unused before a sweep
// drops it; a dropped client starts again with a full burst.
const limiterIdle = 5 * time.Minute

// maxLimiters bounds the clients tracked at once (about 200 bytes each).
// Past it, a sweep drops the idle ones; if none is idle, the clients not
// yet tracked share one bucket, so that a flood of new clients can neither
// grow the table nor escape the limit.
const maxLimiters = 1 << 16

// limiters holds one token bucket per client, dropping those idle for
// limiterIdle in sweeps made lazily, at most once per limiterIdle or when
// the table is full.
type limiters struct {
	mu        sync.Mutex
	clients   map[string]*bucket
	overflow  *bucket // shared by the clients not tracked while the table is full
	lastSweep time.Time
	max       int // maxLimiters; tests lower it
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
		if ls.max == 0 {
			ls.max = maxLimiters
		}
	}
	c := ls.clients[key]
	if c == nil {
		if now.Sub(ls.lastSweep) >= limiterIdle || len(ls.clients) >= ls.max {
			ls.sweep(now)
		}
		if len(ls.clients) < ls.max {
			c = &bucket{lim: rate.NewLimiter(limit, max(burst, 1))}
			ls.clients[key] = c
		} else {
			if ls.overflow == nil {
				ls.overflow = &bucket{lim: rate.NewLimiter(limit, max(burst, 1))}
			}
			c = ls.overflow
		}
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

// sweep drops the clients idle for limiterIdle.
func (ls *limiters) sweep(now time.Time) {
	for k, c := range ls.clients {
		if now.Sub(c.used) >= limiterIdle {
			delete(ls.clients, k)
		}
	}
	ls.lastSweep = now
}

// len returns the number of clients tracked, for tests.
func (ls *limiters) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.clients)
}

// clientKey identifies the client of c for rate limiting: its caller's name
// once authenticated (one principal is one client, from any address), else
// its source address. Nothing the client sends unauthenticated makes it
// another client.
func clientKey(c *call) string {
	if c.caller != nil {
		return "caller:" + c.caller.Name()
	}
	return "addr:" + addrKey(c.r.RemoteAddr)
}

// addrKey returns the network a remote address counts as: the IPv4
// address, or the /64 of an IPv6 address (which one host is commonly given
// whole, so that it cannot be one client per address).
func addrKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// rateLimit checks c against its client's limiter, if s.RateLimit is set.
func (s *Server) rateLimit(c *call, now time.Time) error {
	if s.RateLimit <= 0 || s.RateLimit == rate.Inf {
		return nil
	}
	ok, d := s.limiters.allow(clientKey(c), s.RateLimit, s.RateBurst, now)
	if ok {
		return nil
	}
	rateLimitedTotal.Inc()
	return &wire.RateLimitedError{RetryAfter: d}
}
