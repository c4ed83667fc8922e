package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
)

func TestServeValidateListen(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"--listen", "127.0.0.1:7700"}, true},
		{[]string{"--listen", "[::1]:7700"}, true},
		{[]string{"--listen", "localhost:7700"}, true},
		{[]string{"--listen", ":7700"}, false},
		{[]string{"--listen", "0.0.0.0:7700"}, false},
		{[]string{"--listen", "10.0.0.1:7700"}, false},
		{[]string{"--listen", "0.0.0.0:7700", "--insecure-listen"}, true},
		{[]string{"--listen", "0.0.0.0:7700", "--auth-file", "x"}, true},
		{[]string{"--protect-metrics"}, false},
		{[]string{"--protect-metrics", "--auth-file", "x"}, true},
	}
	for _, tt := range tests {
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), tt.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%v: Validate = %v, want ok=%v", tt.args, err, tt.ok)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestServeAuth(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth")
	content := "# test\nw " + auth.HashToken("secret") + " lock:orders/ write:orders/ read:*\n"
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--auth-file", authFile},
			stdio{in: strings.NewReader(""), out: io.Discard, err: &stderr})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var addr string
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
	first, _, _ := strings.Cut(stderr.String(), "\n")
	if !strings.Contains(first, `"auth":"on"`) {
		t.Errorf("first log line %s does not say auth is on", first)
	}

	c, err := client.NewAPI("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Retries = 0
	if _, err := c.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("Acquire without token: %v", err)
	}
	c.AuthToken = "secret"
	if _, err := c.Acquire(ctx, "payments/1", "h", 10*time.Second, 0); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Acquire outside grant: %v", err)
	}
	if _, err := c.Acquire(ctx, "orders/1", "h", 10*time.Second, 0); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
}

func TestReloadOnHUP(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a " + auth.HashToken("ta") + " read:*\n")
	var tokens auth.Reloader
	if err := tokens.Load(file); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal)
	go reloadOnHUP(ctx, hup, &tokens, file, logger)

	write("broken\n")
	hup <- os.Interrupt
	hup <- os.Interrupt // the first is handled once this one is received
	if _, ok := tokens.Authenticate("ta"); !ok {
		t.Fatal("a bad file replaced the tokens")
	}
	write("b " + auth.HashToken("tb") + " read:*\n")
	hup <- os.Interrupt
	hup <- os.Interrupt
	if _, ok := tokens.Authenticate("tb"); !ok {
		t.Fatal("reload did not load the new file")
	}
	if s := logs.String(); !strings.Contains(s, "reload failed") || !strings.Contains(s, "auth file reloaded") {
		t.Fatalf("logs:\n%s", s)
	}
}

// TestServe_ProblemsFromNetHTTP checks that fence serve answers what
// net/http refuses by itself as problems, on a plain and on a TLS port.
func TestServe_ProblemsFromNetHTTP(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "127.0.0.1", true)
	tlsAddr := startServe(t, "--tls-cert", cert, "--tls-key", key)
	resp, body := rawHTTP(t, tlsAddr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, "https://") {
		t.Fatalf("plain HTTP to the TLS port: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	addr := startServe(t)
	resp, body = rawHTTP(t, addr, "GET /v1/kv/orders/%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"code":"bad_request"`) {
		t.Fatalf("a bad percent-escape: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = rawHTTP(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 80<<10)+"\r\n\r\n")
	if resp.StatusCode != 431 || !strings.Contains(body, `"code":"too_large"`) {
		t.Fatalf("a header over 64 KiB: %d %s", resp.StatusCode, body)
	}
}

// rawHTTP sends req as it is on a new connection to addr and returns the
// answer and its body.
func rawHTTP(t *testing.T, addr, req string) (*http.Response, string) {
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
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServe_LeaseBoundToPrincipal has a second principal, with the same
// grants, try to take over the first one's lease: acquiring as its holder,
// renewing it to a 10 ms TTL, releasing it. Each is forbidden and changes
// nothing; the lease stays its owner's, across a restart too.
func TestServe_LeaseBoundToPrincipal(t *testing.T) {
	authFile := filepath.Join(t.TempDir(), "auth")
	content := "alice " + auth.HashToken("alice-token") + " lock:orders/ read:*\n" +
		"mallory " + auth.HashToken("mallory-token") + " lock:orders/ read:*\n"
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	ctx := t.Context()
	newClient := func(addr, token string) *client.API {
		c, err := client.NewAPI("http://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Retries, c.AuthToken = 0, token
		return c
	}
	addr, stop := startServeData(t, data, "--auth-file", authFile)
	alice, mallory := newClient(addr, "alice-token"), newClient(addr, "mallory-token")
	l, err := alice.Acquire(ctx, "orders/1", "worker-1", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	steal := func(when string) {
		t.Helper()
		if got, err := mallory.Acquire(ctx, "orders/1", "worker-1", time.Minute, 0); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("%s: mallory's acquire as alice's holder: %+v, %v; want forbidden", when, got, err)
		}
		if _, err := mallory.Renew(ctx, "orders/1", l.Token, 10*time.Millisecond); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("%s: mallory's renew of alice's lease: %v, want forbidden", when, err)
		}
		if err := mallory.Release(ctx, "orders/1", l.Token); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("%s: mallory's release of alice's lease: %v, want forbidden", when, err)
		}
		st, err := alice.Status(ctx, "orders/1")
		if err != nil || !st.Held || st.Token != l.Token || time.Until(st.Expires) < 30*time.Second {
			t.Fatalf("%s: alice's lease after the attempts: %+v, %v; want it held with its TTL", when, st, err)
		}
	}
	steal("before a restart")
	// mallory's own lease of another resource is mallory's.
	if _, err := mallory.Acquire(ctx, "orders/2", "worker-1", time.Minute, 0); err != nil {
		t.Fatalf("mallory's own lease: %v", err)
	}
	stop()

	addr, _ = startServeData(t, data, "--auth-file", authFile)
	alice, mallory = newClient(addr, "alice-token"), newClient(addr, "mallory-token")
	steal("after a restart")
	if _, err := alice.Renew(ctx, "orders/1", l.Token, time.Minute); err != nil {
		t.Fatalf("alice's renew of her lease: %v", err)
	}
	if err := alice.Release(ctx, "orders/1", l.Token); err != nil {
		t.Fatalf("alice's release of her lease: %v", err)
	}
}
