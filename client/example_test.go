package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/bolt"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
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
	api := httpapi.NewServer(locks, db)
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
