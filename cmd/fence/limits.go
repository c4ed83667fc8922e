package main

import (
	"fmt"
	"math"
	"net"
	"sync"

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
)

// connMetrics are the metrics of the connection cap, which serve registers
// in the server's registry.
func connMetrics() []prometheus.Collector { return []prometheus.Collector{openConns, connsQueued} }

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
// while n are open, as golang.org/x/net/netutil.LimitListener does. A slot
// is freed when its connection is closed.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

// limitListen wraps l so that at most n connections are open; n <= 0 means l
// itself (no limit).
func limitListen(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		connsQueued.Inc()
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
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

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
