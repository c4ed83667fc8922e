package httpapi

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
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

// TestProblemListener_PlainHTTPToTLS sends plain HTTP to a TLS port.
func TestProblemListener_PlainHTTPToTLS(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts.Listener = ProblemListener(ts.Listener)
	ts.StartTLS()
	defer ts.Close()
	resp, body := rawRequest(t, ts.Listener.Addr().String(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	wantProblem(t, resp, body, 400, "bad_request")
	if !strings.Contains(string(body), "https://") {
		t.Fatalf("detail %s does not say to use https://", body)
	}
	// TLS itself still works through the listener.
	c := ts.Client()
	c.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS12
	r, err := c.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
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
