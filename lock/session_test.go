package lock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// openSession opens the session called name for holder, with ttl, and
// returns it and a context whose acquires join it.
func openSession(t *testing.T, s *lock.Service, name, holder string, ttl time.Duration) (fence.Lease, context.Context) {
	t.Helper()
	l := acquire(t, s, fence.SessionResource(name), holder, ttl)
	return l, fence.WithSession(t.Context(), fence.SessionRef{Resource: l.Resource, Token: l.Token})
}

func acquireIn(t *testing.T, s *lock.Service, in context.Context, resource, holder string) fence.Lease {
	t.Helper()
	l, err := s.Acquire(in, resource, holder, 0, 0)
	if err != nil {
		t.Fatalf("Acquire(%q, %q) in a session: %v", resource, holder, err)
	}
	return l
}

func wantHeldBy(t *testing.T, s *lock.Service, resource string, token fence.Token) {
	t.Helper()
	st, err := s.Status(t.Context(), resource)
	if err != nil || !st.Held || st.Token != token {
		t.Fatalf("Status(%q)=%+v, %v; want held with token %d", resource, st, err, token)
	}
}

func wantFree(t *testing.T, s *lock.Service, resource string) {
	t.Helper()
	if st, err := s.Status(t.Context(), resource); err != nil || st.Held {
		t.Fatalf("Status(%q)=%+v, %v; want free", resource, st, err)
	}
}

// TestService_Session: leases in a session have its TTL, live while it is
// renewed however long that is, refuse a renew of their own, and expire
// with it, all at once; each is fenced on its own resource afterwards.
func TestService_Session(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		sess, in := openSession(t, s, "w", "w", 10*time.Second)
		a := acquireIn(t, s, in, "a", "w")
		b := acquireIn(t, s, in, "b", "w")
		ref := fence.SessionRef{Resource: sess.Resource, Token: sess.Token}
		if a.Session != ref || a.TTL != 10*time.Second || !a.Expires.Equal(sess.Expires) {
			t.Fatalf("a=%+v, want in %+v with the session's TTL and expiry %v", a, ref, sess.Expires)
		}
		if _, err := s.Renew(t.Context(), "a", a.Token, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("a renew of a lease in a session: %v, want ErrBadRequest", err)
		}
		// Renewed three times, the session outlives its TTL, and so do a
		// and b, whose expiry follows the session's.
		for range 3 {
			time.Sleep(8 * time.Second)
			r, err := s.Renew(t.Context(), sess.Resource, sess.Token, 0)
			if err != nil {
				t.Fatalf("renew of the session: %v", err)
			}
			for _, l := range []fence.Lease{a, b} {
				st, _ := s.Status(t.Context(), l.Resource)
				if !st.Held || st.Token != l.Token || !st.Expires.Equal(r.Expires) {
					t.Fatalf("%s after the session's renewal: %+v, want held with token %d until %v", l.Resource, st, l.Token, r.Expires)
				}
			}
		}
		// Renewed by its holder's retried acquire, which moves no lease's
		// expiry, the session still keeps them: at their expiry they take
		// the session's.
		time.Sleep(8 * time.Second)
		if _, err := s.Acquire(t.Context(), sess.Resource, "w", 10*time.Second, 0); err != nil {
			t.Fatalf("a retried acquire of the session: %v", err)
		}
		time.Sleep(8 * time.Second)
		wantHeldBy(t, s, "a", a.Token)
		wantHeldBy(t, s, "b", b.Token)
		// Not renewed, it expires, and both leases with it.
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		for _, r := range []string{sess.Resource, "a", "b"} {
			wantFree(t, s, r)
		}
		if _, err := s.Acquire(in, "c", "w", 0, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("a join of the expired session: %v, want ErrLeaseLost", err)
		}
		if next := acquire(t, s, "a", "x", time.Minute); next.Token <= a.Token {
			t.Fatalf("the next grant of a: token %d, want above %d", next.Token, a.Token)
		}
		if f, _ := db.Fence(t.Context(), "b"); f != b.Token {
			t.Fatalf("b's fence %d, want %d", f, b.Token)
		}
	})
}

// TestService_SessionRelease: closing a session releases every lease in
// it before the close returns, serving their waiters.
func TestService_SessionRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		sess, in := openSession(t, s, "w", "w", time.Minute)
		a := acquireIn(t, s, in, "a", "w")
		b := acquireIn(t, s, in, "b", "w")
		got := make(chan fence.Lease, 1)
		go func() {
			l, err := s.Acquire(t.Context(), "a", "x", time.Minute, fence.MaxWait)
			if err != nil {
				t.Errorf("x: %v", err)
			}
			got <- l
		}()
		synctest.Wait()
		if err := s.Release(t.Context(), sess.Resource, sess.Token); err != nil {
			t.Fatal(err)
		}
		wantFree(t, s, "b")
		wantFree(t, s, sess.Resource)
		synctest.Wait()
		select {
		case l := <-got:
			if l.Token != a.Token+1 || !l.Session.IsZero() {
				t.Fatalf("x got %+v, want token %d of its own", l, a.Token+1)
			}
		default:
			t.Fatal("a's waiter was not served when the session closed")
		}
		if err := s.Release(t.Context(), "b", b.Token); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("a release of b after the session's: %v, want ErrLeaseLost", err)
		}
	})
}

// TestService_SessionPermits: permits join a session as locks do, even
// one served from the queue, and end with it.
func TestService_SessionPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		sess, in := openSession(t, s, "w", "w", 10*time.Second)
		p1, err := s.AcquirePermit(in, "jobs", "w", 2, 0, 0)
		if err != nil || p1.Session.Token != sess.Token || p1.TTL != 10*time.Second {
			t.Fatalf("a permit in the session: %+v, %v", p1, err)
		}
		other := permit(t, s, "jobs", "x", 2, time.Minute)
		got := make(chan fence.Lease, 1)
		go func() {
			l, err := s.AcquirePermit(in, "jobs", "w2", 2, 0, fence.MaxWait)
			if err != nil {
				t.Errorf("a waiting permit in the session: %v", err)
			}
			got <- l
		}()
		synctest.Wait()
		if err := s.Release(t.Context(), other.Resource, other.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		p2 := <-got
		if p2.Session.Token != sess.Token || p2.Resource != other.Resource {
			t.Fatalf("the waiter's permit: %+v, want %s in the session", p2, other.Resource)
		}
		for range 3 { // renewed by nobody but the session
			time.Sleep(8 * time.Second)
			if _, err := s.Renew(t.Context(), sess.Resource, sess.Token, 0); err != nil {
				t.Fatal(err)
			}
		}
		wantHeldBy(t, s, p1.Resource, p1.Token)
		wantHeldBy(t, s, p2.Resource, p2.Token)
		if err := s.Release(t.Context(), sess.Resource, sess.Token); err != nil {
			t.Fatal(err)
		}
		wantFree(t, s, p1.Resource)
		wantFree(t, s, p2.Resource)
		// Each permit's end fenced its slot with the next token: the grant
		// is the one after.
		if l := permit(t, s, "jobs", "y", 2, time.Minute); l.Token != p1.Token+2 && l.Token != p2.Token+2 {
			t.Fatalf("a permit after the session: %+v, want a slot's next token after its fence", l)
		}
	})
}

// TestService_SessionMultiAcquire: a multi-acquire in a session grants
// every resource in it, a retry in the session gets the same leases, and
// they end with the session.
func TestService_SessionMultiAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		sess, in := openSession(t, s, "w", "w", 10*time.Second)
		a := acquireIn(t, s, in, "a", "w")
		ls, err := s.AcquireAll(in, []string{"b", "a", "c"}, "w", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Session.Token != sess.Token || l.TTL != 10*time.Second {
				t.Fatalf("%+v: want in the session, with its TTL", l)
			}
		}
		if ls[1].Token != a.Token {
			t.Fatalf("a in the multi-acquire: token %d, want its own %d", ls[1].Token, a.Token)
		}
		if _, err := s.AcquireAll(t.Context(), []string{"a", "d"}, "w", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("the holder's multi-acquire outside the session: %v, want ErrBadRequest", err)
		}
		wantFree(t, s, "d")
		for range 3 {
			time.Sleep(8 * time.Second)
			if _, err := s.Renew(t.Context(), sess.Resource, sess.Token, 0); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range ls {
			wantHeldBy(t, s, l.Resource, l.Token)
		}
		if err := s.Release(t.Context(), sess.Resource, sess.Token); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"a", "b", "c"} {
			wantFree(t, s, r)
		}
	})
}

// TestService_SessionRevoke: a revoke of a session revokes every lease in
// it: each resource's fence rises past its lease's token.
func TestService_SessionRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		sess, in := openSession(t, s, "w", "w", time.Minute)
		a := acquireIn(t, s, in, "a", "w")
		if _, err := s.Revoke(t.Context(), sess.Resource); err != nil {
			t.Fatal(err)
		}
		wantFree(t, s, "a")
		if f, _ := db.Fence(t.Context(), "a"); f <= a.Token {
			t.Fatalf("a's fence %d after the session's revoke, want above %d", f, a.Token)
		}
	})
}

// TestService_SessionRefusals: a lease joins only an open session of its
// own principal, with the session's TTL; a session is in no session, is not
// handed over.
func TestService_SessionRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		alice := fence.WithOwner(t.Context(), "alice")
		sess, err := s.Acquire(alice, fence.SessionResource("w"), "w", 10*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		ref := fence.SessionRef{Resource: sess.Resource, Token: sess.Token}
		in := fence.WithSession(alice, ref)
		for _, c := range []struct {
			name string
			ctx  context.Context
			res  string
			ttl  time.Duration
			want error
		}{
			{"AnotherPrincipal", fence.WithSession(fence.WithOwner(t.Context(), "bob"), ref), "a", 0, fence.ErrForbidden},
			{"OldToken", fence.WithSession(alice, fence.SessionRef{Resource: ref.Resource, Token: ref.Token + 1}), "a", 0, fence.ErrLeaseLost},
			{"NoSuchSession", fence.WithSession(alice, fence.SessionRef{Resource: fence.SessionResource("none"), Token: 1}), "a", 0, fence.ErrLeaseLost},
			{"NotASessionResource", fence.WithSession(alice, fence.SessionRef{Resource: "w", Token: 1}), "a", 0, fence.ErrBadRequest},
			{"OtherTTL", in, "a", 5 * time.Second, fence.ErrBadRequest},
			{"SessionInSession", in, fence.SessionResource("x"), 0, fence.ErrBadRequest},
		} {
			if _, err := s.Acquire(c.ctx, c.res, "w", c.ttl, 0); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		wantFree(t, s, "a")
		if l, err := s.Acquire(in, "a", "w", 10*time.Second, 0); err != nil || l.Session != ref {
			t.Fatalf("the session's own TTL: %+v, %v", l, err)
		}
		if _, err := s.AcquirePermit(in, "jobs", "w", 2, 5*time.Second, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("a permit in a session with another TTL: %v, want ErrBadRequest", err)
		}
		if _, err := s.AcquirePermit(alice, fence.SessionResource("w"), "w", 2, 10*time.Second, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("a session's resource as a semaphore: %v, want ErrBadRequest", err)
		}
		if _, err := s.AcquireAll(in, []string{"m", fence.SessionResource("x")}, "w", 0, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("a multi-acquire of a session in a session: %v, want ErrBadRequest", err)
		}
		if _, err := s.Transfer(alice, sess.Resource, sess.Token, ""); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("a transfer of a session: %v, want ErrBadRequest", err)
		}
		// The holder's retry in the session is the same lease; outside it,
		// or in another session, it is refused.
		if l, err := s.Acquire(in, "a", "w", 0, 0); err != nil || l.Session != ref {
			t.Errorf("a retry in the session: %+v, %v", l, err)
		}
		if _, err := s.Acquire(alice, "a", "w", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("a retry outside the session: %v, want ErrBadRequest", err)
		}
	})
}

// TestService_SessionRestored: after a restart the leases in a session are
// its own again (renewing it keeps them past their TTL), and a lease whose
// session did not survive runs out its TTL.
func TestService_SessionRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s1 := open(t, db)
		sess, in := openSession(t, s1, "w", "w", 10*time.Second)
		a := acquireIn(t, s1, in, "a", "w")
		other, otherIn := openSession(t, s1, "v", "v", 10*time.Second)
		orphan := acquireIn(t, s1, otherIn, "o", "v")
		s1.Close()
		// The other session ended, but its lease's end was never recorded.
		if _, err := db.End(t.Context(), other.Resource, other.Token); err != nil {
			t.Fatal(err)
		}

		s2 := open(t, db)
		wantHeldBy(t, s2, "a", a.Token)
		wantHeldBy(t, s2, "o", orphan.Token)
		for range 3 {
			time.Sleep(8 * time.Second)
			if _, err := s2.Renew(t.Context(), sess.Resource, sess.Token, 0); err != nil {
				t.Fatalf("renew of the restored session: %v", err)
			}
		}
		wantHeldBy(t, s2, "a", a.Token)
		wantFree(t, s2, "o")
	})
}

// TestService_SessionReopened: a session resource acquired again is a new
// session; the leases of the old one, which expired, stay ended.
func TestService_SessionReopened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		old, in := openSession(t, s, "w", "w", 10*time.Second)
		a := acquireIn(t, s, in, "a", "w")
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		again, _ := openSession(t, s, "w", "w", 10*time.Second)
		if again.Token <= old.Token {
			t.Fatalf("the session again: token %d, want above %d", again.Token, old.Token)
		}
		wantFree(t, s, "a")
		if _, err := s.Acquire(in, "a", "w", 0, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("a join of the old session: %v, want ErrLeaseLost", err)
		}
		if l := acquire(t, s, "a", "x", time.Minute); l.Token != a.Token+1 {
			t.Fatalf("a: %+v, want token %d", l, a.Token+1)
		}
	})
}

// TestService_SessionKeptAlive: a fence.Session on a session resource keeps
// the server session, and so every lease in it, alive by its renewals
// alone; releasing it releases them.
func TestService_SessionKeptAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		keep, err := fence.NewSession(t.Context(), s, fence.SessionResource("w"), fence.WithTTL(3*time.Second), fence.WithHolder("w"))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := fence.NewSession(t.Context(), s, "plain")
		if err != nil || !plain.SessionRef().IsZero() {
			t.Fatalf("a session on a plain resource: %v; want no SessionRef", err)
		}
		plain.Release(t.Context())
		in := fence.WithSession(t.Context(), keep.SessionRef())
		var held []fence.Lease
		for _, r := range []string{"a", "b", "c"} {
			held = append(held, acquireIn(t, s, in, r, "w"))
		}
		time.Sleep(10 * time.Second)
		for _, l := range held {
			wantHeldBy(t, s, l.Resource, l.Token)
		}
		if err := keep.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, l := range held {
			wantFree(t, s, l.Resource)
		}
	})
}

// TestService_SessionShorterTTL: a session renewed with a shorter TTL
// takes its leases with it: none outlives it.
func TestService_SessionShorterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		sess, in := openSession(t, s, "w", "w", time.Minute)
		a := acquireIn(t, s, in, "a", "w")
		r, err := s.Renew(t.Context(), sess.Resource, sess.Token, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Status(t.Context(), "a"); !st.Expires.Equal(r.Expires) {
			t.Fatalf("a expires at %v, its session at %v", st.Expires, r.Expires)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		wantFree(t, s, sess.Resource)
		wantFree(t, s, "a")
		if l := acquire(t, s, "a", "x", time.Minute); l.Token != a.Token+1 {
			t.Fatalf("a after its session: %+v", l)
		}
	})
}

// TestService_SessionTransferSkipsEnded: a transfer passes over a waiter
// whose session is over; with nobody else waiting it changes nothing, and
// the holder keeps its lease.
func TestService_SessionTransferSkipsEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		h := acquire(t, s, "r", "h", time.Minute)
		sess, in := openSession(t, s, "w", "w", time.Minute)
		errC := make(chan error, 1)
		go func() {
			_, err := s.Acquire(in, "r", "w", 0, time.Minute)
			errC <- err
		}()
		synctest.Wait()
		if err := s.Release(t.Context(), sess.Resource, sess.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transfer(t.Context(), "r", h.Token, ""); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("a transfer to the waiter of an ended session: %v, want ErrNotFound", err)
		}
		wantHeldBy(t, s, "r", h.Token)
		if err := s.Release(t.Context(), "r", h.Token); err != nil {
			t.Fatal(err)
		}
		if err := <-errC; !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("the waiter of the ended session: %v, want ErrLeaseLost", err)
		}
		wantFree(t, s, "r")
	})
}

// TestService_SessionFailedHandoffKeepsLease: a hand-off within a session
// that fails leaves the old lease in the session, so the session's revoke
// still revokes it.
func TestService_SessionFailedHandoffKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recordingLedger{DB: memory.New()}
		s := openLedger(t, r)
		sess, in := openSession(t, s, "w", "w", time.Minute)
		a := acquireIn(t, s, in, "a", "w")
		go s.Acquire(in, "a", "w2", 0, time.Minute)
		synctest.Wait()
		r.failHandoff(errors.New("injected"))
		if err := s.Release(t.Context(), "a", a.Token); err == nil {
			t.Fatal("the release succeeded through a failing hand-off")
		}
		r.failHandoff(nil)
		if _, err := s.Revoke(t.Context(), sess.Resource); err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Status(t.Context(), "a"); st.Held && st.Token == a.Token {
			t.Fatalf("a still held with token %d after its session's revoke", a.Token)
		}
	})
}

// TestService_SessionRetryInEnded: an acquire in a session that has ended
// is refused, and a kept-alive lease (fence.Session) in a session is
// refused at once: the session keeps it alive, its own renewals would not.
func TestService_SessionRetryInEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		_, in := openSession(t, s, "w", "w", 10*time.Second)
		acquireIn(t, s, in, "a", "w")
		time.Sleep(10*time.Second + time.Millisecond) // the session expires; a with it
		synctest.Wait()
		if _, err := s.AcquireAll(in, []string{"a"}, "w", 0, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("a multi-acquire in the ended session: %v, want ErrLeaseLost", err)
		}
		if _, err := fence.NewSession(in, s, "x"); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("a kept-alive lease in a session: %v, want ErrBadRequest", err)
		}
	})
}

// TestService_SessionAsked: a session's renewals list the leases in it
// that a caller asked to let go (they renew nothing of their own), with
// the deadline, also after a restart, until they end: released, or revoked
// at the deadline.
func TestService_SessionAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s1 := open(t, db)
		sess, in := openSession(t, s1, "w", "w", 10*time.Second)
		a := acquireIn(t, s1, in, "a", "w")
		b := acquireIn(t, s1, in, "b", "w")
		c := acquireIn(t, s1, in, "c", "w")
		renew := func(s *lock.Service) []fence.AskedLease {
			t.Helper()
			_, asked, err := s.RenewSession(t.Context(), fence.SessionRef{Resource: sess.Resource, Token: sess.Token}, 0)
			if err != nil {
				t.Fatalf("renew of the session: %v", err)
			}
			return asked
		}
		if got := renew(s1); got != nil {
			t.Fatalf("Asked=%+v before any request, want none", got)
		}
		askedB, _, err := s1.RequestRevoke(t.Context(), "b", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		askedA, _, err := s1.RequestRevoke(t.Context(), "a", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := []fence.AskedLease{{Resource: "a", Token: a.Token, RevokeAt: askedA.RevokeAt}, {Resource: "b", Token: b.Token, RevokeAt: askedB.RevokeAt}}
		if got := renew(s1); !slices.Equal(got, want) {
			t.Fatalf("Asked=%+v, want %+v", got, want)
		}
		if err := s1.Release(t.Context(), "b", b.Token); err != nil {
			t.Fatal(err)
		}
		if got := renew(s1); len(got) != 1 || got[0].Resource != "a" {
			t.Fatalf("Asked=%+v after b's release, want a only", got)
		}
		s1.Close()

		s2 := open(t, db) // the request is restored, with its full grace from now
		got := renew(s2)
		if len(got) != 1 || got[0].Resource != "a" || got[0].Token != a.Token || !got[0].RevokeAt.Equal(time.Now().Add(30*time.Second)) {
			t.Fatalf("Asked=%+v after a restart, want a, revoked 30s from now", got)
		}
		for range 4 {
			time.Sleep(8 * time.Second)
			got = renew(s2)
		}
		wantFree(t, s2, "a") // revoked at the deadline
		if got != nil {
			t.Fatalf("Asked=%+v after a was revoked, want none", got)
		}
		wantHeldBy(t, s2, "c", c.Token) // the session's other lease goes on
	})
}
