package lock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
)

// TestService_Transfer hands a lease to a waiter behind another: the named
// successor gets the next token in the same change that ends the old lease
// (the store fences the old token at once), the waiter before it keeps its
// place, and a transfer to nobody waiting changes nothing.
func TestService_Transfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		old := acquire(t, s, "r", "old", time.Minute)

		// Nobody waits yet: refused, the lease still held and renewable.
		if _, err := s.Transfer(t.Context(), "r", old.Token, "b"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Transfer with nobody waiting: %v, want ErrNotFound", err)
		}
		if _, err := s.Transfer(t.Context(), "r", old.Token, ""); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Transfer to the next waiter with nobody waiting: %v, want ErrNotFound", err)
		}
		if _, err := s.Renew(t.Context(), "r", old.Token, 0); err != nil {
			t.Fatalf("Renew after the refused transfers: %v", err)
		}

		got := map[string]chan fence.Lease{"a": make(chan fence.Lease, 1), "b": make(chan fence.Lease, 1)}
		for _, h := range []string{"a", "b"} { // a waits first, b behind it
			go func() {
				l, err := s.Acquire(t.Context(), "r", h, time.Minute, fence.MaxWait)
				if err != nil {
					t.Errorf("%s: %v", h, err)
				}
				got[h] <- l
			}()
			synctest.Wait()
		}
		if _, err := s.Transfer(t.Context(), "r", old.Token, "c"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Transfer to a holder that does not wait: %v, want ErrNotFound", err)
		}
		if _, err := s.Transfer(t.Context(), "r", old.Token+1, "b"); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Transfer with a token that holds nothing: %v, want ErrLeaseLost", err)
		}

		next, err := s.Transfer(t.Context(), "r", old.Token, "b")
		if err != nil {
			t.Fatalf("Transfer to b: %v", err)
		}
		b := <-got["b"]
		if next.Holder != "b" || next.Token != b.Token || b.Token <= old.Token || next.Sequencer != "" {
			t.Fatalf("Transfer returned %+v, b got %+v; want b's lease above %d, without its sequencer", next, b, old.Token)
		}
		// The old token is fenced at once: the grant raised the fence.
		if f, err := db.Fence(t.Context(), "r"); err != nil || f != b.Token {
			t.Fatalf("fence after the transfer: %d, %v; want %d", f, err, b.Token)
		}
		if _, err := db.Put(t.Context(), "r", "k", []byte("stale"), old.Token, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a write with the old token: %v, want ErrFenced", err)
		}
		if _, err := s.Renew(t.Context(), "r", old.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Renew of the transferred lease: %v, want ErrLeaseLost", err)
		}
		select {
		case l := <-got["a"]:
			t.Fatalf("a was granted %+v while b holds the lock", l)
		default:
		}
		// a is still first: b's release hands the lock to it.
		if err := s.Release(t.Context(), "r", b.Token); err != nil {
			t.Fatal(err)
		}
		if a := <-got["a"]; a.Holder != "a" || a.Token <= b.Token {
			t.Fatalf("a got %+v after b's release, want a token above %d", a, b.Token)
		}
	})
}

// TestService_TransferOwner checks that only the lease's owner may hand it on.
func TestService_TransferOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		alice, bob := fence.WithOwner(t.Context(), "alice"), fence.WithOwner(t.Context(), "bob")
		l, err := s.Acquire(alice, "r", "h", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		go s.Acquire(t.Context(), "r", "next", time.Minute, fence.MaxWait)
		synctest.Wait()
		if _, err := s.Transfer(bob, "r", l.Token, "next"); !errors.Is(err, fence.ErrForbidden) {
			t.Fatalf("bob's transfer of alice's lease: %v, want ErrForbidden", err)
		}
		if _, err := s.Transfer(alice, "r", l.Token, "next"); err != nil {
			t.Fatalf("alice's transfer: %v", err)
		}
	})
}

// failingHandoff is a memory ledger whose first hand-off fails.
type failingHandoff struct {
	*memory.DB
	failed bool
}

func (f *failingHandoff) Handoff(ctx context.Context, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (fence.Token, fence.Token, error) {
	if !f.failed {
		f.failed = true
		return 0, 0, errors.New("the engine is down")
	}
	return f.DB.Handoff(ctx, resource, token, holder, ttl, expires)
}

// TestService_TransferFailedKeepsOrder checks that a transfer whose ledger
// write fails leaves the lease held and the queue in its order: the waiter
// it chose goes back behind the one before it.
func TestService_TransferFailedKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := openLedger(t, &failingHandoff{DB: db})
		old := acquire(t, s, "r", "old", time.Minute)
		got := map[string]chan fence.Lease{"a": make(chan fence.Lease, 1), "b": make(chan fence.Lease, 1)}
		for _, h := range []string{"a", "b"} {
			go func() {
				l, _ := s.Acquire(t.Context(), "r", h, time.Minute, fence.MaxWait)
				got[h] <- l
			}()
			synctest.Wait()
		}
		if _, err := s.Transfer(t.Context(), "r", old.Token, "b"); err == nil {
			t.Fatal("Transfer succeeded over a failing ledger")
		}
		if st, err := s.Status(t.Context(), "r"); err != nil || !st.Held || st.Token != old.Token {
			t.Fatalf("Status after the failed transfer = %+v, %v; want the old lease", st, err)
		}
		// The release hands off, which works now: a, first, gets the lock.
		if err := s.Release(t.Context(), "r", old.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case l := <-got["a"]:
			if l.Holder != "a" {
				t.Fatalf("a got %+v", l)
			}
		case l := <-got["b"]:
			t.Fatalf("b, second in the queue, was served first: %+v", l)
		}
	})
}
