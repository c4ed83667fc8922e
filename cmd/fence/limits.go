package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fence-lock/fence/httpapi"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Metrics of the connection limit (--max-conns).
var (
	openConns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fence_http_open_connections", Help: "HTTP connections currently open (accepted and not yet closed).",
	})
	connsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_connections_evicted_total", Help: "Connections closed, at --max-conns, to admit one from a source holding at least two fewer.",
	})
	connsQueued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_connections_queued_total", Help: "New connections that waited for a slot at --max-conns: none could be closed for them.",
	})
	connsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_connections_refused_total", Help: "New connections closed, at --max-conns, because no slot came free for them in 5 s, or too many waited already.",
	})
	idleClosed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_idle_connections_closed_total", Help: "Idle keep-alive connections closed to admit new ones because --max-conns were open.",
	})
)

// connMetrics are the metrics of the connection cap, which serve registers
// in the server's registry.
func connMetrics() []prometheus.Collector {
	return []prometheus.Collector{openConns, connsEvicted, connsQueued, connsRefused, idleClosed}
}

// validateLimits reports a limit flag out of range.
func (c *serveConfig) validateLimits() error {
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		return fmt.Errorf("--rate-limit must be a finite number of requests per second, 0 or more, not %v", c.RateLimit)
	}
	if c.RateBurst < 0 {
		return fmt.Errorf("--rate-burst must not be negative, not %d", c.RateBurst)
	}
	if c.MaxWaiters < 0 {
		return fmt.Errorf("--max-waiters must not be negative, not %d", c.MaxWaiters)
	}
	for name, n := range map[string]int{"--max-client-waiters": c.ClientWaiters, "--max-total-waiters": c.TotalWaiters,
		"--max-client-watchers": c.ClientWatchers, "--max-total-watchers": c.TotalWatchers} {
		if n < 0 {
			return fmt.Errorf("%s must not be negative, not %d", name, n)
		}
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("--max-conns must not be negative, not %d", c.MaxConns)
	}
	return nil
}

// rateLimit returns the per-client limit and burst for the HTTP API: a burst
// of 0 means twice the rate, at least 1.
func (c *serveConfig) rateLimit() (rate.Limit, int) {
	if c.RateLimit <= 0 {
		return 0, 0
	}
	burst := c.RateBurst
	if burst == 0 {
		burst = max(1, int(math.Min(math.Ceil(2*c.RateLimit), math.MaxInt32)))
	}
	return rate.Limit(c.RateLimit), burst
}

// limitListener keeps at most n connections open at once, shared fairly
// between their sources (an IPv4 address or an IPv6 /64, as the rate limit
// counts them). While fewer than n are open, every connection is admitted.
// At the cap, a new connection takes the slot of
//
//   - a connection of the source holding the most, if that source holds at
//     least two more than the new connection's: the one idle longest
//     between two requests (its server's ConnState hook, trackState, says
//     which are), else its oldest; so one client's idle keep-alives, slow
//     headers, endless bodies or long polls cannot keep another out;
//   - else the new connection's own source's connection idle longest;
//   - else the connection idle longest of any, if idle for idleGrace: a
//     keep-alive connection may be closed while idle at any time, and
//     HTTP clients open another;
//
// and else it waits, for up to parkTime, for one of those or a free slot
// (at most n/4 wait at once, n/16 of one source; past that, and after
// parkTime, it is closed).
// A slot is freed when its connection is closed.
type limitListener struct {
	net.Listener
	max int

	conns chan net.Conn // admitted, for Accept
	errs  chan error    // the inner listener's errors worth retrying
	ended chan struct{} // closed when the inner listener failed for good, with err
	err   error
	done  chan struct{} // closed by Close
	once  sync.Once

	mu       sync.Mutex
	open     int                            // admitted and not yet closed
	seq      uint64                         // of the last connection admitted
	sources  map[string]map[*limitConn]bool // open connections by source
	idle     map[*limitConn]time.Time       // connections idle between requests, since when
	parked   int                            // connections waiting for a slot
	parkedBy map[string]int                 // of them, by source
}

// parkTime is how long a new connection waits for a slot at the cap
// before it is closed; idleCheck is how often it looks again. idleGrace is
// how long another source's connection must have been idle to be closed
// for it: a client sending its next request on a keep-alive connection as
// the server closes it sees an error, so a connection just back from a
// request is left alone.
const (
	parkTime  = 5 * time.Second
	idleCheck = 50 * time.Millisecond
	idleGrace = time.Second
)

// limitListen wraps l so that at most n connections are open; n <= 0 means
// no limit, and nil.
func limitListen(l net.Listener, n int) *limitListener {
	if n <= 0 {
		return nil
	}
	ll := &limitListener{Listener: l, max: n,
		conns: make(chan net.Conn), errs: make(chan error), ended: make(chan struct{}), done: make(chan struct{}),
		sources: map[string]map[*limitConn]bool{}, idle: map[*limitConn]time.Time{}, parkedBy: map[string]int{}}
	go ll.acceptLoop()
	return ll
}

// acceptLoop accepts the inner listener's connections and admits them, or
// parks them, until it fails for good.
func (l *limitListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var t interface{ Temporary() bool }
			if !errors.As(err, &t) || !t.Temporary() {
				l.err = err
				close(l.ended)
				return
			}
			select {
			case l.errs <- err: // net/http backs off and calls again
			case <-l.done:
				return
			}
			continue
		}
		src := httpapi.SourceOf(c.RemoteAddr().String())
		if lc := l.admit(c, src); lc != nil {
			l.deliver(lc)
			continue
		}
		l.mu.Lock()
		// At most a quarter of the cap waits, and of that no source more
		// than a sixteenth of the cap, so that one cannot fill the wait.
		park := l.parked < max(1, l.max/4) && l.parkedBy[src] < max(1, l.max/16)
		if park {
			l.parked++
			l.parkedBy[src]++
		}
		l.mu.Unlock()
		if !park {
			connsRefused.Inc()
			c.Close()
			continue
		}
		go l.waitSlot(c, src)
	}
}

// waitSlot admits c once it can, within parkTime, or closes it. Its place
// in the wait is given up as soon as it is admitted or refused, before it
// is handed on, so that the next connection to wait finds it free.
func (l *limitListener) waitSlot(c net.Conn, src string) {
	unpark := func() {
		l.mu.Lock()
		l.parked--
		if l.parkedBy[src]--; l.parkedBy[src] == 0 {
			delete(l.parkedBy, src)
		}
		l.mu.Unlock()
	}
	connsQueued.Inc()
	tick := time.NewTicker(idleCheck)
	defer tick.Stop()
	deadline := time.After(parkTime)
	for {
		select {
		case <-tick.C:
			if lc := l.admit(c, src); lc != nil {
				unpark()
				l.deliver(lc)
				return
			}
		case <-deadline:
			unpark()
			connsRefused.Inc()
			c.Close()
			return
		case <-l.done:
			unpark()
			c.Close()
			return
		}
	}
}

// deliver hands c to Accept, or closes it if the listener is closed first.
func (l *limitListener) deliver(c *limitConn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.ended:
		return nil, l.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the inner listener; connections waiting for a slot are
// closed, those admitted stay open.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// admit returns c, from source src, as a connection that holds a slot,
// making room for it as limitListener says, or nil if there is none for it
// now.
func (l *limitListener) admit(c net.Conn, src string) *limitConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		victim := l.victimLocked(src, time.Now())
		if victim == nil {
			return nil
		}
		l.releaseLocked(victim)
		// The raw connection: closing it does not block, where a TLS
		// one's Close writes a close_notify alert that a client that does
		// not read can hold for seconds. The TLS connection on top of it,
		// if any, just fails.
		go victim.Conn.Close()
	}
	l.seq++
	lc := &limitConn{Conn: c, l: l, source: src, seq: l.seq}
	l.open++
	openConns.Inc()
	conns := l.sources[src]
	if conns == nil {
		conns = map[*limitConn]bool{}
		l.sources[src] = conns
	}
	conns[lc] = true
	return lc
}

// victimLocked returns the connection whose slot a new one from src takes,
// as limitListener says, or nil if none.
func (l *limitListener) victimLocked(src string, now time.Time) *limitConn {
	var most map[*limitConn]bool
	for _, conns := range l.sources {
		if len(conns) > len(most) {
			most = conns
		}
	}
	if len(most) >= len(l.sources[src])+2 {
		if c := l.idlestLocked(most, 0, now); c != nil {
			idleClosed.Inc()
			return c
		}
		var oldest *limitConn
		for c := range most {
			if oldest == nil || c.seq < oldest.seq {
				oldest = c
			}
		}
		connsEvicted.Inc()
		return oldest
	}
	c := l.idlestLocked(l.sources[src], 0, now)
	if c == nil {
		c = l.idlestLocked(nil, idleGrace, now)
	}
	if c != nil {
		idleClosed.Inc()
	}
	return c
}

// idlestLocked returns the connection of among (of any, if nil) idle
// longest between two requests, if one has been idle for at least grace.
func (l *limitListener) idlestLocked(among map[*limitConn]bool, grace time.Duration, now time.Time) *limitConn {
	var idlest *limitConn
	var since time.Time
	for c, t := range l.idle {
		if (among == nil || among[c]) && (idlest == nil || t.Before(since)) {
			idlest, since = c, t
		}
	}
	if idlest == nil || now.Sub(since) < grace {
		return nil
	}
	return idlest
}

// releaseLocked frees c's slot, once.
func (l *limitListener) releaseLocked(c *limitConn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	openConns.Dec()
	delete(l.idle, c)
	conns := l.sources[c.source]
	delete(conns, c)
	if len(conns) == 0 {
		delete(l.sources, c.source)
	}
}

// trackState is the http.Server's ConnState hook: it records which
// connections are idle between requests.
func (l *limitListener) trackState(c net.Conn, s http.ConnState) {
	lc := admitted(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle && !lc.released {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

// admitted returns the limitConn under c, the connection an http.Server
// serves (a TLS connection over it, say), or nil if there is none.
func admitted(c net.Conn) *limitConn {
	for {
		switch v := c.(type) {
		case *limitConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}

// limitConn is a connection admitted by a limitListener: its first Close
// frees its slot.
type limitConn struct {
	net.Conn
	l        *limitListener
	source   string
	seq      uint64 // order of admission
	released bool   // guarded by l.mu
}

// CloseWrite half-closes the connection, if the one it wraps can.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}
