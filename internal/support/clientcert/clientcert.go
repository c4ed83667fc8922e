// Package clientcert names the cause of a refusal that TLS 1.3 hides: a
// server that requires a client certificate refuses a client without one
// only after the client's side of the handshake has finished, so the client
// learns it from its first request, as the server's alert or, when the
// server's close wins the race, as a bare closed connection. A Transport
// notes that the server asked for a certificate it was not given, and says
// so in the error of a request that then fails.
package clientcert

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
)

// ErrMissing is wrapped by the error of a request that failed on a
// connection to a server that had asked for a client certificate the
// client did not have.
var ErrMissing = errors.New("the server asked for a client certificate and none was given")

// Transport is an HTTP transport that wraps ErrMissing into its errors as
// described in the package comment.
type Transport struct {
	base  *http.Transport
	asked atomic.Bool
}

// NewTransport returns a Transport with base's settings and tc as its TLS
// configuration. With a certificate in tc, or its own
// GetClientCertificate, it is base with tc and nothing more.
func NewTransport(base *http.Transport, tc *tls.Config) *Transport {
	t := &Transport{base: base.Clone()}
	tc = tc.Clone()
	if len(tc.Certificates) == 0 && tc.GetClientCertificate == nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			t.asked.Store(true)
			return &tls.Certificate{}, nil // none: the server decides
		}
	}
	t.base.TLSClientConfig = tc
	return t
}

// RoundTrip sends req; see the package comment for its errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	var op *net.OpError
	if err != nil && t.asked.Load() && !(errors.As(err, &op) && op.Op == "dial") {
		return nil, &missingError{err}
	}
	return resp, err
}

// CloseIdleConnections closes the transport's idle connections.
func (t *Transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

type missingError struct{ err error }

func (e *missingError) Error() string   { return e.err.Error() + " (" + ErrMissing.Error() + ")" }
func (e *missingError) Unwrap() []error { return []error{e.err, ErrMissing} }
