package httpapi

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"

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
// they would go out unchanged, never anything else, and TestProblemListener,
// which sends each of them, would fail.

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
