package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
)

// TestService_AcquireAll grants free resources at once, each with its own
// token that fences its storage; a busy one with wait 0 refuses them all, and
// none is held afterwards.
func TestService_AcquireAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		old := acquire(t, s, "b", "old", time.Minute)
		if err := s.Release(t.Context(), "b", old.Token); err != nil {
			t.Fatal(err)
		}
		ls, err := s.AcquireAll(t.Context(), []string{"b", "a"}, "h", time.Minute, 0)
		if err != nil {
			t.Fatalf("AcquireAll: %v", err)
		}
		if len(ls) != 2 || ls[0].Resource != "b" || ls[1].Resource != "a" || ls[0].Token != old.Token+1 || ls[1].Token != 1 || ls[0].Holder != "h" {
			t.Fatalf("AcquireAll = %+v, want b (token %d) then a (token 1), in the request's order", ls, old.Token+1)
		}
		if _, err := db.Claim(t.Context(), "b", old.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("the old holder of b after the multi-acquire: %v, want fenced", err)
		}
		again, err := s.AcquireAll(t.Context(), []string{"a", "b"}, "h", time.Minute, 0)
		if err != nil || again[0].Token != ls[1].Token || again[1].Token != ls[0].Token {
			t.Fatalf("the holder again: %+v, %v; want its own tokens", again, err)
		}

		var held *fence.LockHeldError
		if _, err := s.AcquireAll(t.Context(), []string{"c", "a", "d"}, "other", time.Minute, 0); !errors.As(err, &held) || held.Resource != "a" {
			t.Fatalf("a multi-acquire with a held: %v, want *LockHeldError on a", err)
		}
		for _, r := range []string{"c", "d"} {
			if st, _ := s.Status(t.Context(), r); st.Held {
				t.Fatalf("%s is held after a refused multi-acquire: %+v", r, st)
			}
			acquire(t, s, r, "free", time.Minute) // and free to take
		}
	})
}

// TestService_AcquireAllBadNames refuses what a single acquire refuses, a
// name given twice, and no names, changing nothing.
func TestService_AcquireAllBadNames(t *testing.T) {
	s := open(t, memory.New())
	for _, names := range [][]string{nil, {"a", "a"}, {"a", ""}, {"a", "x/permit-1-of-2"}, make([]string, fence.MaxMultiAcquire+1)} {
		if _, err := s.AcquireAll(t.Context(), names, "h", time.Minute, 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("AcquireAll(%.40q): %v, want ErrBadRequest", names, err)
		}
	}
	if st, _ := s.Status(t.Context(), "a"); st.Held {
		t.Fatalf("a is held after refused multi-acquires")
	}
}

// TestService_AcquireAllWaits queues a multi-acquire behind a held resource:
// the free one it reserved is granted to nobody else meanwhile (a single
// acquire of it waits), both are granted at once when the held one is
// released, and the single acquire gets its resource after them.
func TestService_AcquireAllWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		x := acquire(t, s, "b", "x", time.Minute)
		multi := make(chan []fence.Lease, 1)
		go func() {
			ls, err := s.AcquireAll(t.Context(), []string{"a", "b"}, "m", time.Minute, fence.MaxWait)
			if err != nil {
				t.Errorf("AcquireAll: %v", err)
			}
			multi <- ls
		}()
		synctest.Wait()
		if _, err := s.Acquire(t.Context(), "a", "y", time.Minute, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("a, reserved by the waiting multi-acquire: %v, want ErrLockHeld", err)
		}
		if st, _ := s.Status(t.Context(), "a"); st.Held {
			t.Fatalf("a is held before the multi-acquire has both: %+v", st)
		}
		y := make(chan fence.Lease, 1)
		go func() {
			l, err := s.Acquire(t.Context(), "a", "y", time.Minute, fence.MaxWait)
			if err != nil {
				t.Errorf("y: %v", err)
			}
			y <- l
		}()
		synctest.Wait()
		if err := s.Release(t.Context(), "b", x.Token); err != nil {
			t.Fatal(err)
		}
		ls := <-multi
		if len(ls) != 2 || ls[0].Resource != "a" || ls[1].Resource != "b" || ls[1].Token <= x.Token {
			t.Fatalf("AcquireAll = %+v", ls)
		}
		select {
		case l := <-y:
			t.Fatalf("y got %+v while the multi-acquire holds a", l)
		default:
		}
		if err := s.Release(t.Context(), "a", ls[0].Token); err != nil {
			t.Fatal(err)
		}
		if l := <-y; l.Holder != "y" || l.Token <= ls[0].Token {
			t.Fatalf("y got %+v", l)
		}
	})
}

// TestService_AcquireAllGivesUp lets a waiting multi-acquire time out, and
// another's caller go: each gives back what it reserved, which the waiters
// behind get.
func TestService_AcquireAllGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		acquire(t, s, "c", "x", time.Hour)
		timedOut := make(chan error, 1)
		go func() {
			_, err := s.AcquireAll(t.Context(), []string{"a", "c"}, "m", time.Minute, time.Second)
			timedOut <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		gone := make(chan error, 1)
		go func() {
			_, err := s.AcquireAll(ctx, []string{"b", "c"}, "n", time.Minute, fence.MaxWait)
			gone <- err
		}()
		synctest.Wait()
		ya, yb := make(chan fence.Lease, 1), make(chan fence.Lease, 1)
		for r, got := range map[string]chan fence.Lease{"a": ya, "b": yb} {
			go func() {
				l, err := s.Acquire(t.Context(), r, "y", time.Minute, fence.MaxWait)
				if err != nil {
					t.Errorf("y on %s: %v", r, err)
				}
				got <- l
			}()
		}
		synctest.Wait()
		time.Sleep(time.Second)
		var held *fence.LockHeldError
		if err := <-timedOut; !errors.As(err, &held) || held.Resource != "c" {
			t.Fatalf("the multi-acquire that timed out: %v, want *LockHeldError on c", err)
		}
		if l := <-ya; l.Resource != "a" {
			t.Fatalf("y on a got %+v", l)
		}
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("the multi-acquire whose caller went: %v, want context.Canceled", err)
		}
		if l := <-yb; l.Resource != "b" {
			t.Fatalf("y on b got %+v", l)
		}
	})
}

// failingGrantAll is a ledger whose GrantAll fails, having written nothing.
type failingGrantAll struct{ *memory.DB }

func (failingGrantAll) GrantAll(context.Context, []string, string, time.Duration, time.Time) ([]fence.Token, error) {
	return nil, errors.New("disk on fire")
}

// TestService_AcquireAllLedgerFails gives back every reservation when the
// one commit fails: nothing is held, and every resource is free.
func TestService_AcquireAllLedgerFails(t *testing.T) {
	s := openLedger(t, failingGrantAll{memory.New()})
	if _, err := s.AcquireAll(t.Context(), []string{"a", "b"}, "m", time.Minute, 0); err == nil {
		t.Fatal("AcquireAll with a failing ledger succeeded")
	}
	for _, r := range []string{"a", "b"} {
		acquire(t, s, r, "y", time.Minute)
	}
}

// TestService_AcquireAllNoDeadlock runs multi-acquires of overlapping sets
// named in random orders, with real time: every one is granted, and no
// resource ever has two holders.
func TestService_AcquireAllNoDeadlock(t *testing.T) {
	s := open(t, memory.New())
	resources := []string{"r0", "r1", "r2", "r3"}
	var inside [4]atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for round := range 25 {
				pick := rng.Perm(len(resources))[:2+rng.IntN(2)]
				names := make([]string, len(pick))
				for i, p := range pick {
					names[i] = resources[p]
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				ls, err := s.AcquireAll(ctx, names, fmt.Sprintf("g%d-%d", g, round), time.Minute, fence.MaxWait)
				cancel()
				if err != nil {
					t.Errorf("g%d: AcquireAll(%v): %v (a deadlock?)", g, names, err)
					return
				}
				for _, p := range pick {
					if n := inside[p].Add(1); n != 1 {
						t.Errorf("%s has %d holders", resources[p], n)
					}
				}
				time.Sleep(50 * time.Microsecond)
				for i, p := range pick {
					inside[p].Add(-1)
					if err := s.Release(t.Context(), ls[i].Resource, ls[i].Token); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestService_AcquireAllOwnLeaseEnds lets the holder's own lease, which a
// waiting multi-acquire counted as its own, end and pass to another while
// it waits: the multi-acquire is refused, takes nothing, and touches
// neither the other's lease nor the service.
func TestService_AcquireAllOwnLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		own := acquire(t, s, "a", "h", time.Minute)
		x := acquire(t, s, "b", "x", time.Minute)
		multi := make(chan error, 1)
		go func() {
			_, err := s.AcquireAll(t.Context(), []string{"a", "b"}, "h", time.Minute, fence.MaxWait)
			multi <- err
		}()
		synctest.Wait()
		if err := s.Release(t.Context(), "a", own.Token); err != nil {
			t.Fatal(err)
		}
		y := acquire(t, s, "a", "y", time.Minute)
		if err := s.Release(t.Context(), "b", x.Token); err != nil {
			t.Fatal(err)
		}
		var held *fence.LockHeldError
		if err := <-multi; !errors.As(err, &held) || held.Resource != "a" {
			t.Fatalf("the multi-acquire whose own lease passed on: %v, want *LockHeldError on a", err)
		}
		if st, _ := s.Status(t.Context(), "a"); st.Holder != "y" || st.Token != y.Token || !st.Expires.Equal(y.Expires) {
			t.Fatalf("a is %+v, want y's lease untouched", st)
		}
		acquire(t, s, "b", "z", time.Minute) // b was given back
	})
}
