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

// maxLimiters bounds the source addresses tracked at once (about 200 bytes
// each). Past it, a sweep drops the idle ones, at most once a
// fullSweepEvery; if none is idle, the addresses not yet tracked share one
// bucket, so that a flood of new addresses can neither grow the table nor
// escape the limit, nor make every request pay for a sweep. Authenticated
// callers are not counted: the auth file bounds them, and a flood of
// addresses must not limit them.
const maxLimiters = 1 << 16

// fullSweepEvery is how often a full table of addresses is swept.
const fullSweepEvery = time.Second

// limiters holds one token bucket per client, dropping those idle for
// limiterIdle in sweeps made lazily, at most once per limiterIdle (or per
// fullSweepEvery while the table of addresses is full).
type limiters struct {
	mu        sync.Mutex
	callers   map[string]*bucket // by Caller name: not capped
	addrs     map[string]*bucket // by source address: at most max
	overflow  *bucket            // shared by the addresses not tracked while the table is full
	lastSweep time.Time
	max       int // maxLimiters; tests lower it
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// allow takes a token from the bucket of key (of a caller if caller, else
// of an address). If none is left it returns the time until one is.
func (ls *limiters) allow(key string, caller bool, limit rate.Limit, burst int, now time.Time) (bool, time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.addrs == nil {
		ls.callers, ls.addrs = make(map[string]*bucket), make(map[string]*bucket)
		ls.lastSweep = now
		if ls.max == 0 {
			ls.max = maxLimiters
		}
	}
	table := ls.addrs
	if caller {
		table = ls.callers
	}
	c := table[key]
	if c == nil {
		since := now.Sub(ls.lastSweep)
		if since >= limiterIdle || !caller && len(ls.addrs) >= ls.max && since >= fullSweepEvery {
			ls.sweep(now)
		}
		switch {
		case caller || len(ls.addrs) < ls.max:
			c = &bucket{lim: rate.NewLimiter(limit, max(burst, 1))}
			table[key] = c
		default:
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
	for _, table := range []map[string]*bucket{ls.callers, ls.addrs} {
		for k, c := range table {
			if now.Sub(c.used) >= limiterIdle {
				delete(table, k)
			}
		}
	}
	ls.lastSweep = now
}

// len returns the number of clients tracked, for tests.
func (ls *limiters) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.callers) + len(ls.addrs)
}

// clientKey identifies the client of c for rate limiting, and says whether
// it is a caller: its caller's name once authenticated (one principal is
// one client, from any address), else its source address. Nothing the
// client sends unauthenticated makes it another client.
func clientKey(c *call) (key string, caller bool) {
	if c.caller != nil {
		return c.caller.Name(), true
	}
	return SourceOf(c.r.RemoteAddr), false
}

// SourceOf returns the network a remote address ("host:port") counts as
// for the limits of one client: the IPv4 address, or the /64 of an IPv6
// address (which one host is commonly given whole, so that it cannot be one
// client per address).
func SourceOf(remote string) string {
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
func (s *Handler) rateLimit(c *call, now time.Time) error {
	if s.RateLimit <= 0 || s.RateLimit == rate.Inf {
		return nil
	}
	key, caller := clientKey(c)
	ok, d := s.limiters.allow(key, caller, s.RateLimit, s.RateBurst, now)
	if ok {
		return nil
	}
	rateLimitedTotal.Inc()
	return &wire.RateLimitedError{RetryAfter: d}
}
