package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	chunkSize   = 32 << 10        // largest read, and so largest chunk
	queueLen    = 16              // chunks held per direction before reading stops
	dialTimeout = 5 * time.Second // for the upstream
	acceptPause = 10 * time.Millisecond
)

// Stats holds the counters of a Proxy since New.
type Stats struct {
	Accepted   int64 // client connections accepted, including refused ones
	Refused    int64 // closed at once because Refuse was on
	DialFailed int64 // closed because the upstream could not be dialled
	Reset      int64 // reset by ResetAll, by the end of a blackhole, or to pass on an error from the other side
	BytesUp    int64 // bytes forwarded from clients to the upstream
	BytesDown  int64 // bytes forwarded from the upstream to clients
}

// Proxy forwards TCP connections from Addr() to an upstream address, with
// faults switched on and off at run time. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // cancelled by Close, to abort dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the proxy

	mu              sync.Mutex
	upstream        string
	latency, jitter time.Duration
	blackhole       bool
	refuse          bool
	closed          bool
	conns           map[*conn]struct{}

	accepted, refused, dialFailed, resets, bytesUp, bytesDown atomic.Int64
}

// New listens on listen (e.g. "127.0.0.1:0") and starts forwarding the
// connections it accepts to upstream, with no fault on.
func New(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, upstream: upstream, conns: make(map[*conn]struct{})}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr returns the address the proxy listens on, for clients to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream sends new connections to addr (the server restarted on
// another port). Existing connections keep their upstream.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

// SetLatency delays every chunk forwarded in either direction by d ± jitter,
// drawn uniformly for each chunk; d = 0 and jitter = 0 turn latency off.
// Order within a connection is preserved: a chunk waits for the earlier
// ones. Negative values count as 0. The new values apply to chunks read
// from now on.
func (p *Proxy) SetLatency(d, jitter time.Duration) {
	p.mu.Lock()
	p.latency, p.jitter = max(d, 0), max(jitter, 0)
	p.mu.Unlock()
}

// Blackhole turns the partition on or off. While it is on, new connections
// are accepted (but not dialled upstream) and nothing is forwarded in either
// direction on any connection: bytes are held, not delivered. Turning it off
// resets every connection that was open at any time while it was on, dropping
// the bytes held; connections accepted afterwards are forwarded normally.
func (p *Proxy) Blackhole(on bool) {
	var held []*conn
	p.mu.Lock()
	p.blackhole = on
	for c := range p.conns {
		if on {
			c.held = true
		} else if c.held {
			held = append(held, c)
		}
	}
	p.mu.Unlock()
	for _, c := range held {
		c.reset()
	}
}

// Refuse turns refusal on or off. While it is on, new connections are
// closed at once with a reset (SO_LINGER 0). Open connections are left alone.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// ResetAll resets every open connection now: both sides are closed with
// SO_LINGER 0, so each peer gets an RST.
func (p *Proxy) ResetAll() {
	for _, c := range p.snapshot() {
		c.reset()
	}
}

// Heal turns every fault off: latency, blackhole (which resets the
// connections it held) and refusal. The upstream is left as it is.
func (p *Proxy) Heal() {
	p.SetLatency(0, 0)
	p.Refuse(false)
	p.Blackhole(false)
}

// Stats returns the counters since New.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:   p.accepted.Load(),
		Refused:    p.refused.Load(),
		DialFailed: p.dialFailed.Load(),
		Reset:      p.resets.Load(),
		BytesUp:    p.bytesUp.Load(),
		BytesDown:  p.bytesDown.Load(),
	}
}

// Close stops accepting, aborts dials in progress, resets every open
// connection (not counted in Stats) and waits for all the proxy's goroutines
// to end. It returns the error of closing the listener; later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, c := range p.snapshot() {
		c.close(true)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) snapshot() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

func (p *Proxy) acceptLoop() {
	for {
		nc, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // e.g. out of file descriptors: wait, then go on
			time.Sleep(acceptPause)
			continue
		}
		p.accepted.Add(1)
		p.wg.Go(func() { p.handle(nc) })
	}
}

// handle runs one client connection to its end.
func (p *Proxy) handle(client net.Conn) {
	p.mu.Lock()
	closed, refuse, blackhole, upstream := p.closed, p.refuse, p.blackhole, p.upstream
	p.mu.Unlock()
	if closed || refuse {
		if refuse {
			p.refused.Add(1)
		}
		abort(client)
		return
	}
	var up net.Conn
	if !blackhole { // across a partition there is nothing to dial
		var err error
		d := net.Dialer{Timeout: dialTimeout}
		if up, err = d.DialContext(p.ctx, "tcp", upstream); err != nil {
			if p.ctx.Err() == nil {
				p.dialFailed.Add(1)
			}
			abort(client)
			return
		}
	}
	c := &conn{p: p, client: client, up: up, done: make(chan struct{})}
	if !p.register(c) {
		if p.ctx.Err() == nil {
			c.reset() // accepted in a blackhole that has ended since
		} else {
			c.close(true)
		}
		return
	}
	if up == nil { // accepted in a blackhole: held until something resets it
		<-c.done
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.pipe(client, up, &p.bytesUp) })
	c.pipe(up, client, &p.bytesDown)
	wg.Wait()
	c.close(false) // both directions ended cleanly, or c was reset already
}

// register adds c to the open connections, marking it held if a blackhole
// is on. It fails if the proxy is closed, or if c was accepted in a
// blackhole that has ended since.
func (p *Proxy) register(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || (c.up == nil && !p.blackhole) {
		return false
	}
	c.held = p.blackhole
	p.conns[c] = struct{}{}
	return true
}

// deliveryTime says when a chunk read now is due, under the current latency.
func (p *Proxy) deliveryTime() time.Time {
	p.mu.Lock()
	d, j := p.latency, p.jitter
	p.mu.Unlock()
	if j > 0 {
		d += time.Duration(rand.Int64N(2*int64(j)+1)) - j
	}
	return time.Now().Add(d)
}

func (p *Proxy) blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

// conn is one forwarded connection.
type conn struct {
	p          *Proxy
	client, up net.Conn // up is nil for a connection accepted in a blackhole
	held       bool     // guarded by p.mu: open during a blackhole, so reset when it ends
	closed     atomic.Bool
	done       chan struct{} // closed by close
}

// close closes both sides, with an RST if reset, and reports whether this
// call did it (rather than an earlier one).
func (c *conn) close(reset bool) bool {
	if !c.closed.CompareAndSwap(false, true) {
		return false
	}
	for _, nc := range []net.Conn{c.client, c.up} {
		if nc == nil {
			continue
		}
		if reset {
			abort(nc)
		} else {
			nc.Close()
		}
	}
	close(c.done)
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return true
}

// reset resets both sides, counting it in Stats.
func (c *conn) reset() {
	if c.close(true) {
		c.p.resets.Add(1)
	}
}

type chunk struct {
	b  []byte
	at time.Time // when it is due
}

// pipe forwards src to dst until src ends, then half-closes dst. An error
// on either side resets the connection, which ends the pipe in the other
// direction too.
func (c *conn) pipe(src, dst net.Conn, count *atomic.Int64) {
	ch := make(chan chunk, queueLen)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.read(src, ch) })
	for {
		var ck chunk
		var ok bool
		select {
		case ck, ok = <-ch:
		case <-c.done:
			return
		}
		if !ok { // src ended its stream: end this direction
			if tc, isTCP := dst.(*net.TCPConn); isTCP {
				tc.CloseWrite()
			}
			return
		}
		if wait := time.Until(ck.at); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		}
		if c.p.blackholed() {
			// c is marked held, so the end of the blackhole resets it.
			<-c.done
			return
		}
		// Count before writing: once a peer has answered this chunk,
		// Stats already include it.
		count.Add(int64(len(ck.b)))
		if n, err := dst.Write(ck.b); err != nil {
			count.Add(int64(n - len(ck.b)))
			c.reset()
			return
		}
	}
}

// read reads src into ch, stamping each chunk with its delivery time; it
// closes ch at EOF and resets the connection on any other error.
func (c *conn) read(src net.Conn, ch chan<- chunk) {
	buf := make([]byte, chunkSize)
	var last time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := c.p.deliveryTime()
			if at.Before(last) { // never overtake an earlier chunk
				at = last
			}
			last = at
			select {
			case ch <- chunk{bytes.Clone(buf[:n]), at}:
			case <-c.done:
				return
			}
		}
		if errors.Is(err, io.EOF) {
			close(ch)
			return
		}
		if err != nil {
			c.reset() // a no-op if the proxy closed c itself
			return
		}
	}
}

// abort closes nc with SO_LINGER 0, so that the peer gets an RST.
func abort(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}
