package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

func permit(t *testing.T, s *lock.Service, resource, holder string, limit int, ttl time.Duration) fence.Lease {
	t.Helper()
	l, err := s.AcquirePermit(t.Context(), resource, holder, limit, ttl, 0)
	if err != nil {
		t.Fatalf("AcquirePermit(%q, %q, %d): %v", resource, holder, limit, err)
	}
	return l
}

// waitPermit starts a waiting AcquirePermit and returns where its answer
// arrives, once it waits.
func waitPermit(t *testing.T, s *lock.Service, resource, holder string, limit int) <-chan fence.Lease {
	got := make(chan fence.Lease, 1)
	go func() {
		l, err := s.AcquirePermit(t.Context(), resource, holder, limit, time.Minute, fence.MaxWait)
		if err != nil {
			t.Errorf("%s: AcquirePermit: %v", holder, err)
		}
		got <- l
	}()
	synctest.Wait()
	return got
}

// TestService_Permits takes the two permits of a semaphore: each is a lease
// on its own slot, a third holder is refused at once or waits, first come
// first served, for the one released or expired; the token of a permit that
// ended is fenced on its slot while the other permit's writes go on.
func TestService_Permits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		a := permit(t, s, "jobs", "a", 2, time.Minute)
		b := permit(t, s, "jobs", "b", 2, 10*time.Second)
		if a.Resource != fence.SlotResource("jobs", 1, 2) || b.Resource != fence.SlotResource("jobs", 2, 2) {
			t.Fatalf("permits on %q and %q, want jobs/permit-1-of-2 and jobs/permit-2-of-2", a.Resource, b.Resource)
		}
		var held *fence.LockHeldError
		if _, err := s.AcquirePermit(t.Context(), "jobs", "c", 2, time.Minute, 0); !errors.As(err, &held) || held.Resource != "jobs" || held.RetryAfter != 10*time.Second {
			t.Fatalf("a third permit with wait 0: %v, want *LockHeldError on jobs retrying after 10s", err)
		}
		if again := permit(t, s, "jobs", "a", 2, time.Minute); again.Resource != a.Resource || again.Token != a.Token {
			t.Fatalf("a again got %+v, want its own permit %+v", again, a)
		}

		c := waitPermit(t, s, "jobs", "c", 2)
		d := waitPermit(t, s, "jobs", "d", 2)
		if err := s.Release(t.Context(), a.Resource, a.Token); err != nil {
			t.Fatalf("release a: %v", err)
		}
		lc := <-c
		if lc.Resource != a.Resource || lc.Token <= a.Token {
			t.Fatalf("c got %+v, want a's slot %q with a token above %d", lc, a.Resource, a.Token)
		}
		if _, err := db.Claim(t.Context(), a.Resource, a.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a's write after its permit passed to c: %v, want fenced", err)
		}
		if _, err := db.Claim(t.Context(), b.Resource, b.Token); err != nil {
			t.Fatalf("b's write beside c's permit: %v", err)
		}
		select {
		case l := <-d:
			t.Fatalf("d got %+v while both permits are held", l)
		default:
		}
		time.Sleep(10 * time.Second) // b pauses past its TTL
		ld := <-d
		if ld.Resource != b.Resource || ld.Token <= b.Token {
			t.Fatalf("d got %+v, want b's expired slot %q", ld, b.Resource)
		}
		if _, err := db.Claim(t.Context(), b.Resource, b.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("b's write after it expired and d got its permit: %v, want fenced", err)
		}
		if _, err := db.Claim(t.Context(), lc.Resource, lc.Token); err != nil {
			t.Fatalf("c's write beside it: %v", err)
		}
	})
}

// TestService_PermitLimit refuses a limit other than the held permits', the
// name of a slot as a plain lock, and bad limits; once every permit ends,
// another limit is accepted.
func TestService_PermitLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		a := permit(t, s, "jobs", "a", 2, time.Minute)
		if _, err := s.AcquirePermit(t.Context(), "jobs", "b", 3, time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("limit 3 beside a permit of 2: %v, want ErrBadRequest", err)
		}
		if _, err := s.Acquire(t.Context(), a.Resource, "b", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Acquire of a slot's name: %v, want ErrBadRequest", err)
		}
		for _, limit := range []int{0, -1, fence.MaxPermits + 1} {
			if _, err := s.AcquirePermit(t.Context(), "other", "b", limit, time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
				t.Fatalf("limit %d: %v, want ErrBadRequest", limit, err)
			}
		}
		if _, err := s.AcquirePermit(t.Context(), a.Resource, "b", 2, time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("a semaphore named as a slot: %v, want ErrBadRequest", err)
		}
		if err := s.Release(t.Context(), a.Resource, a.Token); err != nil {
			t.Fatal(err)
		}
		if l := permit(t, s, "jobs", "b", 3, time.Minute); l.Resource != fence.SlotResource("jobs", 1, 3) {
			t.Fatalf("limit 3 once idle: %+v", l)
		}
	})
}

// TestService_PermitEndFences fences a permit's token when the permit
// ends, not only when its slot is granted again: a holder paused past its
// TTL is fenced though its semaphore is then taken with another limit,
// whose slots are others, and a released permit's token is fenced at once.
func TestService_PermitEndFences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		a := permit(t, s, "jobs", "a", 2, 10*time.Second)
		time.Sleep(10 * time.Second) // a pauses past its TTL
		synctest.Wait()
		for i, holder := range []string{"b", "c", "d"} {
			if l := permit(t, s, "jobs", holder, 3, time.Minute); l.Resource != fence.SlotResource("jobs", i+1, 3) {
				t.Fatalf("%s got %q", holder, l.Resource)
			}
		}
		if _, err := db.Claim(t.Context(), a.Resource, a.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a's write after its permit expired and the limit became 3: %v, want fenced (4 writers on a limit of 3)", err)
		}
		e := permit(t, s, "pool", "e", 2, time.Minute)
		if err := s.Release(t.Context(), e.Resource, e.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Claim(t.Context(), e.Resource, e.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("e's write after its release: %v, want fenced", err)
		}
	})
}

// TestService_PermitWaiterLeaves takes a waiter whose wait ran out, or whose
// caller went, out of the queue: the next permit goes to the one behind.
func TestService_PermitWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		a := permit(t, s, "jobs", "a", 1, time.Minute)
		timedOut := make(chan error, 1)
		go func() {
			_, err := s.AcquirePermit(t.Context(), "jobs", "short", 1, time.Minute, time.Second)
			timedOut <- err
		}()
		ctx, cancel := context.WithCancel(t.Context())
		gone := make(chan error, 1)
		go func() {
			_, err := s.AcquirePermit(ctx, "jobs", "gone", 1, time.Minute, fence.MaxWait)
			gone <- err
		}()
		synctest.Wait()
		last := waitPermit(t, s, "jobs", "last", 1)
		time.Sleep(time.Second)
		var held *fence.LockHeldError
		if err := <-timedOut; !errors.As(err, &held) || held.RetryAfter != time.Minute-time.Second {
			t.Fatalf("a wait of 1s: %v, want *LockHeldError retrying when a's permit expires, in 59s", err)
		}
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller that went: %v, want context.Canceled", err)
		}
		if err := s.Release(t.Context(), a.Resource, a.Token); err != nil {
			t.Fatal(err)
		}
		if l := <-last; l.Holder != "last" || l.Resource != a.Resource {
			t.Fatalf("last got %+v", l)
		}
	})
}

// TestService_PermitsRestored restores the permits held before a restart:
// the limit still holds, a waiter is served when a restored permit expires,
// and the slots' tokens go on rising.
func TestService_PermitsRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s1 := open(t, db)
		a := permit(t, s1, "jobs", "a", 1, 5*time.Second)
		s1.Close()

		s2 := open(t, db)
		if _, err := s2.AcquirePermit(t.Context(), "jobs", "b", 1, time.Minute, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("b after restart: %v, want ErrLockHeld", err)
		}
		if _, err := s2.AcquirePermit(t.Context(), "jobs", "b", 2, time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("limit 2 beside a restored permit of 1: %v, want ErrBadRequest", err)
		}
		b := waitPermit(t, s2, "jobs", "b", 1)
		time.Sleep(5 * time.Second) // a's restored lease expires
		// a's expiry fenced a.Token+1 into the slot: b's grant is the next.
		if l := <-b; l.Resource != a.Resource || l.Token != a.Token+2 {
			t.Fatalf("b got %+v, want %q with token %d", l, a.Resource, a.Token+2)
		}
	})
}

// TestService_PermitsNeverExceedLimit runs holders that take and give back
// permits at once, with real time: never more than the limit hold one.
func TestService_PermitsNeverExceedLimit(t *testing.T) {
	s := open(t, memory.New())
	const limit, holders, cycles = 3, 12, 30
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for h := range holders {
		wg.Go(func() {
			for range cycles {
				l, err := s.AcquirePermit(t.Context(), "jobs", "h"+string(rune('a'+h)), limit, time.Minute, fence.MaxWait)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := s.Release(t.Context(), l.Resource, l.Token); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit || m < 2 {
		t.Fatalf("at most %d held a permit at once, want 2..%d", m, limit)
	}
}

// TestService_PermitDelayRestored restarts a service while the only busy
// slot of a semaphore is in its lock-delay: the semaphore comes back with
// its limit, so that another limit, whose slots the paused holder's fence
// would not cover, is still refused.
func TestService_PermitDelayRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		openDelayed := func() *lock.Service {
			return openLedger(t, db, func(s *lock.Service) { s.LockDelay = 10 * time.Second })
		}
		s1 := openDelayed()
		permit(t, s1, "jobs", "a", 2, time.Second)
		time.Sleep(2 * time.Second) // a expires: its slot's lock-delay starts
		s1.Close()
		s2 := openDelayed()
		if _, err := s2.AcquirePermit(t.Context(), "jobs", "b", 3, time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("limit 3 while a slot of limit 2 is in its lock-delay: %v, want ErrBadRequest", err)
		}
	})
}
