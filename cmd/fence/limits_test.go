package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// dialFrom dials addr from the loopback address src (127.0.0.2, say: all
// of 127/8 is the loopback interface), so that a test can be two sources.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server closed c within 5 s.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := inner.Addr().String()
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
	next := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was not accepted", what)
			return nil
		}
	}
	a1, a2 := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	s1, s2 := next("the first connection"), next("the second connection")
	dialFrom(t, "127.0.0.1", addr)
	select {
	case <-accepted:
		t.Fatal("a third connection of one source was accepted with two of it open and a cap of 2")
	case <-time.After(200 * time.Millisecond):
	}
	s1.Close()
	s1.Close() // a second Close frees nothing more
	defer s2.Close()
	defer next("the third connection, after one closed").Close()
	if !closedByPeer(a1) {
		t.Fatal("the closed connection's client did not see it closed")
	}

	// Another source, at the cap, takes the slot of the oldest connection
	// of the source holding the most: a2's.
	dialFrom(t, "127.0.0.2", addr)
	t1 := next("a connection of another source at the cap")
	if !closedByPeer(a2) {
		t.Fatal("the oldest connection of the source holding both slots was not closed for the new source")
	}
	// One each now: a third source waits, as a busy one would.
	dialFrom(t, "127.0.0.3", addr)
	select {
	case <-accepted:
		t.Fatal("a connection of a third source was accepted with two sources holding one slot each")
	case <-time.After(200 * time.Millisecond):
	}
	t1.Close()
	next("the third source's connection, after a slot came free").Close()

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

// attack keeps n connections from 127.0.0.2 to addr open, each started by
// start (a request it never finishes, say) and dialled again as soon as the
// server closes it, until the test ends. It returns once all n have been
// started once.
func attack(t *testing.T, addr string, n int, start func(net.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	started := make(chan struct{}, n)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				err = start(c)
				if first {
					started <- struct{}{}
					first = false
				}
				if err == nil {
					io.Copy(io.Discard, c) // until the server closes it
				} else {
					time.Sleep(10 * time.Millisecond)
				}
				stop()
				c.Close()
			}
		}()
	}
	for range n {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the attack's connections did not all start")
		}
	}
	time.Sleep(200 * time.Millisecond) // let the server take them in
}

// TestServe_OneSourceCannotTakeEverySlot is the three ways of
// taking every connection slot from one address, slow headers, bodies that
// never end and long polls, each with more connections than --max-conns,
// kept up for the whole test: another client's requests are still answered
// at once, not after a timeout. And one address's watch streams that are
// never read stop at --max-client-watchers.
func TestServe_OneSourceCannotTakeEverySlot(t *testing.T) {
	const maxConns, attackers = 64, 150
	for _, tt := range []struct {
		name  string
		start func(net.Conn) error
	}{
		{"slow headers", func(c net.Conn) error {
			_, err := io.WriteString(c, "POST /v1/locks/x/acquire HTTP/1.1\r\nHost: fence\r\n")
			return err
		}},
		{"endless bodies", func(c net.Conn) error {
			_, err := io.WriteString(c, "PUT /v1/kv/x/k HTTP/1.1\r\nHost: fence\r\nFencing-Token: 1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
			return err
		}},
		{"long polls", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := startServe(t, "--max-conns", strconv.Itoa(maxConns))
			hc := &http.Client{Timeout: 3 * time.Second}
			start := tt.start
			if start == nil {
				// Hold five locks, then wait on them.
				for i := range 5 {
					body := `{"holder":"attacker","ttl_ms":600000}`
					resp, err := hc.Post(fmt.Sprintf("http://%s/v1/locks/r%d/acquire", addr, i), "application/json", strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
				var n atomic.Int64
				start = func(c net.Conn) error {
					body := `{"holder":"waiter","wait_ms":300000}`
					_, err := fmt.Fprintf(c, "POST /v1/locks/r%d/acquire HTTP/1.1\r\nHost: fence\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n.Add(1)%5, len(body), body)
					return err
				}
			}
			attack(t, addr, attackers, start)

			var took []time.Duration
			for i := range 20 {
				begin := time.Now()
				resp, err := hc.Post("http://"+addr+"/v1/locks/mine/acquire", "application/json", strings.NewReader(`{"holder":"me"}`))
				if err != nil {
					t.Fatalf("request %d of another client during the attack: %v", i, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("request %d of another client during the attack: %d", i, resp.StatusCode)
				}
				took = append(took, time.Since(begin))
			}
			slices.Sort(took)
			t.Logf("%d connections from one address against --max-conns %d: another client's 20 requests answered, median %v, max %v",
				attackers, maxConns, took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))
		})
	}

	t.Run("watchers that never read", func(t *testing.T) {
		addr := startServe(t, "--max-conns", "0")
		var refused atomic.Int64
		attack(t, addr, 200, func(c net.Conn) error {
			if _, err := io.WriteString(c, "GET /v1/watch HTTP/1.1\r\nHost: fence\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			if resp.StatusCode == http.StatusTooManyRequests {
				refused.Add(1)
				return errors.New("refused") // and try again
			}
			return nil // open: never read further
		})
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "\nfence_watch_streams 64\n") {
			t.Fatalf("with 200 watchers from one address, want fence_watch_streams 64 (--max-client-watchers); /metrics:\n%s", grepLines(string(b), "fence_watch_streams"))
		}
		if refused.Load() == 0 {
			t.Fatal("no watch stream was refused")
		}
		// Another client still watches.
		resp, err = http.Get("http://" + addr + "/v1/watch")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("another client's watch: %d", resp.StatusCode)
		}
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
