package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
)

func TestServeValidateLimits(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--rate-limit", "10", "--rate-burst", "5", "--max-waiters", "0", "--max-conns", "0"}, true},
		{[]string{"--rate-limit", "-1"}, false},
		{[]string{"--rate-limit", "NaN"}, false},
		{[]string{"--rate-limit", "+Inf"}, false},
		{[]string{"--rate-burst", "-1"}, false},
		{[]string{"--max-waiters", "-1"}, false},
		{[]string{"--max-conns", "-1"}, false},
	}
	for _, tt := range tests {
		var cfg serveConfig
		if err := parseFlags(serveFlags(&cfg, io.Discard), tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if err := cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%v: Validate = %v, want ok=%v", tt.args, err, tt.ok)
		}
	}

	var cfg serveConfig
	if err := parseFlags(serveFlags(&cfg, io.Discard), nil); err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimit != 0 || cfg.MaxWaiters != 1000 || cfg.MaxConns != 4096 {
		t.Fatalf("defaults: %+v", cfg)
	}
	for _, tt := range []struct {
		limit float64
		burst int
		want  int
	}{{0, 0, 0}, {10, 0, 20}, {0.2, 0, 1}, {10, 3, 3}} {
		cfg := serveConfig{RateLimit: tt.limit, RateBurst: tt.burst}
		l, b := cfg.rateLimit()
		if l != rate.Limit(tt.limit) || b != tt.want {
			t.Errorf("rateLimit(%v, %d) = %v, %d, want burst %d", tt.limit, tt.burst, l, b, tt.want)
		}
	}
}

func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListen(inner, 2)
	defer ln.Close()

	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var server []net.Conn
	for range 2 {
		select {
		case c := <-accepted:
			server = append(server, c)
		case <-time.After(5 * time.Second):
			t.Fatal("the first two connections were not accepted")
		}
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with two open and a cap of 2")
	case <-time.After(100 * time.Millisecond):
	}
	server[0].Close()
	server[0].Close() // a second Close frees nothing more
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	server[1].Close()

	ln.Close()
	select {
	case _, ok := <-accepted:
		if ok {
			t.Fatal("accepted a connection after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

func TestLimitListenerBlockedClose(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListen(inner, 1)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	errC := make(chan error, 1)
	go func() { _, err := ln.Accept(); errC <- err }() // waits at the cap
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-errC:
		if err == nil {
			t.Fatal("Accept at the cap returned a connection after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept at the cap did not return after Close")
	}
}

// TestServe_IdleConnectionsDoNotLockOut fills --max-conns with keep-alive
// connections that each sent one request and then say nothing, more of
// them than the cap: the server closes the idlest to admit the rest, and a
// new client's /healthz and /metrics are answered within seconds, not
// after --idle-timeout. The 5,000 connections against the default
// cap of 4,096 when the process may open that many files.
func TestServe_IdleConnectionsDoNotLockOut(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Client and server ends are both in this process.
	idle, maxConns := 5000, 4096
	if budget := int(lim.Cur)/2 - 200; budget < idle {
		idle, maxConns = budget, budget*4/5
		t.Logf("RLIMIT_NOFILE is %d: %d idle connections against --max-conns %d", lim.Cur, idle, maxConns)
	}
	if idle < 50 {
		t.Fatalf("RLIMIT_NOFILE %d leaves room for %d connections, too few to test", lim.Cur, idle)
	}
	addr := startServe(t, "--max-conns", strconv.Itoa(maxConns), "--idle-timeout", "10m")
	before := testutil.ToFloat64(idleClosed)

	// Each idle client sends one request on its own connection, reads the
	// answer, and keeps the connection open. Those past the cap are
	// admitted only as older ones are closed.
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	req := []byte("GET /healthz HTTP/1.1\r\nHost: fence\r\n\r\n")
	var wg sync.WaitGroup
	errs := make(chan error, idle)
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(time.Minute))
			if _, err := c.Write(req); err != nil {
				errs <- err
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				errs <- fmt.Errorf("an idle client's request: %w", err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err) // every one of them was served in the end
	}
	if got := testutil.ToFloat64(idleClosed) - before; got < float64(idle-maxConns) {
		t.Fatalf("fence_http_idle_connections_closed_total rose by %v, want at least %d", got, idle-maxConns)
	}

	// With the cap full of idle connections, a new client gets through.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/metrics"} {
		start := time.Now()
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s with %d idle connections open: %v", path, idle, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		t.Logf("GET %s answered in %v", path, time.Since(start).Round(time.Millisecond))
	}
}
