package lock_test

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/watch"
)

// drain returns the types and tokens of the events pending in sub.
func drain(t *testing.T, sub *watch.Sub) []string {
	t.Helper()
	var got []string
	for sub.Pending() > 0 {
		e, err := sub.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Type)+":"+e.Holder+":"+e.Token.String())
	}
	return got
}

func wantSeq(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}

// TestService_Events checks that every change to a lease is published, in
// the order of the changes: hand-offs to waiters after a release and after
// an expiry with a lock-delay, renewals, retried acquires and revokes.
func TestService_Events(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := watch.NewHub()
		defer hub.Close() // it stops the hub's goroutine, which the bubble waits for
		s := lock.NewService(memory.New())
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		s.Events = hub
		s.LockDelay = time.Second
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sub, _ := hub.Subscribe("", "")
		ctx := t.Context()

		a := acquire(t, s, "r", "a", time.Minute)
		acquire(t, s, "r", "a", time.Minute) // a retry: a renewal
		if _, err := s.Renew(ctx, "r", a.Token, 0); err != nil {
			t.Fatal(err)
		}
		go s.Acquire(ctx, "r", "b", 2*time.Second, time.Minute)
		synctest.Wait()
		if err := s.Release(ctx, "r", a.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantSeq(t, drain(t, sub),
			"granted:a:1", "fence_raised::1", "renewed:a:1", "renewed:a:1",
			"released:a:1", "granted:b:2", "fence_raised::2")

		// b's lease expires; c waits out the lock-delay, then gets it.
		go s.Acquire(ctx, "r", "c", time.Minute, time.Minute)
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		wantSeq(t, drain(t, sub), "expired:b:2")
		time.Sleep(time.Second)
		synctest.Wait()
		wantSeq(t, drain(t, sub), "granted:c:3", "fence_raised::3")

		if _, err := s.Revoke(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		wantSeq(t, drain(t, sub), "revoked:c:3", "fence_raised::4")
		if _, err := s.Revoke(ctx, "free"); err != nil {
			t.Fatal(err)
		}
		wantSeq(t, drain(t, sub), "revoked::0", "fence_raised::1")

		// A shared group's events name each holder; its revoke, each too.
		for _, h := range []string{"r2", "r1"} {
			if _, err := s.AcquireShared(ctx, "doc", h, time.Minute, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Revoke(ctx, "doc"); err != nil {
			t.Fatal(err)
		}
		wantSeq(t, drain(t, sub), "granted:r2:1", "fence_raised::1", "granted:r1:1", "fence_raised::1",
			"revoked:r1:1", "revoked:r2:1", "fence_raised::2")
	})
}
