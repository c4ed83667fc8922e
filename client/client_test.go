package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
)

func newClient(t *testing.T, s *server) *client.Client {
	t.Helper()
	c, err := client.New(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLease_KeepsAlive(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	// A TTL that a loaded machine running -race still renews within: one
	// CI run lost a 600 ms lease to a renewal that took longer.
	l, err := c.Acquire(t.Context(), "orders", fence.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	time.Sleep(6 * time.Second) // three TTLs
	if err := l.Err(); err != nil {
		t.Fatalf("Err=%v after 3 TTLs, want the lease kept alive", err)
	}
	st, err := c.Status(t.Context(), "orders")
	if err != nil || !st.Held || st.Token != l.Token() || st.Holder != l.Holder() {
		t.Fatalf("Status=%+v err=%v, want held by %s with token %d", st, err, l.Holder(), l.Token())
	}
	if _, err := l.Put(l.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put under a kept-alive lease: %v", err)
	}
}

func TestLease_LostWhenServerSays(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	l, err := c.Acquire(t.Context(), "orders", fence.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Someone with the token releases it behind the session's back.
	if err := c.API().Release(t.Context(), "orders", l.Token()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not declared lost after the server answered lease_lost")
	}
	var lost *fence.LeaseLostError
	if !errors.As(l.Err(), &lost) || lost.Presented != l.Token() {
		t.Fatalf("Err=%v, want *fence.LeaseLostError for token %d", l.Err(), l.Token())
	}
	if !errors.Is(context.Cause(l.Context()), fence.ErrLeaseLost) || l.Context().Err() == nil {
		t.Fatalf("Context: err=%v cause=%v, want cancelled with the loss", l.Context().Err(), context.Cause(l.Context()))
	}
	if _, err := l.Put(t.Context(), "k", []byte("v")); !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("Put after loss: err=%v, want the loss, without sending", err)
	}
}

// TestLease_LostLocally checks that the session declares its lease lost by
// its own clock, before the TTL has passed, when the server cannot be reached.
func TestLease_LostLocally(t *testing.T) {
	for name, mode := range map[string]int32{"Blackout": blackout, "Down": -1} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			c := newClient(t, s)
			const ttl = time.Second
			sent := time.Now()
			l, err := c.Acquire(t.Context(), "orders", fence.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			if mode == -1 {
				s.srv.CloseClientConnections()
				s.srv.Listener.Close() // refused from now on
			} else {
				s.mode.Store(mode)
			}
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("lease never declared lost")
			}
			lostAfter := time.Since(sent)
			if lostAfter >= ttl {
				t.Fatalf("declared lost after %v, not before the TTL %v", lostAfter, ttl)
			}
			if lostAfter < ttl-ttl/10-100*time.Millisecond {
				t.Fatalf("declared lost after %v, much earlier than the deadline %v", lostAfter, ttl-ttl/10)
			}
			if !errors.Is(l.Err(), fence.ErrLeaseExpired) {
				t.Fatalf("Err=%v, want ErrLeaseExpired", l.Err())
			}
		})
	}
}

func TestClient_TypedErrors(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	a, err := c.Acquire(t.Context(), "orders", fence.WithTTL(50*time.Millisecond), fence.WithSafetyMargin(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	a.Release(t.Context())
	b, err := c.Acquire(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(t.Context())

	_, err = c.API().Put(t.Context(), "orders", "k", []byte("stale"), a.Token(), fence.Cond{})
	var fenced *fence.FencedError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fenced) || fenced.Presented != a.Token() || fenced.LastFence != b.Token() || fenced.Resource != "orders" {
		t.Fatalf("err=%v, want *fence.FencedError{orders, %d, %d}", err, a.Token(), b.Token())
	}
	_, err = c.API().Put(t.Context(), "orders", "k", nil, b.Token()+5, fence.Cond{})
	var notIssued *fence.TokenNotIssuedError
	if !errors.As(err, &notIssued) || notIssued.LastToken != b.Token() {
		t.Fatalf("err=%v, want *fence.TokenNotIssuedError with LastToken %d", err, b.Token())
	}
	_, err = c.Acquire(t.Context(), "orders")
	var held *fence.LockHeldError
	if !errors.As(err, &held) || held.RetryAfter <= 0 {
		t.Fatalf("err=%v, want *fence.LockHeldError with a RetryAfter", err)
	}
	if _, err := b.CompareAndSwap(t.Context(), "k", []byte("v"), 99); !errors.Is(err, fence.ErrPreconditionFailed) {
		t.Fatalf("err=%v, want ErrPreconditionFailed", err)
	}
	if _, err := c.Get(t.Context(), "orders", "missing"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("err=%v, want ErrNotFound", err)
	}
}

// TestClient_RetriedAcquireGetsSameToken loses the answer to an acquire that
// the server granted; the client's retry gets the same lease, not a second grant.
func TestClient_RetriedAcquireGetsSameToken(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	s.mode.Store(reset)
	l, err := c.Acquire(t.Context(), "orders", fence.WithHolder("w1"))
	if err != nil {
		t.Fatalf("Acquire with a lost answer: %v", err)
	}
	defer l.Release(t.Context())
	st, _ := c.Status(t.Context(), "orders")
	if l.Token() != 1 || st.LastToken != 1 {
		t.Fatalf("Token=%d LastToken=%d, want 1 and 1 (one grant)", l.Token(), st.LastToken)
	}
}

func TestLease_Writes(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	l, err := c.Acquire(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	w, err := l.CompareAndSwap(t.Context(), "o-1", []byte("new"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompareAndSwap(t.Context(), "o-1", []byte("again"), 0); !errors.Is(err, fence.ErrPreconditionFailed) {
		t.Fatalf("create twice: err=%v, want ErrPreconditionFailed", err)
	}
	if _, err := l.CompareAndSwap(t.Context(), "o-1", []byte("paid"), w.Rev); err != nil {
		t.Fatalf("CAS at the right revision: %v", err)
	}
	rev, err := l.Txn(t.Context(), &fence.Txn{Then: []fence.Op{{Kind: fence.OpPut, Resource: "orders", Key: "o-2", Value: []byte("x")}}})
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	item, err := l.Get(t.Context(), "o-2")
	if err != nil || string(item.Value) != "x" || item.Rev != rev || item.Token != l.Token() {
		t.Fatalf("Get=%+v err=%v, want x at rev %d with token %d", item, err, rev, l.Token())
	}
	if _, err := l.Delete(t.Context(), "o-2"); err != nil {
		t.Fatal(err)
	}
	if err := l.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f, _ := c.Fence(t.Context(), "orders"); f != l.Token() {
		t.Fatalf("Fence=%d, want %d", f, l.Token())
	}
}

func TestLease_Transport(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	l, err := c.Acquire(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	other := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.Header.Get("Fencing-Token")
	})
	srv := newHTTPServer(t, other)
	hc := &http.Client{Transport: l.Transport(nil)}
	hc.Get(srv)
	hc.Post(srv, "text/plain", nil)
	if a, b := <-got, <-got; a != "GET " || b != "POST "+l.Token().String() {
		t.Fatalf("requests seen: %q, %q; want the token on POST only", a, b)
	}
	l.Release(t.Context())
	if _, err := hc.Post(srv, "text/plain", nil); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("POST after release: err=%v, want ErrReleased without sending", err)
	}
}

func TestClient_WithLock(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	err := c.WithLock(t.Context(), "orders", func(ctx context.Context, l *client.Lease) error {
		_, err := l.Put(ctx, "k", []byte("v"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status(t.Context(), "orders"); st.Held {
		t.Fatalf("Status=%+v, want released after WithLock", st)
	}

	// The work's ctx is cancelled when the lease is lost, and WithLock says so.
	err = c.WithLock(t.Context(), "orders", func(ctx context.Context, l *client.Lease) error {
		c.API().Release(t.Context(), "orders", l.Token()) // lost behind its back
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("work ctx not cancelled on loss")
		}
	}, fence.WithTTL(300*time.Millisecond))
	if !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("WithLock: err=%v, want the loss", err)
	}
}

func TestLease_Sequencer(t *testing.T) {
	k, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newSignedServer(t, &k)
	c := newClient(t, s)
	keys, err := c.API().Keys(t.Context())
	if err != nil || len(keys) != 1 {
		t.Fatalf("Keys=%v, %v; want the server's key", keys, err)
	}
	ks := fence.KeySet{keys[0].ID: keys[0].Key}
	l, err := c.Acquire(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	seq := l.Sequencer()
	if _, err := ks.Verify(seq, "orders", l.Token()); err != nil {
		t.Fatalf("Sequencer %q: %v", seq, err)
	}
	ctx := l.Context()
	if _, err := l.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompareAndSwap(ctx, "k2", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Txn(ctx, &fence.Txn{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	l.Get(ctx, "k2")
	for req, want := range map[string]string{
		"PUT /v1/kv/orders/k":    seq,
		"PUT /v1/kv/orders/k2":   seq,
		"POST /v1/fences/orders": seq,
		"POST /v1/txn":           seq,
		"DELETE /v1/kv/orders/k": seq,
		"GET /v1/kv/orders/k2":   "",
	} {
		if got, ok := s.seen.Load(req); !ok || got != want {
			t.Errorf("%s: Fence-Sequencer %q (sent: %v), want %q", req, got, ok, want)
		}
	}

	got := make(chan string, 1)
	srv := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Fencing-Token") + " " + r.Header.Get("Fence-Sequencer")
	}))
	hc := &http.Client{Transport: l.Transport(nil)}
	if resp, err := hc.Post(srv, "text/plain", nil); err == nil {
		resp.Body.Close()
	}
	if h := <-got; h != l.Token().String()+" "+seq {
		t.Fatalf("Transport sent %q, want the token and the sequencer", h)
	}
}

func TestLease_NoSequencer(t *testing.T) {
	s := newServer(t)
	c := newClient(t, s)
	l, err := c.Acquire(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	if l.Sequencer() != "" {
		t.Fatalf("Sequencer=%q, want none from a server without a key", l.Sequencer())
	}
	if _, err := l.Put(l.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.seen.Load("PUT /v1/kv/orders/k"); got != "" {
		t.Fatalf("Fence-Sequencer %q, want none", got)
	}
}
