package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestClient_AcquireAll takes two locks at once through a real server: each
// lease renews itself; a multi-acquire that overlaps them is refused and
// holds nothing; after the release it gets them all, with greater tokens.
func TestClient_AcquireAll(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.AcquireAll(t.Context(), []string{"orders", "stock"}, fence.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	if ls[0].Resource() != "orders" || ls[1].Resource() != "stock" || ls[0].Holder() != ls[1].Holder() {
		t.Fatalf("leases on %s and %s", ls[0].Resource(), ls[1].Resource())
	}
	time.Sleep(2500 * time.Millisecond) // past the TTL: the leases renew themselves
	var held *fence.LockHeldError
	if _, err := c.AcquireAll(t.Context(), []string{"audit", "stock"}, fence.WithHolder("other")); !errors.As(err, &held) || held.Resource != "stock" {
		t.Fatalf("an overlapping multi-acquire: %v, want *LockHeldError on stock", err)
	}
	if st, err := c.API().Status(t.Context(), "audit"); err != nil || st.Held {
		t.Fatalf("audit after the refused multi-acquire: %+v, %v", st, err)
	}
	for _, l := range ls {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost: %v", l.Resource(), err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	again, err := c.AcquireAll(t.Context(), []string{"stock", "audit"}, fence.WithHolder("other"))
	if err != nil || again[0].Resource() != "stock" || again[0].Token() <= ls[1].Token() {
		t.Fatalf("after the release: %v, %v", again, err)
	}
}

// TestClient_Shared holds a resource shared twice through a real server:
// both leases renew themselves (their renewals name their holders) with
// one token; the status names both; a writer waits until both release
// and gets a greater token, which fences the readers' writes.
func TestClient_Shared(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Acquire(t.Context(), "doc", fence.WithShared(), fence.WithHolder("a"), fence.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("Acquire shared: %v", err)
	}
	b, err := c.Acquire(t.Context(), "doc", fence.WithShared(), fence.WithHolder("b"), fence.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("Acquire shared: %v", err)
	}
	if a.Token() != b.Token() {
		t.Fatalf("tokens %d and %d, want the group's one", a.Token(), b.Token())
	}
	time.Sleep(1500 * time.Millisecond) // past the TTL: the holds renew themselves
	st, err := c.Status(t.Context(), "doc")
	if err != nil || !st.Shared || len(st.Holders) != 2 || st.Holders[0] != "a" || st.Holders[1] != "b" || st.Token != a.Token() {
		t.Fatalf("Status=%+v, %v; want shared by a and b", st, err)
	}
	if _, err := a.Put(t.Context(), "k", []byte("a")); err != nil {
		t.Fatalf("a reader's write: %v", err)
	}
	w := make(chan *client.Lease, 1)
	go func() {
		l, err := c.Acquire(t.Context(), "doc", fence.WithHolder("w"), fence.WithWait(time.Minute))
		if err != nil {
			t.Errorf("the writer: %v", err)
		}
		w <- l
	}()
	for _, l := range []*client.Lease{a, b} {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost: %v", l.Holder(), err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("%s: Release: %v", l.Holder(), err)
		}
	}
	wl := <-w
	if wl == nil {
		t.FailNow()
	}
	if wl.Token() <= a.Token() {
		t.Fatalf("the writer's token %d, want above %d", wl.Token(), a.Token())
	}
	if _, err := c.API().Put(t.Context(), "doc", "k", []byte("stale"), a.Token(), fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a reader's write after the writer's grant: %v, want fenced", err)
	}
}

// TestClient_RevokeRequested asks a lease's holder to let go: the lease's
// RevokeRequested closes on its next renewal, with RevokeAt the deadline;
// released before it, the resource is free and nothing is revoked.
func TestClient_RevokeRequested(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(t.Context(), "job", fence.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	asked, _, err := c.API().RequestRevoke(t.Context(), "job", time.Minute)
	if err != nil || asked.Token != l.Token() {
		t.Fatalf("RequestRevoke=%+v, %v", asked, err)
	}
	select {
	case <-l.RevokeRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease never learned of the request")
	}
	if !l.RevokeAt().Equal(asked.RevokeAt) {
		t.Fatalf("RevokeAt=%s, want %s", l.RevokeAt(), asked.RevokeAt)
	}
	if st, err := c.Status(t.Context(), "job"); err != nil || !st.RevokeAt.Equal(asked.RevokeAt) {
		t.Fatalf("Status=%+v, %v; want RevokeAt %s", st, err, asked.RevokeAt)
	}
	if ls, _, err := c.API().List(t.Context(), "job", "", 0); err != nil || len(ls) != 1 || !ls[0].RevokeAt.Equal(asked.RevokeAt) {
		t.Fatalf("List=%+v, %v; want job with RevokeAt %s", ls, err, asked.RevokeAt)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(t.Context(), "job"); err != nil || st.Held || st.LastToken != l.Token() {
		t.Fatalf("after the release: %+v, %v; want free, nothing revoked", st, err)
	}
}

// TestClient_RevokeRequestedInSession asks the holder of a lease in the
// client's session, which sends no renewal of its own, to let go: the
// session's renewals tell it (RevokeRequested, RevokeAt), and, not
// released, the lease learns that it was revoked at the deadline, with
// *LeaseLostError. Another lease in the session goes on.
func TestClient_RevokeRequestedInSession(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil), client.WithSessionTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Acquire(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if l.Lease().Session.IsZero() {
		t.Fatal("the lease is in no session")
	}
	asked, _, err := c.API().RequestRevoke(t.Context(), "job", time.Second)
	if err != nil || asked.Token != l.Token() {
		t.Fatalf("RequestRevoke=%+v, %v", asked, err)
	}
	select {
	case <-l.RevokeRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease in a session never learned of the request")
	}
	if !l.RevokeAt().Equal(asked.RevokeAt) {
		t.Fatalf("RevokeAt=%s, want %s", l.RevokeAt(), asked.RevokeAt)
	}
	select {
	case <-other.RevokeRequested():
		t.Fatal("the other lease was told to let go too")
	default:
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease in a session never learned that it was revoked at the deadline")
	}
	var lost *fence.LeaseLostError
	if err := l.Err(); !errors.As(err, &lost) || lost.Resource != "job" || lost.Presented != l.Token() {
		t.Fatalf("Err=%v, want *LeaseLostError for job token %d", err, l.Token())
	}
	if err := other.Err(); err != nil {
		t.Fatalf("the other lease ended: %v", err)
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestClient_OneSession: a client's leases are in its one session by
// default. They outlive their TTL with only the session renewed, end with
// it when the client closes it, and a lease that asks for its own TTL, or
// a client without sessions, keeps itself alive.
func TestClient_OneSession(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.New(url, client.WithSessionTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.AcquireAll(t.Context(), []string{"b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.Acquire(t.Context(), "own", fence.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	keep := c.Session()
	if keep == nil {
		t.Fatal("no session open after the acquires")
	}
	for _, l := range append([]*client.Lease{a}, ls...) {
		if got := l.Lease().Session; got != keep.SessionRef() || l.TTL() != 600*time.Millisecond {
			t.Fatalf("%s: session %+v, TTL %s; want the client's %+v and its TTL", l.Resource(), got, l.TTL(), keep.SessionRef())
		}
	}
	if got := own.Lease().Session; !got.IsZero() {
		t.Fatalf("a lease with its own TTL is in session %+v, want none", got)
	}
	time.Sleep(1500 * time.Millisecond) // past the TTL: only the session is renewed
	for _, name := range []string{"a", "b", "c", "own"} {
		if st, err := c.Status(t.Context(), name); err != nil || !st.Held {
			t.Fatalf("%s after 2.5 TTLs: %+v, %v; want held", name, st, err)
		}
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, l := range append([]*client.Lease{a}, ls...) {
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not end with its session", l.Resource())
		}
		if !errors.Is(l.Err(), fence.ErrReleased) {
			t.Fatalf("%s ended with %v, want its session's release", l.Resource(), l.Err())
		}
		if st, err := c.Status(t.Context(), l.Resource()); err != nil || st.Held {
			t.Fatalf("%s after the session's release: %+v, %v; want free", l.Resource(), st, err)
		}
	}
	if own.Err() != nil {
		t.Fatalf("the lease of its own ended with the session: %v", own.Err())
	}
	// The next acquire opens another session.
	again, err := c.Acquire(t.Context(), "a")
	if err != nil || c.Session() == nil || again.Lease().Session != c.Session().SessionRef() || again.Lease().Session == keep.SessionRef() {
		t.Fatalf("after Close: %v, %v; want a lease in a new session", again, err)
	}
	// A session revoked on the server before its keeper noticed: the next
	// acquire opens another.
	if _, err := c.API().Revoke(t.Context(), c.Session().Resource()); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Acquire(t.Context(), "after-revoke"); err != nil || l.Lease().Session.IsZero() {
		t.Fatalf("an acquire after the session's revoke: %v, %v; want a lease in a new session", l, err)
	}
	// A client whose leases all have TTLs of their own opens no session.
	lone, err := client.New(url, client.WithSessionTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := lone.Acquire(t.Context(), "lone", fence.WithTTL(time.Second)); err != nil || !l.Lease().Session.IsZero() || lone.Session() != nil {
		t.Fatalf("a lease of its own: %v, %v, session %v; want no session opened", l, err, lone.Session())
	}
	// Without sessions, every lease keeps itself alive.
	solo, err := client.New(url, client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	l, err := solo.Acquire(t.Context(), "solo")
	if err != nil || !l.Lease().Session.IsZero() || solo.Session() != nil {
		t.Fatalf("WithoutSession: %+v, %v; want a lease of its own", l, err)
	}
}
