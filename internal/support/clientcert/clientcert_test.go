package clientcert

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// startServer starts an HTTPS server on loopback that treats client
// certificates as auth says, and returns it with a TLS configuration that
// trusts it and has no client certificate.
func startServer(t *testing.T, auth tls.ClientAuthType) (*httptest.Server, *tls.Config) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: auth}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

func get(t *testing.T, rt http.RoundTripper, url string) error {
	t.Helper()
	resp, err := (&http.Client{Transport: rt}).Get(url)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestRequired: every refusal of a missing certificate says so, however
// the race between the server's alert and its close falls.
func TestRequired(t *testing.T) {
	srv, tc := startServer(t, tls.RequireAnyClientCert)
	for i := range 50 {
		tr := NewTransport(http.DefaultTransport.(*http.Transport), tc)
		err := get(t, tr, srv.URL)
		if !errors.Is(err, ErrMissing) {
			t.Fatalf("request %d: %v, want ErrMissing", i, err)
		}
		tr.CloseIdleConnections()
	}
}

// TestOptional: a server that asks for a certificate but goes on without
// one is still served.
func TestOptional(t *testing.T) {
	srv, tc := startServer(t, tls.VerifyClientCertIfGiven)
	if err := get(t, NewTransport(http.DefaultTransport.(*http.Transport), tc), srv.URL); err != nil {
		t.Fatal(err)
	}
}

// TestOtherFailures: a server that cannot be reached is not blamed on the
// certificate, even after it asked for one.
func TestOtherFailures(t *testing.T) {
	srv, tc := startServer(t, tls.RequireAnyClientCert)
	tr := NewTransport(http.DefaultTransport.(*http.Transport), tc)
	if err := get(t, tr, srv.URL); !errors.Is(err, ErrMissing) {
		t.Fatalf("%v, want ErrMissing", err)
	}
	srv.Close()
	if err := get(t, tr, srv.URL); err == nil || errors.Is(err, ErrMissing) {
		t.Fatalf("a closed server: %v, want a dial error without ErrMissing", err)
	}
}

// TestWithCertificate: a configuration with a certificate is left as it is.
func TestWithCertificate(t *testing.T) {
	tc := &tls.Config{Certificates: []tls.Certificate{{}}}
	if got := NewTransport(http.DefaultTransport.(*http.Transport), tc); got.base.TLSClientConfig.GetClientCertificate != nil {
		t.Fatal("a configuration with a certificate got a GetClientCertificate")
	}
}
