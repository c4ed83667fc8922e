package httpapi

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// net/http answers some requests itself, before any handler sees them, in
// text/plain: a header over http.Server.MaxHeaderBytes (431), a request
// line, header or percent-escape it cannot parse (400), an unsupported
// transfer coding (501) or HTTP version (505), and plain HTTP sent to a TLS
// port (400). ProblemListener (ProblemTLSListener for HTTPS) turns those
// answers into problems, with a code, like every other error of the API.
//
// net/http writes each of them in one Write straight onto the connection.
// A Write of the same bytes from anywhere else (a stored value being sent,
// which anyone may make look like one) is left alone: the rewrite happens
// only when the bytes match and net/http's connection loop is the writer,
// as the stack says. If a release of Go wrote these answers differently,
// they would go out unchanged, never anything else; the tests would say so.

// maxCanned is more than the length of any of net/http's own error answers.
const maxCanned = 1 << 10

// cannedError matches net/http's own error answers over HTTP/1.1.
var cannedError = regexp.MustCompile(`\AHTTP/1\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n(?s:(.*))\z`)

// ProblemListener returns ln, whose connections answer the errors that
// net/http sends by itself as problems (application/problem+json with a
// code): too_large for a header over the limit (status 431), bad_request
// for the others (400, 501 or 505: their status is kept). For HTTPS, use
// ProblemTLSListener instead.
func ProblemListener(ln net.Listener) net.Listener { return &problemListener{ln} }

type problemListener struct{ net.Listener }

func (l *problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c}, nil
}

// problemConn rewrites net/http's own error answers as problems.
type problemConn struct{ net.Conn }

// NetConn returns the connection under c, as tls.Conn's does.
func (c problemConn) NetConn() net.Conn { return c.Conn }

// tlsProblemConn is a problemConn over TLS (its Conn a *tls.Conn): net/http
// takes the connection's TLS state from ConnectionState for Request.TLS.
type tlsProblemConn struct {
	problemConn
	state tls.ConnectionState
}

// ConnectionState returns the state of the connection's TLS handshake.
func (c *tlsProblemConn) ConnectionState() tls.ConnectionState { return c.state }

func (c *problemConn) Write(b []byte) (int, error) {
	if p, ok := problemFor(b); ok && writtenByNetHTTP() {
		if _, err := c.Conn.Write(p); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// Unwrap returns the connection that c wraps.
func (c *problemConn) Unwrap() net.Conn { return c.Conn }

// CloseWrite half-closes the connection, if the one it wraps can, so that
// net/http can answer a request it refuses while the client still sends.
func (c *problemConn) CloseWrite() error { return closeWrite(c.Conn) }

// closeWrite half-closes c if it can (a TCP or TLS connection).
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// problemFor returns the problem answer that stands for b, if b is one of
// net/http's own error answers.
func problemFor(b []byte) ([]byte, bool) {
	// Every write of every response comes here: most are told apart by
	// their length or first bytes, before the expression runs.
	if len(b) > maxCanned || !bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	m := cannedError.FindSubmatch(b)
	if m == nil {
		return nil, false
	}
	status, _ := strconv.Atoi(string(m[1]))
	var err error
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		err = fmt.Errorf("%w: the request's header is larger than the server accepts", fence.ErrTooLarge)
	case http.StatusBadRequest, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		// "400 Bad Request: missing required Host header" says "Bad
		// Request" twice; the reason alone is the detail.
		_, reason, ok := strings.Cut(string(m[2]), ": ")
		if !ok {
			reason = string(m[2])
		}
		err = fmt.Errorf("%w: %s", fence.ErrBadRequest, detailOf(status, reason))
	default:
		return nil, false
	}
	return problemResponse(status, err), true
}

// problemResponse returns a whole HTTP/1.1 answer, with status, that is
// the problem err and closes the connection.
func problemResponse(status int, err error) []byte {
	body := wire.NewBody(err)
	body.Status = status
	js, _ := json.Marshal(body) // cannot fail: strings and numbers
	js = append(js, '\n')
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), wire.ProblemContentType, len(js))
	out.Write(js)
	return out.Bytes()
}

// detailOf says what net/http's reason means, in the API's terms.
func detailOf(status int, reason string) string {
	switch {
	case status == http.StatusNotImplemented:
		return "the request has a transfer encoding the server does not support (only chunked is)"
	case status == http.StatusHTTPVersionNotSupported:
		return "the request's HTTP version is not supported: use HTTP/1.1 or HTTP/2"
	case reason == "" || reason == "Bad Request":
		return "the request is not valid HTTP (its request line, a header, or a percent-escape in its path)"
	}
	return "the request is not valid HTTP: " + reason
}

// writtenByNetHTTP reports whether the Write being served was called by
// net/http's connection loop itself (through fmt.Fprintf or io.WriteString),
// not by a handler's response.
func writtenByNetHTTP() bool {
	var pcs [4]uintptr
	n := runtime.Callers(3, pcs[:]) // skip Callers, this function, Write
	frames := runtime.CallersFrames(pcs[:n])
	for range 2 {
		f, more := frames.Next()
		if f.Function == "net/http.(*conn).serve" {
			return true
		}
		if !more {
			break
		}
	}
	return false
}

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
