package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
