package fence_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// Session tests run in synctest bubbles: time is fake, so leases of seconds
// and keepalives of minutes cost no real time.

// flakyLocker fails renewals while down is set, as an unreachable server would.
type flakyLocker struct {
	fence.Locker
	down atomic.Bool
}

var errDown = errors.New("server unreachable")

func (f *flakyLocker) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	if f.down.Load() {
		return fence.Lease{}, errDown
	}
	return f.Locker.Renew(ctx, resource, token, ttl)
}

func newLocker(t *testing.T) *lock.Service {
	t.Helper()
	s := lock.NewService(memory.New())
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSession_KeepsAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := newLocker(t)
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // twenty TTLs
		if err := s.Err(); err != nil {
			t.Fatalf("Err=%v after 20 TTLs, want nil", err)
		}
		st, _ := locker.Status(t.Context(), "r")
		if !st.Held || st.Token != s.Token() || st.LastToken != 1 {
			t.Fatalf("Status=%+v, want held with token %d and no re-grant", st, s.Token())
		}
		if err := s.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(s.Err(), fence.ErrReleased) {
			t.Fatalf("Err=%v after Release, want ErrReleased", s.Err())
		}
		if st, _ := locker.Status(t.Context(), "r"); st.Held {
			t.Fatalf("Status=%+v after Release, want free", st)
		}
		if err := s.Release(t.Context()); err != nil {
			t.Fatalf("second Release: %v", err)
		}
	})
}

// TestSession_ExpiresLocally checks that with the server unreachable the
// session ends at its local deadline, TTL minus the margin after the last
// successful renewal was sent: before the server's lease ends.
func TestSession_ExpiresLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := &flakyLocker{Locker: newLocker(t)}
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(9*time.Second), fence.WithSafetyMargin(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Second + time.Millisecond) // one renewal, sent at 3 s
		locker.down.Store(true)
		lastRenewal := 3 * time.Second
		start := time.Now().Add(-lastRenewal - time.Millisecond)
		<-s.Done()
		if lost := time.Since(start); lost != lastRenewal+8*time.Second {
			t.Fatalf("lost at %v, want %v (last renewal + TTL - margin)", lost, lastRenewal+8*time.Second)
		}
		if !errors.Is(s.Err(), fence.ErrLeaseExpired) || !errors.Is(context.Cause(s.Context()), fence.ErrLeaseExpired) {
			t.Fatalf("Err=%v, want ErrLeaseExpired", s.Err())
		}
		if st, _ := locker.Status(t.Context(), "r"); !st.Held {
			t.Fatal("the server ended the lease first; the session must end before it")
		}
	})
}

// failingRelease fails every release, as a server that cannot be reached.
type failingRelease struct{ fence.Locker }

func (failingRelease) Release(ctx context.Context, resource string, token fence.Token) error {
	return errDown
}

// TestSession_FailedRelease checks that a session whose release failed,
// no longer renewed, still ends at its local deadline: work under its
// Context must not outlive the server's lease.
func TestSession_FailedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := failingRelease{newLocker(t)}
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(10*time.Second), fence.WithSafetyMargin(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := s.Release(t.Context()); !errors.Is(err, errDown) {
			t.Fatalf("Release = %v, want the locker's error", err)
		}
		if s.Err() != nil {
			t.Fatalf("Err = %v right after a failed release, want nil: the lease may still be held", s.Err())
		}
		<-s.Done()
		if ended := time.Since(start); ended != 9*time.Second {
			t.Fatalf("ended %v after the failed release, want 9s (TTL - margin)", ended)
		}
		if !errors.Is(s.Err(), fence.ErrLeaseExpired) {
			t.Fatalf("Err = %v, want ErrLeaseExpired", s.Err())
		}
		if err := s.Release(t.Context()); err != nil {
			t.Fatalf("Release after the end = %v, want nil", err)
		}
	})
}

func TestSession_LeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := newLocker(t)
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		locker.Release(t.Context(), "r", s.Token()) // behind the session's back
		start := time.Now()
		<-s.Done()
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("lost after %v, want at the next renewal (TTL/3)", waited)
		}
		var lost *fence.LeaseLostError
		if !errors.As(s.Err(), &lost) || lost.Presented != s.Token() {
			t.Fatalf("Err=%v, want *LeaseLostError", s.Err())
		}
		// Renewal never re-acquires.
		if st, _ := locker.Status(t.Context(), "r"); st.Held || st.LastToken != 1 {
			t.Fatalf("Status=%+v, want free with no new grant", st)
		}
	})
}

// TestSession_LongWait checks that a lease granted after a long wait counts
// its deadline from a fresh renewal, not from when the wait began.
func TestSession_LongWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := newLocker(t)
		if _, err := locker.Acquire(t.Context(), "r", "other", 20*time.Second, 0); err != nil {
			t.Fatal(err)
		}
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(3*time.Second), fence.WithWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Now().Add(3*time.Second - 300*time.Millisecond); !s.Deadline().Equal(want) {
			t.Fatalf("Deadline=%v, want %v (from the renewal after the wait)", s.Deadline(), want)
		}
		time.Sleep(10 * time.Second)
		if err := s.Err(); err != nil {
			t.Fatalf("Err=%v, want the lease kept alive after the wait", err)
		}
		s.Release(t.Context())
	})
}

func TestSession_Options(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := newLocker(t)
		if _, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(time.Second), fence.WithSafetyMargin(time.Second)); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("margin = TTL: err=%v, want ErrBadRequest", err)
		}
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithHolder("me"))
		if err != nil {
			t.Fatal(err)
		}
		if s.Holder() != "me" || s.Resource() != "r" || s.TTL() != fence.DefaultTTL {
			t.Fatalf("Session %s/%s/%s, want me/r/%s", s.Holder(), s.Resource(), s.TTL(), fence.DefaultTTL)
		}
		if _, err := fence.NewSession(t.Context(), locker, "r"); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("second session: err=%v, want ErrLockHeld", err)
		}
		s.Release(t.Context())
		if a, b := fence.NewHolderID(), fence.NewHolderID(); a == b || len(a) < 16 {
			t.Fatalf("NewHolderID gave %q and %q", a, b)
		}
	})
}

// TestSession_Transfer hands a session's lease to a waiter: the session
// ends as released and the successor holds a greater token. A Locker that
// cannot transfer, and a lease lost behind the session's back, transfer
// nothing.
func TestSession_Transfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := newLocker(t)
		plain, err := fence.NewSession(t.Context(), struct{ fence.Locker }{locker}, "plain")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Transfer(t.Context(), ""); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Transfer over a Locker that cannot: %v, want ErrBadRequest", err)
		}
		if err := plain.Release(t.Context()); err != nil {
			t.Fatalf("Release after the refused transfer: %v", err)
		}

		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// A bad name, then nobody waiting: refused, and the session goes on,
		// renewed past its TTL.
		if _, err := s.Transfer(t.Context(), "bad\x01name"); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Transfer to a bad name: %v, want ErrBadRequest", err)
		}
		if _, err := s.Transfer(t.Context(), "nobody"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Transfer with nobody waiting: %v, want ErrNotFound", err)
		}
		time.Sleep(25 * time.Second)
		if err := s.Err(); err != nil {
			t.Fatalf("the session ended after the refused transfer: %v", err)
		}
		if st, _ := locker.Status(t.Context(), "r"); !st.Held || st.Token != s.Token() {
			t.Fatalf("Status after 25 s = %+v, want the session's lease still held", st)
		}
		nextC := make(chan fence.Lease, 1)
		go func() {
			l, err := locker.Acquire(t.Context(), "r", "next", 10*time.Second, fence.MaxWait)
			if err != nil {
				t.Error(err)
			}
			nextC <- l
		}()
		synctest.Wait()
		l, err := s.Transfer(t.Context(), "next")
		if err != nil {
			t.Fatalf("Transfer: %v", err)
		}
		next := <-nextC
		if l.Token != next.Token || next.Token <= s.Token() {
			t.Fatalf("Transfer returned %+v, the successor got %+v; want one lease above %d", l, next, s.Token())
		}
		<-s.Done()
		if !errors.Is(s.Err(), fence.ErrReleased) {
			t.Fatalf("Err after the transfer = %v, want ErrReleased", s.Err())
		}
		if _, err := s.Transfer(t.Context(), "next"); err == nil {
			t.Fatal("a second Transfer of an ended session succeeded")
		}

		lost, err := fence.NewSession(t.Context(), locker, "lost", fence.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		locker.Release(t.Context(), "lost", lost.Token()) // behind the session's back
		if _, err := lost.Transfer(t.Context(), ""); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Transfer of a lost lease: %v, want ErrLeaseLost", err)
		}
		if !errors.Is(lost.Err(), fence.ErrLeaseLost) {
			t.Fatalf("Err after transferring a lost lease = %v, want ErrLeaseLost", lost.Err())
		}
	})
}

// flakyTransfer fails its first transfer as an unreachable server would.
type flakyTransfer struct {
	*lock.Service
	failed atomic.Bool
}

func (f *flakyTransfer) Transfer(ctx context.Context, resource string, token fence.Token, to string) (fence.Lease, error) {
	if f.failed.CompareAndSwap(false, true) {
		return fence.Lease{}, errDown
	}
	return f.Service.Transfer(ctx, resource, token, to)
}

// TestSession_TransferRetriedAfterUnknownOutcome checks that a transfer of
// unknown outcome stops the renewals and arms the local deadline, and that
// a retry the server refuses as changing nothing (nobody waits) renews
// again and disarms that deadline.
func TestSession_TransferRetriedAfterUnknownOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := &flakyTransfer{Service: newLocker(t)}
		s, err := fence.NewSession(t.Context(), locker, "r", fence.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transfer(t.Context(), "next"); !errors.Is(err, errDown) {
			t.Fatalf("first Transfer: %v, want the locker's error", err)
		}
		if _, err := s.Transfer(t.Context(), "next"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("retried Transfer: %v, want ErrNotFound", err)
		}
		time.Sleep(30 * time.Second) // past the deadline the first failure armed
		if err := s.Err(); err != nil {
			t.Fatalf("the session ended although it renews again: %v", err)
		}
		if err := s.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// countingLocker counts the renewals sent through it.
type countingLocker struct {
	*lock.Service
	renewals atomic.Int64
}

func (c *countingLocker) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	c.renewals.Add(1)
	return c.Service.Renew(ctx, resource, token, ttl)
}

// TestSession_InSession: leases in a session send no renewal of their own,
// live as long as the session, end with its error when it is revoked, and
// release alone; a lease that asks for another TTL, or a shared one, keeps
// itself alive.
func TestSession_InSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := &countingLocker{Service: newLocker(t)}
		keep, err := fence.NewSession(t.Context(), locker, fence.SessionResource("k"), fence.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var in []*fence.Session
		for _, r := range []string{"a", "b", "c"} {
			s, err := fence.NewSession(t.Context(), locker, r, fence.InSession(keep))
			if err != nil {
				t.Fatal(err)
			}
			if s.Lease().Session != keep.SessionRef() || s.TTL() != 3*time.Second {
				t.Fatalf("%s: in session %+v with TTL %s, want %+v and 3s", r, s.Lease().Session, s.TTL(), keep.SessionRef())
			}
			in = append(in, s)
		}
		own, err := fence.NewSession(t.Context(), locker, "own", fence.InSession(keep), fence.WithTTL(5*time.Second))
		if err != nil || !own.Lease().Session.IsZero() {
			t.Fatalf("another TTL: %+v, %v; want a lease of its own", own.Lease(), err)
		}
		shared, err := fence.NewSession(t.Context(), locker, "doc", fence.InSession(keep), fence.WithShared())
		if err != nil || !shared.Lease().Session.IsZero() || !shared.Lease().Shared {
			t.Fatalf("shared: %+v, %v; want a shared hold of its own", shared.Lease(), err)
		}
		locker.renewals.Store(0)
		time.Sleep(30 * time.Second) // ten session TTLs
		// About 30 renewals each of the session (3s TTL), "own" (5s: 18)
		// and "doc"; none of the three leases in the session.
		if n := locker.renewals.Load(); n > 30+18+18+3 {
			t.Fatalf("%d renewals in 30s, want only the session's, own's and doc's", n)
		}
		for _, s := range in {
			if err := s.Err(); err != nil {
				t.Fatalf("%s ended: %v", s.Resource(), err)
			}
		}
		if err := in[0].Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st, _ := locker.Status(t.Context(), "a"); st.Held {
			t.Fatalf("a after its release: %+v", st)
		}
		if keep.Err() != nil || in[1].Err() != nil {
			t.Fatal("a's release ended the session or b")
		}
		if _, err := locker.Revoke(t.Context(), keep.Resource()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the session's next renewal is lease_lost
		for _, s := range in[1:] {
			if !errors.Is(s.Err(), fence.ErrLeaseLost) {
				t.Fatalf("%s after its session's revoke: %v, want lease_lost", s.Resource(), s.Err())
			}
			if st, _ := locker.Status(t.Context(), s.Resource()); st.Held {
				t.Fatalf("%s after its session's revoke: %+v, want free", s.Resource(), st)
			}
		}
		if own.Err() != nil || shared.Err() != nil {
			t.Fatal("the leases of their own ended with the session")
		}
		if err := errors.Join(own.Release(t.Context()), shared.Release(t.Context())); err != nil {
			t.Fatal(err)
		}
	})
}

// failingOnceRelease fails the first release sent through it, as a server
// that went away before it answered.
type failingOnceRelease struct {
	*lock.Service
	failed atomic.Bool
}

func (f *failingOnceRelease) Release(ctx context.Context, resource string, token fence.Token) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("connection reset")
	}
	return f.Service.Release(ctx, resource, token)
}

// TestSession_InSessionFailedRelease: a lease in a session whose release
// failed stays held, kept by its session, and a second Release releases
// it; it does not end locally at once while the server keeps it.
func TestSession_InSessionFailedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := &failingOnceRelease{Service: newLocker(t)}
		keep, err := fence.NewSession(t.Context(), locker.Service, fence.SessionResource("k"), fence.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s, err := fence.NewSession(t.Context(), locker, "a", fence.InSession(keep))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(t.Context()); err == nil {
			t.Fatal("the first release succeeded")
		}
		time.Sleep(10 * time.Second) // past the session's TTL: it is renewed
		if err := s.Err(); err != nil {
			t.Fatalf("the lease ended after a failed release: %v", err)
		}
		if err := s.Release(t.Context()); err != nil {
			t.Fatalf("the second release: %v", err)
		}
		if st, _ := locker.Status(t.Context(), "a"); st.Held {
			t.Fatalf("a after the second release: %+v", st)
		}
		if err := keep.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
