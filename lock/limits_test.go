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
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

func TestService_MaxWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := lock.NewService(memory.New())
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		s.MaxWaiters = 2
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		acquire(t, s, "orders", "a", 10*time.Second)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for _, h := range []string{"b", "c"} {
			go s.Acquire(ctx, "orders", h, 10*time.Second, time.Minute)
		}
		synctest.Wait() // b and c are queued

		start := time.Now()
		_, err := s.Acquire(t.Context(), "orders", "d", 10*time.Second, time.Minute)
		var he *fence.LockHeldError
		if !errors.As(err, &he) {
			t.Fatalf("third waiter: err=%v, want *fence.LockHeldError", err)
		}
		if time.Since(start) != 0 {
			t.Fatalf("third waiter waited %s, want an immediate answer", time.Since(start))
		}
		if he.RetryAfter != 10*time.Second {
			t.Fatalf("RetryAfter=%s, want 10s", he.RetryAfter)
		}
		// Another resource has its own queue.
		acquire(t, s, "users", "a", 10*time.Second)
		go s.Acquire(ctx, "users", "b", 10*time.Second, time.Minute)
		synctest.Wait()
		cancel()
		synctest.Wait()
	})
}
