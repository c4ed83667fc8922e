package httpapi

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/wire"
)

// rawRequest sends req, as it is, on a new connection to addr and reads the
// answer.
func rawRequest(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// wantProblem fails unless resp is a problem with status and code.
func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != wire.ProblemContentType {
		t.Fatalf("answer %d %q %s, want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, status, wire.ProblemContentType)
	}
	var p wire.Body
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if p.Code != code || p.Status != status || p.Type != wire.ProblemTypeBase+code || p.Detail == "" || p.Title == "" {
		t.Fatalf("problem %+v, want code %s, status %d, with a title and a detail", p, code, status)
	}
}

// TestProblemListener sends what net/http refuses before any handler runs:
// each answer is a problem with a code, not text/plain.
func TestProblemListener(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts.Listener = ProblemListener(ts.Listener)
	ts.Config.MaxHeaderBytes = 1 << 10
	ts.Start()
	defer ts.Close()
	addr := ts.Listener.Addr().String()
	for _, c := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"HeaderTooLarge", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431, "too_large"},
		{"BadPercentEscape", "GET /v1/kv/orders/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request"},
		{"NoHost", "GET / HTTP/1.1\r\n\r\n", 400, "bad_request"},
		{"BadHeader", "GET / HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n", 400, "bad_request"},
		{"BadRequestLine", "GARBAGE\r\n\r\n", 400, "bad_request"},
		{"TransferEncoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "bad_request"},
		{"Version", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := rawRequest(t, addr, c.req)
			wantProblem(t, resp, body, c.status, c.code)
		})
	}
}

// startTLS serves h with ProblemTLSListener on a certificate that client
// trusts, and returns the server's address and the client.
func startTLS(t *testing.T, h http.Handler) (addr string, client *http.Client) {
	t.Helper()
	cert := httptest.NewTLSServer(h) // for its certificate, and a client that trusts it
	t.Cleanup(cert.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: cert.TLS.Certificates, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ProblemTLSListener(ln, cfg, 5*time.Second, nil))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), cert.Client()
}

// TestProblemTLSListener serves HTTPS through ProblemTLSListener: HTTP/2
// and HTTP/1.1 both work and see the connection's TLS state, and what
// net/http refuses by itself, over TLS or as plain HTTP to the TLS port,
// is answered as a problem.
func TestProblemTLSListener(t *testing.T) {
	addr, client := startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			http.Error(w, "no TLS state", 500)
			return
		}
		io.WriteString(w, r.Proto)
	}))
	for _, h2 := range []bool{true, false} {
		tr := client.Transport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = h2
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]; resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("HTTP/2 %v: %d %s, want 200 %s with the TLS state", h2, resp.StatusCode, b, want)
		}
	}

	// A malformed request over TLS (HTTP/1.1).
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: client.Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /v1/kv/orders/%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	wantProblem(t, resp, body, 400, "bad_request")

	// Plain HTTP to the TLS port.
	resp, body = rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	wantProblem(t, resp, body, 400, "bad_request")
	if !strings.Contains(string(body), "https://") {
		t.Fatalf("detail %s does not say to use https://", body)
	}
}

// TestProblemListener_ResponseLeftAlone has a handler send, as its own
// body, the very bytes of one of net/http's error answers, in a write of
// their own: they reach the client unchanged.
func TestProblemListener_ResponseLeftAlone(t *testing.T) {
	canned := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"
	if _, ok := problemFor([]byte(canned)); !ok {
		t.Fatal("the test's bytes are not taken for net/http's answer")
	}
	pad := strings.Repeat("x", 8<<10)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(pad)+len(canned)))
		io.WriteString(w, pad)
		http.NewResponseController(w).Flush() // so that canned is a write of its own
		io.WriteString(w, canned)
	}))
	ts.Listener = ProblemListener(ts.Listener)
	ts.Start()
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, []byte(pad+canned)) {
		t.Fatalf("the body changed on its way: %d bytes, ends %q", len(b), b[max(0, len(b)-40):])
	}
}
