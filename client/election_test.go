package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// nextLeader returns the next leader that obs sends, failing t after 10 s.
func nextLeader(t *testing.T, obs <-chan client.Leader) client.Leader {
	t.Helper()
	select {
	case l, ok := <-obs:
		if !ok {
			t.Fatal("Observe closed its channel")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no leader change within 10s")
	}
	return client.Leader{}
}

// TestElection runs two candidates and an observer: one leads, the other
// takes over when it resigns and again when its lease is revoked, each
// leadership with a greater token, and the deposed leader's writes are
// fenced.
func TestElection(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := c.Election("leader/scheduler")
	if _, err := e.Leader(ctx); !errors.Is(err, client.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	obs := e.Observe(ctx)
	if l := nextLeader(t, obs); l != (client.Leader{}) {
		t.Fatalf("first observation %+v, want nobody", l)
	}

	a, err := e.Campaign(ctx, "node-a", fence.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Holder != "node-a" || l.Token != a.Token() {
		t.Fatalf("observed %+v, want node-a with token %d", l, a.Token())
	}
	if l, err := e.Leader(ctx); err != nil || l.Holder != "node-a" {
		t.Fatalf("Leader = %+v, %v", l, err)
	}

	bC := make(chan *client.Lease, 1)
	go func() {
		b, err := e.Campaign(ctx, "node-b", fence.WithTTL(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		bC <- b
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-bC:
		t.Fatal("node-b leads while node-a does")
	default:
	}
	if err := e.Resign(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := <-bC
	if b == nil {
		t.FailNow()
	}
	if b.Token() <= a.Token() {
		t.Fatalf("node-b's token %d is not greater than node-a's %d", b.Token(), a.Token())
	}
	// The observer may see the release before the grant, or only the grant.
	l := nextLeader(t, obs)
	if l == (client.Leader{}) {
		l = nextLeader(t, obs)
	}
	if l.Holder != "node-b" || l.Token != b.Token() {
		t.Fatalf("observed %+v, want node-b", l)
	}
	if _, err := c.API().Put(ctx, "leader/scheduler", "k", []byte("late"), a.Token(), fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("deposed leader's write: %v, want fenced", err)
	}

	// A revoke deposes node-b: its lease ends, and nobody leads.
	if _, err := c.API().Revoke(ctx, "leader/scheduler"); err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l != (client.Leader{}) {
		t.Fatalf("observed %+v after a revoke, want nobody", l)
	}
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("node-b's leadership did not end after the revoke")
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	holder, err := c.Acquire(ctx, "leader/scheduler", fence.WithHolder("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	if _, err := e.Campaign(cctx, "node-c"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign past its context: %v, want DeadlineExceeded", err)
	}
}

// TestElection_Transfer hands the leadership to a candidate that waits
// behind another: it leads at once with a greater token, the candidate
// before it keeps waiting, the old leader's lease ends and its writes are
// fenced; a transfer to a candidate that does not campaign changes nothing.
func TestElection_Transfer(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := c.Election("leader/transfer")
	a, err := e.Campaign(ctx, "node-a", fence.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	campaign := func(name string) chan *client.Lease {
		ch := make(chan *client.Lease, 1)
		go func() {
			l, err := e.Campaign(ctx, name, fence.WithTTL(5*time.Second))
			if err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
			ch <- l
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			locks, _, err := c.API().List(ctx, "leader/transfer", "", 10)
			if err == nil && len(locks) == 1 && locks[0].Waiters > 0 && (name == "node-b" || locks[0].Waiters == 2) {
				return ch
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never waited", name)
			}
		}
	}
	bC := campaign("node-b")
	cC := campaign("node-c")

	// A leader cannot transfer to somebody who does not campaign...
	if err := e.Transfer(ctx, a, "node-x"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Transfer to node-x: %v, want ErrNotFound", err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Holder != "node-a" || l.Token != a.Token() {
		t.Fatalf("leader after the refused transfer: %+v, %v; want node-a", l, err)
	}
	// ... and still leads, renewed, until it releases.
	if err := a.Err(); err != nil {
		t.Fatalf("node-a's leadership ended with the refused transfer: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bC // node-b was first
	if err := e.Transfer(ctx, b, "node-c"); err != nil {
		t.Fatalf("Transfer to node-c: %v", err)
	}
	cl := <-cC
	if cl.Token() <= b.Token() || cl.Holder() != "node-c" {
		t.Fatalf("node-c leads with %d, want a token above node-b's %d", cl.Token(), b.Token())
	}
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("node-b's leadership did not end with the transfer")
	}
	if !errors.Is(b.Err(), fence.ErrReleased) {
		t.Fatalf("node-b's lease ended with %v, want ErrReleased", b.Err())
	}
	if _, err := c.API().Put(ctx, "leader/transfer", "k", []byte("stale"), b.Token(), fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("node-b's write after the transfer: %v, want ErrFenced", err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Holder != "node-c" {
		t.Fatalf("Leader = %+v, %v; want node-c", l, err)
	}
	cl.Release(ctx)
}
