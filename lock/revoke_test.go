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

// TestService_RequestRevoke asks a holder to let go: its renewals say so;
// at the deadline the lease is revoked and fenced and the waiter served; a
// holder that lets go in time is not revoked; a later request with a
// longer grace keeps the earlier deadline; a free resource is revoked at
// once; a restart gives the grace again in full.
func TestService_RequestRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s := open(t, db)
		l := acquire(t, s, "r", "a", time.Minute)
		got := waitFor(t, s, "r", "b", false)
		asked, _, err := s.RequestRevoke(t.Context(), "r", 5*time.Second)
		if err != nil || asked.Token != l.Token || !asked.RevokeAt.Equal(time.Now().Add(5*time.Second)) {
			t.Fatalf("RequestRevoke=%+v, %v; want a's lease with RevokeAt in 5s", asked, err)
		}
		if again, _, err := s.RequestRevoke(t.Context(), "r", time.Minute); err != nil || !again.RevokeAt.Equal(asked.RevokeAt) {
			t.Fatalf("a longer grace moved the deadline: %+v, %v", again, err)
		}
		renewed, err := s.Renew(t.Context(), "r", l.Token, 0)
		if err != nil || !renewed.RevokeAt.Equal(asked.RevokeAt) {
			t.Fatalf("Renew=%+v, %v; want RevokeAt %s", renewed, err, asked.RevokeAt)
		}
		if st, _ := s.Status(t.Context(), "r"); !st.RevokeAt.Equal(asked.RevokeAt) {
			t.Fatalf("Status=%+v, want RevokeAt %s", st, asked.RevokeAt)
		}
		time.Sleep(4 * time.Second)
		wantNothingYet(t, "b", got)
		time.Sleep(2 * time.Second)
		b := <-got
		if b.Token <= l.Token+1 {
			t.Fatalf("b got token %d, want above the revoke's fence %d", b.Token, l.Token+1)
		}
		if err := writeWith(t, db, "r", l.Token); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a's write after the deadline: %v, want fenced", err)
		}
		if _, err := s.Renew(t.Context(), "r", l.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("a's renew after the deadline: %v, want lease_lost", err)
		}
		// b lets go in time: nothing is revoked.
		if _, _, err := s.RequestRevoke(t.Context(), "r", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(t.Context(), "r", b.Token); err != nil {
			t.Fatal(err)
		}
		c := acquire(t, s, "r", "c", time.Minute)
		time.Sleep(10 * time.Second)
		if st, _ := s.Status(t.Context(), "r"); !st.Held || st.Token != c.Token || !st.RevokeAt.IsZero() {
			t.Fatalf("c after b's request ran out: %+v, want c's lease, asked nothing", st)
		}
		// A free resource is revoked at once.
		if _, res, err := s.RequestRevoke(t.Context(), "free", time.Second); err != nil || res.LastFence == 0 || res.Revoked != 0 {
			t.Fatalf("RequestRevoke of a free resource=%+v, %v; want it fenced", res, err)
		}
		if _, _, err := s.RequestRevoke(t.Context(), "r", time.Millisecond); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("grace 1ms: %v, want bad_request", err)
		}
		// A restart gives the grace again in full.
		if _, _, err := s.RequestRevoke(t.Context(), "r", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * time.Second)
		s.Close()
		s2 := open(t, db)
		time.Sleep(8 * time.Second) // past the first deadline, within the restored grace
		if st, _ := s2.Status(t.Context(), "r"); !st.Held || st.Token != c.Token {
			t.Fatalf("c 16s after a 10s request and a restart: %+v, want still held", st)
		}
		time.Sleep(3 * time.Second)
		if st, _ := s2.Status(t.Context(), "r"); st.Held {
			t.Fatalf("c past the restored grace: %+v, want revoked", st)
		}
	})
}

// TestService_RequestRevokeShared asks a shared group to let go: every
// holder's renewals say so, and so does a holder that joins after.
func TestService_RequestRevokeShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		r1 := share(t, s, "doc", "r1", time.Minute)
		asked, _, err := s.RequestRevoke(t.Context(), "doc", 5*time.Second)
		if err != nil || !asked.Shared || asked.Token != r1.Token {
			t.Fatalf("RequestRevoke=%+v, %v; want the group", asked, err)
		}
		r2 := share(t, s, "doc", "r2", time.Minute)
		for _, h := range []string{"r1", "r2"} {
			if l, err := s.RenewShared(t.Context(), "doc", h, r1.Token, 0); err != nil || !l.RevokeAt.Equal(asked.RevokeAt) {
				t.Fatalf("%s: RenewShared=%+v, %v; want RevokeAt %s", h, l, err, asked.RevokeAt)
			}
		}
		if !r2.RevokeAt.Equal(asked.RevokeAt) {
			t.Fatalf("r2 joined with RevokeAt %s, want %s", r2.RevokeAt, asked.RevokeAt)
		}
		time.Sleep(6 * time.Second)
		if st, _ := s.Status(t.Context(), "doc"); st.Held {
			t.Fatalf("the group past its deadline: %+v, want revoked", st)
		}
	})
}
