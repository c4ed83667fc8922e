package lock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// Tests run in synctest bubbles: time is fake and advances only when every
// goroutine of the bubble is blocked, so TTLs of seconds cost no real time.

func open(t *testing.T, db *memory.DB) *lock.Service {
	t.Helper()
	return openLedger(t, db)
}

// openLedger opens a lock service on ledger, each of configure applied
// to it before Open.
func openLedger(t *testing.T, ledger fence.Ledger, configure ...func(*lock.Service)) *lock.Service {
	t.Helper()
	s := lock.NewService(ledger)
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range configure {
		c(s)
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openBolt opens a lock service on the bolt store in dir, which tests
// close and open again to restart the service.
func openBolt(t *testing.T, dir string) (*bolt.DB, *lock.Service) {
	t.Helper()
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	s := lock.NewService(db)
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db, s
}

func acquire(t *testing.T, s *lock.Service, resource, holder string, ttl time.Duration) fence.Lease {
	t.Helper()
	l, err := s.Acquire(t.Context(), resource, holder, ttl, 0)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", resource, holder, err)
	}
	return l
}

func TestService_Acquire(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			start := time.Now()
			l := acquire(t, s, "orders", "a", 10*time.Second)
			if l.Token != 1 || l.Holder != "a" || l.Resource != "orders" || l.TTL != 10*time.Second {
				t.Fatalf("Lease=%+v, want token 1 held by a for 10s", l)
			}
			if !l.Expires.Equal(start.Add(10 * time.Second)) {
				t.Fatalf("Expires=%v, want %v", l.Expires, start.Add(10*time.Second))
			}
			// Invariant 3: the grant raised the storage fence before it returned.
			if f, _ := db.Fence(t.Context(), "orders"); f != 1 {
				t.Fatalf("Fence=%d, want 1", f)
			}
		})
	})

	t.Run("SameHolderRetry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			first := acquire(t, s, "orders", "a", 10*time.Second)
			time.Sleep(5 * time.Second)
			again := acquire(t, s, "orders", "a", 20*time.Second)
			if again.Token != first.Token {
				t.Fatalf("Token=%d, want %d (the same lease)", again.Token, first.Token)
			}
			if again.TTL != 20*time.Second || !again.Expires.Equal(time.Now().Add(20*time.Second)) {
				t.Fatalf("Lease=%+v, want TTL refreshed to 20s from now", again)
			}
			if st, _ := s.Status(t.Context(), "orders"); st.LastToken != 1 {
				t.Fatalf("LastToken=%d, want 1 (no second grant)", st.LastToken)
			}
		})
	})

	t.Run("ErrLockHeld", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			acquire(t, s, "orders", "a", 10*time.Second)
			time.Sleep(3 * time.Second)
			_, err := s.Acquire(t.Context(), "orders", "b", time.Second, 0)
			var held *fence.LockHeldError
			if !errors.As(err, &held) || !errors.Is(err, fence.ErrLockHeld) {
				t.Fatalf("err=%v, want *LockHeldError", err)
			}
			if held.RetryAfter != 7*time.Second || held.Resource != "orders" {
				t.Fatalf("LockHeldError=%+v, want RetryAfter 7s on orders", held)
			}
		})
	})

	t.Run("WaitTimesOut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			acquire(t, s, "orders", "a", 10*time.Second)
			start := time.Now()
			_, err := s.Acquire(t.Context(), "orders", "b", time.Second, 2*time.Second)
			if !errors.Is(err, fence.ErrLockHeld) {
				t.Fatalf("err=%v, want ErrLockHeld", err)
			}
			if waited := time.Since(start); waited != 2*time.Second {
				t.Fatalf("waited %v, want 2s", waited)
			}
		})
	})

	t.Run("BadRequest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			for _, tc := range []struct {
				resource, holder string
				ttl, wait        time.Duration
			}{
				{"", "a", time.Second, 0},
				{"r", "", time.Second, 0},
				{"r", "a", 9 * time.Millisecond, 0},
				{"r", "a", 25 * time.Hour, 0},
				{"r", "a", time.Second, -1},
				{"r", "a", time.Second, 6 * time.Minute},
				{"r\x00", "a", time.Second, 0},
			} {
				if _, err := s.Acquire(t.Context(), tc.resource, tc.holder, tc.ttl, tc.wait); !errors.Is(err, fence.ErrBadRequest) {
					t.Errorf("Acquire(%+v): err=%v, want ErrBadRequest", tc, err)
				}
			}
			if st, _ := s.Status(t.Context(), "r"); st.LastToken != 0 {
				t.Fatalf("LastToken=%d after rejected acquires, want 0", st.LastToken)
			}
		})
	})
}

// TestService_TokensIncrease checks invariant 1 across release and expiry, per resource.
func TestService_TokensIncrease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		last := map[string]fence.Token{}
		for i := range 30 {
			res := []string{"a", "b", "c"}[i%3]
			l := acquire(t, s, res, "h", time.Second)
			if l.Token <= last[res] {
				t.Fatalf("%s: Token=%d after %d", res, l.Token, last[res])
			}
			last[res] = l.Token
			if i%2 == 0 {
				if err := s.Release(t.Context(), res, l.Token); err != nil {
					t.Fatal(err)
				}
			} else {
				time.Sleep(time.Second) // expires
			}
		}
		for res, tok := range last {
			if tok != 10 {
				t.Fatalf("%s: last Token=%d, want 10", res, tok)
			}
		}
	})
}

func TestService_Waiters(t *testing.T) {
	t.Run("FirstComeFirstServed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			a := acquire(t, s, "r", "a", 10*time.Second)
			order := make(chan string, 4)
			for _, h := range []string{"b", "c", "d"} {
				go func() {
					l, err := s.Acquire(t.Context(), "r", h, time.Second, time.Minute)
					if err != nil {
						t.Errorf("%s: %v", h, err)
						return
					}
					order <- h
					s.Release(t.Context(), "r", l.Token)
				}()
				synctest.Wait() // h is queued before the next one starts
			}
			s.Release(t.Context(), "r", a.Token)
			for _, want := range []string{"b", "c", "d"} {
				if got := <-order; got != want {
					t.Fatalf("granted %s, want %s", got, want)
				}
			}
		})
	})

	t.Run("CancelledWaiterLeavesQueue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			a := acquire(t, s, "r", "a", 10*time.Second)
			ctx, cancel := context.WithCancel(t.Context())
			bErr := make(chan error, 1)
			go func() {
				_, err := s.Acquire(ctx, "r", "b", time.Second, time.Minute)
				bErr <- err
			}()
			synctest.Wait()
			cLease := make(chan fence.Lease, 1)
			go func() {
				l, _ := s.Acquire(t.Context(), "r", "c", time.Second, time.Minute)
				cLease <- l
			}()
			synctest.Wait()
			cancel()
			if err := <-bErr; !errors.Is(err, context.Canceled) {
				t.Fatalf("b: err=%v, want context.Canceled", err)
			}
			s.Release(t.Context(), "r", a.Token)
			if l := <-cLease; l.Holder != "c" || l.Token != 2 {
				t.Fatalf("Lease=%+v, want c with token 2 (b left the queue)", l)
			}
		})
	})

	t.Run("ExpiryHandsOff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			acquire(t, s, "r", "a", time.Second)
			start := time.Now()
			l, err := s.Acquire(t.Context(), "r", "b", time.Second, time.Minute)
			if err != nil || l.Token != 2 {
				t.Fatalf("Lease=%+v err=%v, want token 2", l, err)
			}
			if waited := time.Since(start); waited != time.Second {
				t.Fatalf("waited %v, want 1s (the rest of a's lease)", waited)
			}
		})
	})

	t.Run("CloseWakesWaiters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			acquire(t, s, "r", "a", time.Minute)
			errC := make(chan error, 1)
			go func() {
				_, err := s.Acquire(t.Context(), "r", "b", time.Second, time.Minute)
				errC <- err
			}()
			synctest.Wait()
			s.Close()
			if err := <-errC; !errors.Is(err, fence.ErrClosed) {
				t.Fatalf("err=%v, want ErrClosed", err)
			}
			if _, err := s.Acquire(t.Context(), "q", "c", time.Second, 0); !errors.Is(err, fence.ErrClosed) {
				t.Fatalf("after Close: err=%v, want ErrClosed", err)
			}
		})
	})
}

func TestService_Renew(t *testing.T) {
	t.Run("Extends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			l := acquire(t, s, "r", "a", time.Second)
			for range 5 {
				time.Sleep(900 * time.Millisecond)
				r, err := s.Renew(t.Context(), "r", l.Token, 0)
				if err != nil {
					t.Fatalf("Renew: %v", err)
				}
				if r.Token != l.Token || r.TTL != time.Second {
					t.Fatalf("Lease=%+v, want token %d with its 1s TTL", r, l.Token)
				}
			}
			if st, _ := s.Status(t.Context(), "r"); !st.Held || st.Token != l.Token {
				t.Fatalf("Status=%+v, want held with token %d", st, l.Token)
			}
		})
	})

	// Invariant 6: a stale renew or release never touches a newer lease.
	t.Run("StaleNeverTouchesNewer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			a := acquire(t, s, "r", "a", time.Second)
			time.Sleep(time.Second)
			b := acquire(t, s, "r", "b", 10*time.Second)
			_, err := s.Renew(t.Context(), "r", a.Token, 0)
			var lost *fence.LeaseLostError
			if !errors.As(err, &lost) || lost.Presented != a.Token || lost.Current != b.Token {
				t.Fatalf("Renew: err=%v, want LeaseLostError{Presented: %d, Current: %d}", err, a.Token, b.Token)
			}
			if err := s.Release(t.Context(), "r", a.Token); !errors.Is(err, fence.ErrLeaseLost) {
				t.Fatalf("Release: err=%v, want ErrLeaseLost", err)
			}
			st, _ := s.Status(t.Context(), "r")
			if !st.Held || st.Holder != "b" || st.Token != b.Token || !st.Expires.Equal(b.Expires) {
				t.Fatalf("Status=%+v, want b's lease untouched (%+v)", st, b)
			}
		})
	})

	t.Run("AfterExpiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			l := acquire(t, s, "r", "a", time.Second)
			time.Sleep(time.Second)
			_, err := s.Renew(t.Context(), "r", l.Token, 0)
			var lost *fence.LeaseLostError
			if !errors.As(err, &lost) || lost.Current != 0 {
				t.Fatalf("err=%v, want LeaseLostError with Current 0", err)
			}
		})
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			if _, err := s.Renew(t.Context(), "r", 0, 0); !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("err=%v, want ErrInvalidToken", err)
			}
			if err := s.Release(t.Context(), "r", fence.MaxToken+1); !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("err=%v, want ErrInvalidToken", err)
			}
		})
	})
}

func TestService_Status(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		if st, err := s.Status(t.Context(), "r"); err != nil || st.Held || st.LastToken != 0 {
			t.Fatalf("Status=%+v err=%v, want free with LastToken 0", st, err)
		}
		l := acquire(t, s, "r", "a", time.Second)
		st, _ := s.Status(t.Context(), "r")
		if !st.Held || st.Holder != "a" || st.Token != l.Token || st.LastToken != l.Token {
			t.Fatalf("Status=%+v, want held by a", st)
		}
		s.Release(t.Context(), "r", l.Token)
		st, _ = s.Status(t.Context(), "r")
		if st.Held || st.Holder != "" || st.LastToken != l.Token {
			t.Fatalf("Status=%+v, want free with LastToken %d", st, l.Token)
		}
	})
}

// TestService_Restart checks invariant 7: an unexpired lease survives a
// restart, is never shortened, and nobody else gets the lock first. Every
// recorded lease gets its full TTL from the restart, even one whose expiry
// has passed by the wall clock: the record may come from another machine,
// whose clock must not end a lease early.
func TestService_Restart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := memory.New()
		s1 := open(t, db)
		a := acquire(t, s1, "r", "a", 10*time.Second)
		old := acquire(t, s1, "gone", "x", time.Second)
		s1.Close()
		time.Sleep(2 * time.Second) // the service is down; "gone" expires by the wall clock meanwhile

		s2 := open(t, db)
		restarted := time.Now()
		if _, err := s2.Acquire(t.Context(), "r", "b", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("b after restart: err=%v, want ErrLockHeld", err)
		}
		// Restored with its full TTL from the restart: never shorter than before.
		st, _ := s2.Status(t.Context(), "r")
		if !st.Held || st.Token != a.Token || !st.Expires.Equal(restarted.Add(10*time.Second)) {
			t.Fatalf("Status=%+v, want a's lease held until %v", st, restarted.Add(10*time.Second))
		}
		if _, err := s2.Renew(t.Context(), "r", a.Token, 0); err != nil {
			t.Fatalf("a renews after restart: %v", err)
		}
		if st, _ := s2.Status(t.Context(), "gone"); !st.Held || !st.Expires.Equal(restarted.Add(time.Second)) {
			t.Fatalf("Status=%+v, want x's lease restored for its full TTL of 1s", st)
		}
		if _, err := s2.Acquire(t.Context(), "gone", "y", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("y after restart: err=%v, want ErrLockHeld", err)
		}
		time.Sleep(time.Second)
		if l := acquire(t, s2, "gone", "y", time.Second); l.Token != old.Token+1 {
			t.Fatalf("Token=%d, want %d", l.Token, old.Token+1)
		}
	})
}
