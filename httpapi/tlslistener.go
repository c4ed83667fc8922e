package httpapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fence-lock/fence"
)

// ProblemTLSListener returns ln serving TLS with config, whose connections
// answer net/http's own errors as problems, as ProblemListener's do, over
// HTTP/1.1 and to plain HTTP sent to it (400 bad_request). It makes each
// TLS handshake itself, off the accept loop, within handshakeTimeout
// (none if 0): a connection that negotiates HTTP/2 is handed to net/http
// as its *tls.Conn, so that net/http serves HTTP/2 on it; one that
// negotiates HTTP/1.1 is wrapped, so that its answers can be rewritten in
// the clear; net/http still sets Request.TLS from the wrapper's
// ConnectionState. errorLog, if not nil, is told of handshakes that
// fail, as net/http would log them.
func ProblemTLSListener(ln net.Listener, config *tls.Config, handshakeTimeout time.Duration, errorLog func(format string, args ...any)) net.Listener {
	l := &tlsListener{inner: ln, config: config, timeout: handshakeTimeout, errorLog: errorLog,
		conns: make(chan net.Conn), errs: make(chan error), ended: make(chan struct{}), done: make(chan struct{}), shaking: map[net.Conn]bool{}}
	go l.acceptLoop()
	return l
}

// tlsListener is ProblemTLSListener's listener.
type tlsListener struct {
	inner    net.Listener
	config   *tls.Config
	timeout  time.Duration
	errorLog func(format string, args ...any)
	conns    chan net.Conn // handshaken connections
	errs     chan error    // inner's Accept errors worth retrying
	ended    chan struct{} // closed when inner failed for good, with err
	err      error
	done     chan struct{} // closed by Close
	once     sync.Once

	mu      sync.Mutex
	shaking map[net.Conn]bool // raw connections whose handshake is in flight, closed by Close
}

// acceptLoop accepts connections of the inner listener and shakes their
// hands, each in a goroutine of its own, until the inner listener fails
// for good.
func (l *tlsListener) acceptLoop() {
	var backoff time.Duration
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			if !isTemporary(err) {
				l.err = err // closed, or failed for good: Accept returns err from now on
				close(l.ended)
				return
			}
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			raw.Close()
			return
		default:
		}
		l.shaking[raw] = true
		l.mu.Unlock()
		go l.handshake(raw)
	}
}

// isTemporary reports whether err is an accept error worth retrying (too
// many open files, and the like): those net/http's Serve retries.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// handshake makes raw's TLS handshake and hands the connection to Accept.
// Plain HTTP sent instead is answered with a problem.
func (l *tlsListener) handshake(raw net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.shaking, raw)
		l.mu.Unlock()
	}()
	if l.timeout > 0 {
		raw.SetDeadline(time.Now().Add(l.timeout))
	}
	tc := tls.Server(raw, l.config)
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			re.Conn.Write(problemResponse(http.StatusBadRequest,
				fmt.Errorf("%w: plain HTTP sent to a port that serves HTTPS: use https://", fence.ErrBadRequest)))
		}
		if l.errorLog != nil {
			l.errorLog("http: TLS handshake error from %s: %v", raw.RemoteAddr(), err)
		}
		raw.Close()
		return
	}
	raw.SetDeadline(time.Time{})
	var c net.Conn = tc
	if st := tc.ConnectionState(); st.NegotiatedProtocol != "h2" {
		c = &tlsProblemConn{problemConn: problemConn{tc}, state: st}
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// looksLikeHTTP reports whether the first bytes of a connection that
// should have been a TLS record are plain HTTP (net/http's test).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
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

func (l *tlsListener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for raw := range l.shaking { // their handshakes fail, and they hand nothing over
			raw.Close()
		}
		l.mu.Unlock()
	})
	return l.inner.Close()
}

func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }
