package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/fence-lock/fence/internal/support/clientcert"
)

// validateTLS checks the TLS flags of fence serve.
func (c *serveConfig) validateTLS() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	if c.ClientCA != "" && c.TLSCert == "" {
		return errors.New("--client-ca needs --tls-cert and --tls-key")
	}
	return nil
}

// loadCertPool reads a PEM file of CA certificates.
func loadCertPool(flagName, file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flagName, file)
	}
	return pool, nil
}

// serverTLSConfig returns the TLS configuration of fence serve, nil without
// --tls-cert. With --client-ca every client must present a certificate
// signed by one of its CAs.
func (c *serveConfig) serverTLSConfig() (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if c.ClientCA != "" {
		pool, err := loadCertPool("--client-ca", c.ClientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// certName returns the CommonName of r's verified client certificate, ""
// when the connection has none (no TLS, or no --client-ca).
func certName(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return r.TLS.VerifiedChains[0][0].Subject.CommonName
}

// httpClient returns the HTTP client of the client commands: nil (the
// default) without --cacert, --client-cert and --client-key. Its errors
// say when the server wanted a client certificate that was not given.
func (c *clientConfig) httpClient() (*http.Client, error) {
	tc, err := c.tlsConfig()
	if tc == nil || err != nil {
		return nil, err
	}
	return &http.Client{Transport: clientcert.NewTransport(http.DefaultTransport.(*http.Transport), tc)}, nil
}

// tlsConfig returns the TLS configuration of the client flags: nil
// without --cacert, --client-cert and --client-key.
func (c *clientConfig) tlsConfig() (*tls.Config, error) {
	if c.CACert == "" && c.ClientCert == "" && c.ClientKey == "" {
		return nil, nil
	}
	if (c.ClientCert == "") != (c.ClientKey == "") {
		return nil, errors.New("--client-cert and --client-key go together: give both or neither")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pool, err := loadCertPool("--cacert", c.CACert)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if c.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("--client-cert/--client-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
