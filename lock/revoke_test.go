package lock_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

func TestService_Revoke(t *testing.T) {
	t.Run("FencesHolder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			a := acquire(t, s, "r", "a", time.Minute)
			if _, err := db.Put(t.Context(), "r", "k", []byte("a1"), a.Token, fence.Cond{}); err != nil {
				t.Fatal(err)
			}
			res, err := s.Revoke(t.Context(), "r")
			if err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if res.Resource != "r" || res.Revoked != a.Token || res.LastFence != a.Token+1 {
				t.Fatalf("RevokeResult=%+v, want {r %d %d}", res, a.Token, a.Token+1)
			}
			// The old holder is fenced at once: its renew and its write fail.
			_, err = s.Renew(t.Context(), "r", a.Token, 0)
			var lost *fence.LeaseLostError
			if !errors.As(err, &lost) || lost.Presented != a.Token {
				t.Fatalf("Renew: err=%v, want LeaseLostError{Presented: %d}", err, a.Token)
			}
			_, err = db.Put(t.Context(), "r", "k", []byte("a2"), a.Token, fence.Cond{})
			var fenced *fence.FencedError
			if !errors.As(err, &fenced) || fenced.LastFence != res.Revoked+1 {
				t.Fatalf("Put: err=%v, want FencedError{LastFence: %d}", err, res.Revoked+1)
			}
		})
	})

	t.Run("ServesWaiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			a := acquire(t, s, "r", "a", time.Minute)
			type got struct {
				l   fence.Lease
				err error
			}
			bC := make(chan got, 1)
			go func() {
				l, err := s.Acquire(t.Context(), "r", "b", time.Minute, time.Minute)
				bC <- got{l, err}
			}()
			synctest.Wait() // b is queued
			res, err := s.Revoke(t.Context(), "r")
			if err != nil || res.Revoked != a.Token {
				t.Fatalf("Revoke=%+v, %v; want Revoked %d", res, err, a.Token)
			}
			b := <-bC
			if b.err != nil {
				t.Fatalf("waiter's Acquire: %v", b.err)
			}
			if b.l.Holder != "b" || b.l.Token != res.LastFence+1 {
				t.Fatalf("Lease=%+v, want b with token %d", b.l, res.LastFence+1)
			}
			if f, _ := db.Fence(t.Context(), "r"); f != b.l.Token {
				t.Fatalf("Fence=%d, want %d", f, b.l.Token)
			}
			if _, err := db.Put(t.Context(), "r", "k", []byte("a"), a.Token, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
				t.Fatalf("Put by the revoked holder: err=%v, want ErrFenced", err)
			}
		})
	})

	t.Run("Free", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			a := acquire(t, s, "r", "a", time.Minute)
			if err := s.Release(t.Context(), "r", a.Token); err != nil {
				t.Fatal(err)
			}
			res, err := s.Revoke(t.Context(), "r")
			if err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if res.Revoked != 0 || res.LastFence != a.Token+1 {
				t.Fatalf("RevokeResult=%+v, want Revoked 0, LastFence %d", res, a.Token+1)
			}
			if f, _ := db.Fence(t.Context(), "r"); f != a.Token+1 {
				t.Fatalf("Fence=%d, want %d", f, a.Token+1)
			}
			_, err = db.Put(t.Context(), "r", "k", []byte("late"), a.Token, fence.Cond{})
			if !errors.Is(err, fence.ErrFenced) {
				t.Fatalf("Put with the released token: err=%v, want ErrFenced", err)
			}
			// Never granted: revoking an unknown resource raises its fence too.
			res, err = s.Revoke(t.Context(), "unknown")
			if err != nil || res.Revoked != 0 || res.LastFence != 1 {
				t.Fatalf("Revoke(unknown)=%+v, %v; want LastFence 1", res, err)
			}
			if l := acquire(t, s, "unknown", "b", time.Minute); l.Token != 2 {
				t.Fatalf("Token=%d, want 2", l.Token)
			}
			if st, _ := s.Status(t.Context(), "r"); st.Held || st.LastToken != a.Token+1 {
				t.Fatalf("Status=%+v, want free with LastToken %d", st, a.Token+1)
			}
		})
	})

	t.Run("BadRequest", func(t *testing.T) {
		s := open(t, memory.New())
		if _, err := s.Revoke(t.Context(), ""); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("Revoke(\"\"): err=%v, want ErrBadRequest", err)
		}
	})

	t.Run("SurvivesRestart", func(t *testing.T) {
		dir := t.TempDir()
		db, s := openBolt(t, dir)
		a := acquire(t, s, "r", "a", time.Hour)
		res, err := s.Revoke(t.Context(), "r")
		if err != nil || res.Revoked != a.Token || res.LastFence != a.Token+1 {
			t.Fatalf("Revoke=%+v, %v; want {Revoked: %d, LastFence: %d}", res, err, a.Token, a.Token+1)
		}
		s.Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db, s = openBolt(t, dir)
		defer db.Close()
		defer s.Close()
		st, err := s.Status(t.Context(), "r")
		if err != nil || st.Held || st.LastToken != res.LastFence {
			t.Fatalf("Status after reopen=%+v, %v; want free, LastToken %d (the revoked lease is not restored)", st, err, res.LastFence)
		}
		if f, _ := db.Fence(t.Context(), "r"); f != res.LastFence {
			t.Fatalf("Fence after reopen=%d, want %d", f, res.LastFence)
		}
		if _, err := s.Renew(t.Context(), "r", a.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Renew of the revoked lease after reopen: err=%v, want ErrLeaseLost", err)
		}
		if b := acquire(t, s, "r", "b", time.Minute); b.Token <= res.LastFence {
			t.Fatalf("Token after reopen=%d, want > %d", b.Token, res.LastFence)
		}
	})
}

func openDelay(t *testing.T, db *memory.DB, delay time.Duration) *lock.Service {
	t.Helper()
	s := lock.NewService(db)
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s.LockDelay = delay
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestService_LockDelay(t *testing.T) {
	t.Run("AfterExpiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := openDelay(t, memory.New(), 5*time.Second)
			start := time.Now()
			a := acquire(t, s, "r", "a", 10*time.Second)
			type got struct {
				l   fence.Lease
				at  time.Time
				err error
			}
			wC := make(chan got, 2)
			waiter := func(holder string) {
				l, err := s.Acquire(t.Context(), "r", holder, 10*time.Second, time.Minute)
				wC <- got{l, time.Now(), err}
			}
			go waiter("w1")
			synctest.Wait()
			time.Sleep(12 * time.Second) // expired at 10s; the delay lasts until 15s
			go waiter("w2")
			synctest.Wait()

			for _, holder := range []string{"b", "a"} {
				_, err := s.Acquire(t.Context(), "r", holder, time.Second, 0)
				var held *fence.LockHeldError
				if !errors.As(err, &held) || held.RetryAfter != 3*time.Second {
					t.Fatalf("Acquire(%s) during the delay: err=%v, want LockHeldError{RetryAfter: 3s}", holder, err)
				}
			}
			if _, err := s.Renew(t.Context(), "r", a.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
				t.Fatalf("Renew during the delay: err=%v, want ErrLeaseLost", err)
			}
			if st, _ := s.Status(t.Context(), "r"); st.Held {
				t.Fatalf("Status=%+v, want free (in its delay)", st)
			}
			w := <-wC
			if w.err != nil || w.l.Holder != "w1" || w.l.Token != a.Token+1 {
				t.Fatalf("first waiter: %+v, %v; want w1 with token %d", w.l, w.err, a.Token+1)
			}
			if want := start.Add(15 * time.Second); !w.at.Equal(want) {
				t.Fatalf("first waiter served at %v, want %v (expiry + delay)", w.at.Sub(start), want.Sub(start))
			}
			// FIFO: w2 comes after w1's lease, which expires into a new delay.
			w = <-wC
			if w.err != nil || w.l.Holder != "w2" {
				t.Fatalf("second waiter: %+v, %v; want w2", w.l, w.err)
			}
			if want := start.Add(30 * time.Second); !w.at.Equal(want) {
				t.Fatalf("second waiter served at %v, want %v", w.at.Sub(start), want.Sub(start))
			}
		})
	})

	// A delay in progress survives a restart (or a failover) with its full
	// length from the restart, and its end is recorded.
	t.Run("Restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s1 := openDelay(t, db, 5*time.Second)
			a := acquire(t, s1, "r", "a", time.Second)
			time.Sleep(2 * time.Second) // expired at 1s: delayed until 6s
			s1.Close()
			time.Sleep(10 * time.Second) // down past the delay's end by the wall clock

			s2 := openDelay(t, db, 5*time.Second)
			restarted := time.Now()
			_, err := s2.Acquire(t.Context(), "r", "b", time.Second, 0)
			var held *fence.LockHeldError
			if !errors.As(err, &held) || held.RetryAfter != 5*time.Second {
				t.Fatalf("Acquire after restart: err=%v, want LockHeldError{RetryAfter: 5s}", err)
			}
			b, err := s2.Acquire(t.Context(), "r", "b", time.Second, time.Minute)
			if err != nil || b.Token != a.Token+1 || time.Since(restarted) != 5*time.Second {
				t.Fatalf("waiter: %+v, %v after %v; want token %d after 5s", b, err, time.Since(restarted), a.Token+1)
			}
			if _, delays, _ := db.Leases(t.Context()); len(delays) != 0 {
				t.Fatalf("delays=%v, want none after the grant", delays)
			}
		})
	})

	t.Run("NotAfterRelease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := openDelay(t, memory.New(), 5*time.Second)
			a := acquire(t, s, "r", "a", 10*time.Second)
			if err := s.Release(t.Context(), "r", a.Token); err != nil {
				t.Fatal(err)
			}
			if b := acquire(t, s, "r", "b", 10*time.Second); b.Token != a.Token+1 {
				t.Fatalf("Token=%d, want %d", b.Token, a.Token+1)
			}
		})
	})

	t.Run("RevokeEndsDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := openDelay(t, memory.New(), 5*time.Second)
			a := acquire(t, s, "r", "a", 10*time.Second)
			time.Sleep(11 * time.Second)
			res, err := s.Revoke(t.Context(), "r")
			if err != nil || res.Revoked != 0 {
				t.Fatalf("Revoke=%+v, %v; want Revoked 0 (the lease had expired)", res, err)
			}
			if b := acquire(t, s, "r", "b", 10*time.Second); b.Token != a.Token+2 {
				t.Fatalf("Token=%d, want %d", b.Token, a.Token+2)
			}
		})
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, d := range []time.Duration{-time.Second, lock.MaxLockDelay + time.Millisecond} {
			s := lock.NewService(memory.New())
			s.LockDelay = d
			if err := s.Open(t.Context()); !errors.Is(err, fence.ErrBadRequest) {
				t.Errorf("Open with LockDelay %s: err=%v, want ErrBadRequest", d, err)
			}
			s.Close()
		}
	})
}
