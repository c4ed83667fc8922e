package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/support/clientcert"
	"github.com/fence-lock/fence/wire"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and client
// certificates into dir.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fence test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// issue writes a certificate signed by the CA and its key, and returns their files.
func (p *testPKI) issue(t *testing.T, name, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "PRIVATE KEY", kder)
}

// startServe runs fence serve with args, on data of its own, and returns
// its address.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startServeData(t, filepath.Join(t.TempDir(), "data"), args...)
	return addr
}

// startServeData runs fence serve with args on the data directory data and
// returns its address, and a function that stops it (as SIGTERM would) and
// returns once it has; the test's end stops it too.
func startServeData(t *testing.T, data string, args ...string) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan error, 1)
	args = append([]string{"--listen", "127.0.0.1:0", "--data", data}, args...)
	go func() {
		done <- serve(ctx, args, stdio{in: strings.NewReader(""), out: io.Discard, err: &stderr})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "fence serving" {
				addr, _ = m["addr"].(string)
			}
		}
	}
	if addr == "" {
		t.Fatalf("serve did not start; log:\n%s", stderr.String())
	}
	return addr, stop
}

// tlsClient returns a client of addr built from the client flags in cfg.
func tlsClient(t *testing.T, addr string, cfg clientConfig) *client.API {
	t.Helper()
	c, err := client.NewAPI(addr)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := cfg.httpClient()
	if err != nil {
		t.Fatal(err)
	}
	if hc != nil {
		c.HTTPClient = hc
	}
	c.Retries = 0
	return c
}

func TestServeTLS(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "127.0.0.1", true)
	addr := startServe(t, "--tls-cert", cert, "--tls-key", key)
	ctx := context.Background()

	ok := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile})
	if _, err := ok.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); err != nil {
		t.Fatalf("Acquire over HTTPS with --cacert: %v", err)
	}
	plain := tlsClient(t, "http://"+addr, clientConfig{})
	if _, err := plain.Acquire(ctx, "orders/2", "h", 10*time.Second, 0); err == nil {
		t.Fatal("Acquire over plain HTTP to a TLS server succeeded")
	}
	noCA := tlsClient(t, "https://"+addr, clientConfig{})
	_, err := noCA.Acquire(ctx, "orders/3", "h", 10*time.Second, 0)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("Acquire without --cacert: %v, want an unknown authority error", err)
	}
}

func TestServeClientCA(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "127.0.0.1", true)
	aliceCert, aliceKey := pki.issue(t, "alice", "alice", false)
	bobCert, bobKey := pki.issue(t, "bob", "bob", false)
	eveCert, eveKey := pki.issue(t, "eve", "eve", false)
	authFile := filepath.Join(t.TempDir(), "auth")
	content := "alice " + auth.HashToken("alice-token") + " lock:orders/\n" +
		"bob " + auth.HashToken("bob-token") + " read:*\n"
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, "--tls-cert", cert, "--tls-key", key, "--client-ca", pki.caFile, "--auth-file", authFile)
	ctx := context.Background()

	// No client certificate: refused at the handshake.
	noCert := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile})
	if _, err := noCert.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); !errors.Is(err, clientcert.ErrMissing) {
		t.Fatalf("Acquire without a client certificate: %v, want clientcert.ErrMissing", err)
	} else if want := "the server at https://" + addr + " wants a client certificate: give --client-cert and --client-key"; describe(err) != want {
		t.Errorf("the message is %q, want %q", describe(err), want)
	}
	// A client certificate from another CA: refused too.
	other := newTestPKI(t)
	strangerCert, strangerKey := other.issue(t, "stranger", "alice", false)
	stranger := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile, ClientCert: strangerCert, ClientKey: strangerKey})
	if _, err := stranger.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); err == nil || errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("Acquire with a certificate of another CA: %v, want a TLS error", err)
	}

	alice := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile, ClientCert: aliceCert, ClientKey: aliceKey})
	if _, err := alice.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); err != nil {
		t.Fatalf("Acquire as alice's certificate: %v", err)
	}
	if _, err := alice.Acquire(ctx, "payments/1", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Acquire outside alice's grants: %v, want forbidden", err)
	}
	// A bearer token takes precedence over the certificate.
	alice.AuthToken = "bob-token"
	if _, err := alice.Acquire(ctx, "orders/2", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Acquire with bob's token over alice's certificate: %v, want forbidden", err)
	}
	bob := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile, ClientCert: bobCert, ClientKey: bobKey})
	if _, err := bob.Acquire(ctx, "orders/3", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Acquire as bob (read only): %v, want forbidden", err)
	}
	eve := tlsClient(t, "https://"+addr, clientConfig{CACert: pki.caFile, ClientCert: eveCert, ClientKey: eveKey})
	if _, err := eve.Acquire(ctx, "orders/4", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("Acquire as eve (not in the auth file): %v, want unauthorized", err)
	}

	// Over HTTP/1.1 too (the clients above speak HTTP/2), the certificate
	// is alice's; but not on a request that says a standby forwarded it,
	// whose certificate would be the standby's.
	pair, err := tls.LoadX509KeyPair(aliceCert, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := loadCertPool("ca", pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	h1 := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
	}}
	for _, c := range []struct {
		forwarded string
		want      int
	}{{"", 200}, {"https://standby.example:7700", 401}} {
		req, _ := http.NewRequest("POST", "https://"+addr+"/v1/locks/orders%2F5/acquire", strings.NewReader(`{"holder":"h"}`))
		if c.forwarded != "" {
			req.Header.Set(wire.ForwardedHeader, c.forwarded)
		}
		resp, err := h1.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || resp.ProtoMajor != 1 {
			t.Fatalf("acquire over %s as alice's certificate, forwarded by %q: %d %s, want %d", resp.Proto, c.forwarded, resp.StatusCode, b, c.want)
		}
	}
}

func TestServeValidateTLS(t *testing.T) {
	base := func() serveConfig {
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), nil); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name             string
		cert, key, ca    string
		wantErrSubstring string
	}{
		{"cert without key", "c.pem", "", "", "--tls-cert and --tls-key"},
		{"key without cert", "", "k.pem", "", "--tls-cert and --tls-key"},
		{"client-ca without TLS", "", "", "ca.pem", "--client-ca needs"},
		{"all", "c.pem", "k.pem", "ca.pem", ""},
	} {
		cfg := base()
		cfg.TLSCert, cfg.TLSKey, cfg.ClientCA = tc.cert, tc.key, tc.ca
		err := cfg.Validate()
		if tc.wantErrSubstring == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstring) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.wantErrSubstring)
		}
	}
	// Through the command line: a usage error before anything starts.
	err := serve(context.Background(), []string{"--data", t.TempDir(), "--tls-cert", "x.pem"}, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Errorf("serve --tls-cert without --tls-key: %v, want a usage error", err)
	}
	// A missing certificate file is a usage error too.
	err = serve(context.Background(), []string{"--data", t.TempDir(), "--tls-cert", "x.pem", "--tls-key", "y.pem"}, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
	if !errors.As(err, &ue) {
		t.Errorf("serve with a missing --tls-cert file: %v, want a usage error", err)
	}
}

func TestClientTLSFlags(t *testing.T) {
	cfg := clientConfig{ClientCert: "c.pem"}
	if _, err := cfg.httpClient(); err == nil {
		t.Error("--client-cert without --client-key accepted")
	}
	cfg = clientConfig{CACert: filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := cfg.httpClient(); err == nil {
		t.Error("a missing --cacert file accepted")
	}
	if hc, err := (&clientConfig{}).httpClient(); hc != nil || err != nil {
		t.Errorf("httpClient without TLS flags = %v, %v; want nil, nil", hc, err)
	}
}
