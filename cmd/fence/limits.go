package main

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Metrics of the connection limit (--max-conns).
var (
	openConns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fence_http_open_connections", Help: "HTTP connections currently open (accepted and not yet closed).",
	})
	connsQueued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_connections_queued_total", Help: "Times accepting a connection waited because --max-conns were open.",
	})
	idleClosed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_idle_connections_closed_total", Help: "Idle keep-alive connections closed to admit new ones because --max-conns were open.",
	})
)

// connMetrics are the metrics of the connection cap, which serve registers
// in the server's registry.
func connMetrics() []prometheus.Collector {
	return []prometheus.Collector{openConns, connsQueued, idleClosed}
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

// limitListener accepts at most n connections open at once: Accept waits
// while n are open, as golang.org/x/net/netutil.LimitListener does, and a
// slot is freed when its connection is closed. While it waits, it closes the
// connection that has been idle longest between two requests (its
// server's ConnState hook, trackState, says which are), so that clients
// that keep connections open and send nothing cannot keep new clients out:
// a keep-alive connection may be closed while idle at any time, and HTTP
// clients open another.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	idle    map[net.Conn]time.Time // connections idle between requests, since when
	closing bool                   // an idle connection is being closed, its slot not yet free
}

// idleCheck is how often a waiting Accept looks for an idle connection to
// close, when none was idle before.
const idleCheck = 50 * time.Millisecond

// limitListen wraps l so that at most n connections are open; n <= 0 means
// no limit, and nil.
func limitListen(l net.Listener, n int) *limitListener {
	if n <= 0 {
		return nil
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), idle: map[net.Conn]time.Time{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		connsQueued.Inc()
		if err := l.waitSlot(); err != nil {
			return nil, err
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	openConns.Inc()
	return &limitConn{Conn: c, release: func() { openConns.Dec(); <-l.sem }}, nil
}

// waitSlot takes a slot once one is free, closing idle connections to free
// one meanwhile.
func (l *limitListener) waitSlot() error {
	tick := time.NewTicker(idleCheck)
	defer tick.Stop()
	for {
		l.closeIdlest()
		select {
		case l.sem <- struct{}{}:
			// A slot came free: the close under way is done with, or
			// does not matter any more, so the next wait may close one.
			l.mu.Lock()
			l.closing = false
			l.mu.Unlock()
			return nil
		case <-l.done:
			return net.ErrClosed
		case <-tick.C:
		}
	}
}

// closeIdlest closes the connection idle longest, if one is idle and none
// is being closed already: a TLS connection's Close can take seconds, and
// one slot is all a waiting Accept needs.
func (l *limitListener) closeIdlest() {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return
	}
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest == nil {
		l.mu.Unlock()
		return
	}
	delete(l.idle, oldest) // closed once, however often this runs
	l.closing = true
	l.mu.Unlock()
	idleClosed.Inc()
	// A TLS connection's Close writes a close_notify alert, which a
	// client that does not read can hold for seconds: not here.
	go func() {
		oldest.Close()
		l.mu.Lock()
		l.closing = false
		l.mu.Unlock()
	}()
}

// trackState is the http.Server's ConnState hook: it records which
// connections are idle between requests.
func (l *limitListener) trackState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn frees its listener's slot on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
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
	c.once.Do(c.release)
	return err
}
