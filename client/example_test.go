package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/wire"
)

// exampleServer runs a fence server on a loopback port for the examples, as
// `fence serve` would, and returns its address and how to stop it.
func exampleServer() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "fence-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := bolt.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	locks := lock.NewService(db)
	locks.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := locks.Open(context.Background()); err != nil {
		log.Fatal(err)
	}
	api := httpapi.NewHandler(locks, db)
	api.Logger = locks.Logger
	srv := httptest.NewServer(api)
	return srv.URL, func() { srv.Close(); locks.Close(); db.Close(); os.RemoveAll(dir) }
}

// Acquire a lease and write under it: the write carries the lease's token.
func ExampleClient_Acquire() {
	addr, stop := exampleServer() // e.g. "http://127.0.0.1:7700"
	defer stop()
	ctx := context.Background()

	c, err := client.New(addr)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := c.Acquire(ctx, "orders", fence.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	res, err := lease.Put(lease.Context(), "total", []byte("42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token", lease.Token(), "wrote revision", res.Rev)
	// Output: token 1 wrote revision 1
}

// Run work under a lock: the work's context is cancelled if the lease is lost.
func ExampleClient_WithLock() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(addr)

	err := c.WithLock(ctx, "reports", func(ctx context.Context, l *client.Lease) error {
		_, err := l.Put(ctx, "daily", []byte("done"))
		return err
	})
	item, _ := c.Get(ctx, "reports", "daily")
	fmt.Println(string(item.Value), err)
	// Output: done <nil>
}

// A holder that paused past its TTL is fenced off by the storage, with both
// tokens in the error.
func Example_staleHolder() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(addr)

	// A takes a raw lease (no keepalive), as a process would just before a
	// long GC pause freezes it and its renewals.
	a, _ := c.API().Acquire(ctx, "orders", "A", 100*time.Millisecond, 0)
	time.Sleep(200 * time.Millisecond) // A pauses; its lease expires
	b, _ := c.Acquire(ctx, "orders")
	defer b.Release(ctx)
	b.Put(ctx, "total", []byte("B"))

	// A wakes and writes with its old token.
	_, err := c.API().Put(ctx, "orders", "total", []byte("A"), a.Token, fence.Cond{})
	var fenced *fence.FencedError
	if errors.As(err, &fenced) {
		fmt.Printf("rejected: presented %d, last fence %d\n", fenced.Presented, fenced.LastFence)
	}
	item, _ := c.Get(ctx, "orders", "total")
	fmt.Println("value:", string(item.Value))
	// Output:
	// rejected: presented 1, last fence 2
	// value: B
}

// Write to another service through the lease: every mutating request
// carries the lease's token, so a service that checks fencing tokens can
// turn away this holder once a newer one exists.
func ExampleLease_Transport() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(addr)

	// A service that keeps the highest token it has seen, as a guard does.
	var highest atomic.Uint64
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strconv.ParseUint(r.Header.Get(wire.TokenHeader), 10, 64)
		if tok < highest.Load() {
			http.Error(w, "fenced", http.StatusConflict)
			return
		}
		highest.Store(tok)
	}))
	defer service.Close()

	lease, _ := c.Acquire(ctx, "billing")
	defer lease.Release(ctx)
	hc := &http.Client{Transport: lease.Transport(nil)}
	resp, err := hc.Post(service.URL+"/invoices", "text/plain", strings.NewReader("42"))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "with token", highest.Load())
	// Output: 200 OK with token 1
}

// Elect a leader on a lock: Campaign waits to lead; the leadership is a
// lease, with its own fencing token.
func ExampleElection() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(addr)
	e := c.Election("leader/scheduler")

	leadership, err := e.Campaign(ctx, "node-a")
	if err != nil {
		log.Fatal(err)
	}
	l, _ := e.Leader(ctx)
	fmt.Println("leader", l.Holder, "token", l.Token)
	e.Resign(ctx, leadership)
	if _, err := e.Leader(ctx); errors.Is(err, client.ErrNoLeader) {
		fmt.Println("nobody leads")
	}
	// Output:
	// leader node-a token 1
	// nobody leads
}
