package main

import (
	"io"
	"net"
	"testing"
	"time"

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
