package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

func share(t *testing.T, s *lock.Service, resource, holder string, ttl time.Duration) fence.Lease {
	t.Helper()
	l, err := s.AcquireShared(t.Context(), resource, holder, ttl, 0)
	if err != nil {
		t.Fatalf("AcquireShared(%q, %q): %v", resource, holder, err)
	}
	if !l.Shared || l.Holder != holder {
		t.Fatalf("AcquireShared(%q, %q)=%+v, want a shared hold of %s", resource, holder, l, holder)
	}
	return l
}

// waitFor starts a waiting acquire, shared or not, and returns where its
// lease arrives, once it waits.
func waitFor(t *testing.T, s *lock.Service, resource, holder string, shared bool) <-chan fence.Lease {
	got := make(chan fence.Lease, 1)
	go func() {
		acquire := s.Acquire
		if shared {
			acquire = s.AcquireShared
		}
		l, err := acquire(t.Context(), resource, holder, time.Minute, fence.MaxWait)
		if err != nil {
			t.Errorf("%s: acquire: %v", holder, err)
		}
		got <- l
	}()
	synctest.Wait()
	return got
}

// wantNothingYet fails the test if got has an answer.
func wantNothingYet(t *testing.T, who string, got <-chan fence.Lease) {
	t.Helper()
	select {
	case l := <-got:
		t.Fatalf("%s got %+v, want it still waiting", who, l)
	default:
	}
}

// wantGroup checks that the resource is held shared by holders (in byte
// order) with token.
func wantGroup(t *testing.T, s *lock.Service, resource string, token fence.Token, holders ...string) {
	t.Helper()
	st, err := s.Status(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || !st.Shared || st.Token != token || st.Holder != "" || !slices.Equal(st.Holders, holders) {
		t.Fatalf("Status=%+v, want held shared by %v with token %d", st, holders, token)
	}
}

// writeWith stores a value with token and returns the store's answer.
func writeWith(t *testing.T, db *memory.DB, resource string, token fence.Token) error {
	_, err := db.Put(t.Context(), resource, "k", []byte("v"), token, fence.Cond{})
	return err
}

// TestService_Shared: readers share one token; a waiting writer stops new
// readers; the writer's token is above the group's and fences it, and the
// next group's is above the writer's.
func TestService_Shared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		r1 := share(t, s, "doc", "r1", time.Minute)
		r2 := share(t, s, "doc", "r2", time.Minute)
		if r2.Token != r1.Token {
			t.Fatalf("r2's token %d, want the group's %d", r2.Token, r1.Token)
		}
		wantGroup(t, s, "doc", r1.Token, "r1", "r2")
		if err := writeWith(t, db, "doc", r1.Token); err != nil {
			t.Fatalf("a reader's write: %v", err)
		}
		var held *fence.LockHeldError
		if _, err := s.Acquire(t.Context(), "doc", "w", time.Minute, 0); !errors.As(err, &held) {
			t.Fatalf("exclusive acquire beside readers: %v, want lock_held", err)
		}
		w := waitFor(t, s, "doc", "w", false)
		// A waiting writer stops new readers, however long the group holds.
		if _, err := s.AcquireShared(t.Context(), "doc", "r3", time.Minute, 0); !errors.As(err, &held) {
			t.Fatalf("a new reader while a writer waits: %v, want lock_held", err)
		}
		r3 := waitFor(t, s, "doc", "r3", true)
		// A reader already in the group retries as ever.
		if again := share(t, s, "doc", "r1", time.Minute); again.Token != r1.Token {
			t.Fatalf("r1 again: token %d, want %d", again.Token, r1.Token)
		}
		if err := s.ReleaseShared(t.Context(), "doc", "r1", r1.Token); err != nil {
			t.Fatal(err)
		}
		wantNothingYet(t, "w", w)
		wantGroup(t, s, "doc", r1.Token, "r2")
		if err := s.ReleaseShared(t.Context(), "doc", "r2", r2.Token); err != nil {
			t.Fatal(err)
		}
		wl := <-w
		if wl.Shared || wl.Token <= r1.Token {
			t.Fatalf("the writer got %+v, want an exclusive lease above the group's token %d", wl, r1.Token)
		}
		if err := writeWith(t, db, "doc", r1.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a reader's write after the writer's grant: %v, want fenced", err)
		}
		wantNothingYet(t, "r3", r3)
		if err := s.Release(t.Context(), "doc", wl.Token); err != nil {
			t.Fatal(err)
		}
		l3 := <-r3
		if !l3.Shared || l3.Token <= wl.Token {
			t.Fatalf("r3 got %+v, want a shared hold above the writer's token %d", l3, wl.Token)
		}
		if err := writeWith(t, db, "doc", wl.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("the writer's write after the next group: %v, want fenced", err)
		}
		wantGroup(t, s, "doc", l3.Token, "r3")
	})
}

// TestService_SharedBatch: the readers queued behind a writer are served
// together when it releases, up to the next writer in the queue.
func TestService_SharedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		w := acquire(t, s, "doc", "w", time.Minute)
		a := waitFor(t, s, "doc", "a", true)
		b := waitFor(t, s, "doc", "b", true)
		w2 := waitFor(t, s, "doc", "w2", false)
		c := waitFor(t, s, "doc", "c", true)
		if err := s.Release(t.Context(), "doc", w.Token); err != nil {
			t.Fatal(err)
		}
		la, lb := <-a, <-b
		if la.Token != lb.Token || la.Token <= w.Token {
			t.Fatalf("a and b got tokens %d and %d, want one group token above %d", la.Token, lb.Token, w.Token)
		}
		wantNothingYet(t, "w2", w2)
		wantNothingYet(t, "c", c)
		for _, l := range []fence.Lease{la, lb} {
			if err := s.ReleaseShared(t.Context(), "doc", l.Holder, l.Token); err != nil {
				t.Fatal(err)
			}
		}
		l2 := <-w2
		wantNothingYet(t, "c", c)
		if err := s.Release(t.Context(), "doc", l2.Token); err != nil {
			t.Fatal(err)
		}
		if lc := <-c; lc.Token <= l2.Token {
			t.Fatalf("c got token %d, want above %d", lc.Token, l2.Token)
		}
	})
}

// TestService_SharedWriterGone: readers queued behind a writer that gives
// up join the group that still holds the resource.
func TestService_SharedWriterGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		r1 := share(t, s, "doc", "r1", time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		gone := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, "doc", "w", time.Minute, fence.MaxWait)
			gone <- err
		}()
		synctest.Wait()
		r2 := waitFor(t, s, "doc", "r2", true)
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("the writer: %v, want canceled", err)
		}
		if l := <-r2; l.Token != r1.Token {
			t.Fatalf("r2 got token %d, want the group's %d", l.Token, r1.Token)
		}
		wantGroup(t, s, "doc", r1.Token, "r1", "r2")
	})
}

// TestService_SharedDowngrade: the writer acquiring shared ends its lease
// and holds in a group with a new token, which the readers waiting join;
// a reader acquiring exclusive is refused at once.
func TestService_SharedDowngrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		w := acquire(t, s, "doc", "w", time.Minute)
		r := waitFor(t, s, "doc", "r", true)
		d := share(t, s, "doc", "w", 30*time.Second)
		if d.Token <= w.Token || d.TTL != 30*time.Second {
			t.Fatalf("downgrade=%+v, want a token above %d and the TTL asked for", d, w.Token)
		}
		if l := <-r; l.Token != d.Token {
			t.Fatalf("the waiting reader got token %d, want the group's %d", l.Token, d.Token)
		}
		wantGroup(t, s, "doc", d.Token, "r", "w")
		if err := writeWith(t, db, "doc", w.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a write with the exclusive token after the downgrade: %v, want fenced", err)
		}
		if _, err := s.Acquire(t.Context(), "doc", "w", time.Minute, fence.MaxWait); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("upgrade: %v, want bad_request at once", err)
		}
		wantGroup(t, s, "doc", d.Token, "r", "w")
	})
}

// TestService_SharedExpiry: each reader expires on its own; the group ends
// with the last, and the writer waiting gets the resource then.
func TestService_SharedExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		short := share(t, s, "doc", "short", time.Second)
		share(t, s, "doc", "long", 10*time.Second)
		w := waitFor(t, s, "doc", "w", false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantGroup(t, s, "doc", short.Token, "long")
		if _, err := s.RenewShared(t.Context(), "doc", "short", short.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("renew of the expired reader: %v, want lease_lost", err)
		}
		wantNothingYet(t, "w", w)
		time.Sleep(9 * time.Second)
		if l := <-w; l.Token <= short.Token {
			t.Fatalf("the writer got token %d, want above %d", l.Token, short.Token)
		}
	})
}

// TestService_SharedRefusals: a group's token without a holder, a holder
// not in the group, a transfer and a session are refused.
func TestService_SharedRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		r := share(t, s, "doc", "r", time.Minute)
		if _, err := s.Renew(t.Context(), "doc", r.Token, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Renew without the holder: %v, want bad_request", err)
		}
		if err := s.Release(t.Context(), "doc", r.Token); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Release without the holder: %v, want bad_request", err)
		}
		if _, err := s.Transfer(t.Context(), "doc", r.Token, ""); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Transfer: %v, want bad_request", err)
		}
		var lost *fence.LeaseLostError
		if err := s.ReleaseShared(t.Context(), "doc", "x", r.Token); !errors.As(err, &lost) || lost.Current != r.Token {
			t.Fatalf("ReleaseShared of a holder not in the group: %v, want lease_lost (current %d)", err, r.Token)
		}
		sess, in := openSession(t, s, "s", "r", time.Minute)
		if _, err := s.AcquireShared(in, "other", "r", 0, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("AcquireShared in a session: %v, want bad_request", err)
		}
		if _, err := s.AcquireShared(t.Context(), sess.Resource, "x", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("AcquireShared of a session's resource: %v, want bad_request", err)
		}
		if _, err := s.AcquireShared(t.Context(), fence.SlotResource("jobs", 1, 2), "x", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("AcquireShared of a slot: %v, want bad_request", err)
		}
		alice := fence.WithOwner(t.Context(), "alice")
		a, err := s.AcquireShared(alice, "owned", "a", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseShared(fence.WithOwner(t.Context(), "bob"), "owned", "a", a.Token); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("another principal's release: %v, want forbidden", err)
		}
		// Exclusive leases answer to the holder's name too.
		x := acquire(t, s, "x", "w", time.Minute)
		if _, err := s.RenewShared(t.Context(), "x", "w", x.Token, 0); err != nil {
			t.Fatalf("RenewShared of an exclusive lease: %v", err)
		}
		if err := s.ReleaseShared(t.Context(), "x", "w", x.Token); err != nil {
			t.Fatalf("ReleaseShared of an exclusive lease: %v", err)
		}
	})
}

// TestService_SharedRestored: a restart restores the group, every holder
// with its owner and a full TTL.
func TestService_SharedRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s1 := open(t, db)
		a, err := s1.AcquireShared(fence.WithOwner(t.Context(), "alice"), "doc", "a", 10*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		share(t, s1, "doc", "b", 10*time.Second)
		s1.Close()
		time.Sleep(8 * time.Second)
		s2 := open(t, db)
		wantGroup(t, s2, "doc", a.Token, "a", "b")
		if _, err := s2.RenewShared(t.Context(), "doc", "a", a.Token, 0); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("renew of alice's restored hold without her: %v, want forbidden", err)
		}
		time.Sleep(8 * time.Second) // past the recorded expiry, within the restored TTL
		wantGroup(t, s2, "doc", a.Token, "a", "b")
		if c := share(t, s2, "doc", "c", time.Minute); c.Token != a.Token {
			t.Fatalf("c joined with token %d, want the restored group's %d", c.Token, a.Token)
		}
	})
}

// failingShare is a memory ledger whose first Share fails.
type failingShare struct {
	*memory.DB
	failed bool
}

func (f *failingShare) Share(ctx context.Context, resource, holder string, from fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	if !f.failed {
		f.failed = true
		return 0, errors.New("the engine is down")
	}
	return f.DB.Share(ctx, resource, holder, from, ttl, expires)
}

// TestService_SharedQueueMoves: the queue moves on whatever ends the wait
// of the one ahead: a multi-acquire that gives up lets the shared acquire
// behind it join; a full group that shrinks lets one more in; a shared
// group that cannot start passes the resource to the next waiter.
func TestService_SharedQueueMoves(t *testing.T) {
	t.Run("a multi-acquire gives up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			r1 := share(t, s, "doc", "r1", time.Minute)
			gone := make(chan error, 1)
			go func() {
				_, err := s.AcquireAll(t.Context(), []string{"doc"}, "m", time.Minute, 5*time.Second)
				gone <- err
			}()
			synctest.Wait()
			r2 := waitFor(t, s, "doc", "r2", true)
			if err := <-gone; !errors.Is(err, fence.ErrLockHeld) {
				t.Fatalf("the multi-acquire: %v, want lock_held", err)
			}
			if l := <-r2; l.Token != r1.Token {
				t.Fatalf("r2 got token %d, want the group's %d", l.Token, r1.Token)
			}
		})
	})
	t.Run("a full group shrinks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			var first fence.Lease
			for i := range fence.MaxSharedHolders {
				l := share(t, s, "doc", fmt.Sprint("r", i), time.Minute)
				if i == 0 {
					first = l
				}
			}
			more := waitFor(t, s, "doc", "one-more", true)
			wantNothingYet(t, "one-more", more)
			if err := s.ReleaseShared(t.Context(), "doc", "r0", first.Token); err != nil {
				t.Fatal(err)
			}
			if l := <-more; l.Token != first.Token {
				t.Fatalf("one-more got token %d, want the group's %d", l.Token, first.Token)
			}
		})
	})
	t.Run("a group that cannot start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := openLedger(t, &failingShare{DB: memory.New()})
			w := acquire(t, s, "doc", "w", time.Minute)
			failed := make(chan error, 1)
			go func() {
				_, err := s.AcquireShared(t.Context(), "doc", "r", time.Minute, fence.MaxWait)
				failed <- err
			}()
			synctest.Wait()
			w2 := waitFor(t, s, "doc", "w2", false)
			if err := s.Release(t.Context(), "doc", w.Token); err != nil {
				t.Fatal(err)
			}
			if err := <-failed; err == nil {
				t.Fatal("the shared acquire whose Share failed succeeded")
			}
			if l := <-w2; l.Token <= w.Token {
				t.Fatalf("w2 got token %d, want above %d", l.Token, w.Token)
			}
		})
	})
}

// TestService_SharedRefusesMore: a holder asked to let go cannot downgrade
// instead, and a shared holder's multi-acquire of its resource is an
// upgrade, refused at once.
func TestService_SharedRefusesMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		acquire(t, s, "asked", "w", time.Minute)
		if _, _, err := s.RequestRevoke(t.Context(), "asked", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireShared(t.Context(), "asked", "w", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("a downgrade of a lease asked to let go: %v, want bad_request", err)
		}
		share(t, s, "doc", "r", time.Minute)
		if _, err := s.AcquireAll(t.Context(), []string{"doc", "other"}, "r", time.Minute, fence.MaxWait); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("a shared holder's multi-acquire: %v, want bad_request at once", err)
		}
	})
}
