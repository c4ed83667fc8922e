package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// gatedLedger is a memory ledger whose grants and hand-offs wait until gate
// is closed, to hold a hand-off in the middle of its ledger write.
type gatedLedger struct {
	*memory.DB
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedLedger) wait() {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
}

func (g *gatedLedger) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	g.wait()
	return g.DB.Grant(ctx, resource, holder, ttl, expires)
}

func (g *gatedLedger) Handoff(ctx context.Context, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (fence.Token, fence.Token, error) {
	g.wait()
	return g.DB.Handoff(ctx, resource, token, holder, ttl, expires)
}

func TestService_HandOffWhileCallersLeave(t *testing.T) {
	// Two queued requests of one holder (a retry) get one grant; one of them
	// leaves while the grant is being recorded. The other keeps the lease.
	t.Run("RetryKeepsLease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := &gatedLedger{DB: memory.New()}
			s := openLedger(t, g)
			x := acquire(t, s, "r", "x", time.Minute)
			aC := make(chan fence.Lease, 1)
			go func() {
				l, err := s.Acquire(t.Context(), "r", "h", time.Minute, time.Minute)
				if err != nil {
					t.Errorf("a: %v", err)
				}
				aC <- l
			}()
			synctest.Wait()
			bCtx, cancelB := context.WithCancel(t.Context())
			bErr := make(chan error, 1)
			go func() {
				_, err := s.Acquire(bCtx, "r", "h", time.Minute, time.Minute)
				bErr <- err
			}()
			synctest.Wait()
			g.entered, g.gate = make(chan struct{}), make(chan struct{})
			go s.Release(t.Context(), "r", x.Token)
			<-g.entered // the hand-off is recording the grant
			cancelB()
			close(g.gate)
			if err := <-bErr; !errors.Is(err, context.Canceled) {
				t.Fatalf("b: err=%v, want context.Canceled", err)
			}
			a := <-aC
			if _, err := s.Renew(t.Context(), "r", a.Token, 0); err != nil {
				t.Fatalf("a was granted %d but cannot renew it: %v", a.Token, err)
			}
		})
	})

	// The only request for a grant leaves while it is recorded: the grant is
	// released at once and the next waiter gets the lock.
	t.Run("AbandonedGrantReleased", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := &gatedLedger{DB: memory.New()}
			s := openLedger(t, g)
			x := acquire(t, s, "r", "x", time.Minute)
			bCtx, cancelB := context.WithCancel(t.Context())
			bErr := make(chan error, 1)
			go func() {
				_, err := s.Acquire(bCtx, "r", "b", time.Minute, time.Minute)
				bErr <- err
			}()
			synctest.Wait()
			cC := make(chan fence.Lease, 1)
			go func() {
				l, _ := s.Acquire(t.Context(), "r", "c", time.Minute, time.Minute)
				cC <- l
			}()
			synctest.Wait()
			g.entered, g.gate = make(chan struct{}, 2), make(chan struct{})
			go s.Release(t.Context(), "r", x.Token)
			<-g.entered
			cancelB()
			close(g.gate)
			<-bErr
			start := time.Now()
			c := <-cC
			if c.Holder != "c" || c.Token != x.Token+2 || time.Since(start) != 0 {
				t.Fatalf("c got %+v after %v, want token %d at once", c, time.Since(start), x.Token+2)
			}
		})
	})
}

// recordingLedger is a memory ledger that records the changes made to it,
// and fails every Handoff with handoffErr while it is set. If gate is not
// nil, every Handoff waits until it is closed.
type recordingLedger struct {
	*memory.DB
	mu         sync.Mutex
	changes    []string
	handoffErr error
	entered    chan struct{}
	gate       chan struct{}
}

func (r *recordingLedger) record(change string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, change)
	if change == "Handoff" {
		return r.handoffErr
	}
	return nil
}

// take returns the changes recorded since the last take.
func (r *recordingLedger) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := strings.Join(r.changes, " ")
	r.changes = nil
	return c
}

func (r *recordingLedger) failHandoff(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handoffErr = err
}

func (r *recordingLedger) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r.record("Grant")
	return r.DB.Grant(ctx, resource, holder, ttl, expires)
}

func (r *recordingLedger) Refresh(ctx context.Context, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r.record("Refresh")
	return r.DB.Refresh(ctx, resource, token, ttl, expires)
}

func (r *recordingLedger) End(ctx context.Context, resource string, token fence.Token) (fence.Token, error) {
	r.record("End")
	return r.DB.End(ctx, resource, token)
}

func (r *recordingLedger) Handoff(ctx context.Context, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (fence.Token, fence.Token, error) {
	err := r.record("Handoff")
	if r.gate != nil {
		r.entered <- struct{}{}
		<-r.gate
	}
	if err != nil {
		return 0, 0, err
	}
	return r.DB.Handoff(ctx, resource, token, holder, ttl, expires)
}

func (r *recordingLedger) Revoke(ctx context.Context, resource string) (fence.Token, fence.Token, error) {
	r.record("Revoke")
	return r.DB.Revoke(ctx, resource)
}

func (r *recordingLedger) SetDelay(ctx context.Context, resource string, d time.Duration) error {
	r.record("SetDelay")
	return r.DB.SetDelay(ctx, resource, d)
}

// logBuffer collects a service's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how many lines have msg as their message.
func (l *logBuffer) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), fmt.Sprintf("msg=%q", msg))
}

func openRecorded(t *testing.T, delay time.Duration) (*lock.Service, *recordingLedger, *logBuffer) {
	t.Helper()
	r := &recordingLedger{DB: memory.New()}
	logs := &logBuffer{}
	s := lock.NewService(r)
	s.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s.LockDelay = delay
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, r, logs
}

type acquired struct {
	l   fence.Lease
	at  time.Time
	err error
}

// queue starts an acquire by holder that waits up to a minute, and returns
// once it is queued.
func queue(t *testing.T, s *lock.Service, resource, holder string, ttl time.Duration) <-chan acquired {
	t.Helper()
	return queueCtx(t.Context(), t, s, resource, holder, ttl)
}

func queueCtx(ctx context.Context, t *testing.T, s *lock.Service, resource, holder string, ttl time.Duration) <-chan acquired {
	t.Helper()
	c := make(chan acquired, 1)
	go func() {
		l, err := s.Acquire(ctx, resource, holder, ttl, time.Minute)
		c <- acquired{l, time.Now(), err}
	}()
	synctest.Wait()
	return c
}

// TestService_HandoffOneChange checks that a lease ending with a waiter
// first in line is one ledger change, Handoff, that ends it and grants the
// waiter the next token.
func TestService_HandoffOneChange(t *testing.T) {
	t.Run("Release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, logs := openRecorded(t, 0)
			a := acquire(t, s, "r", "a", time.Minute)
			bC := queue(t, s, "r", "b", 10*time.Second)
			r.take()
			released := time.Now()
			if err := s.Release(t.Context(), "r", a.Token); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if got := r.take(); got != "Handoff" {
				t.Fatalf("ledger changes=%q, want one Handoff", got)
			}
			b := <-bC
			if b.err != nil || b.l.Holder != "b" || b.l.Token != a.Token+1 {
				t.Fatalf("waiter: %+v, %v; want b with token %d", b.l, b.err, a.Token+1)
			}
			if !b.l.Expires.Equal(released.Add(10 * time.Second)) {
				t.Fatalf("Expires=%v, want %v", b.l.Expires, released.Add(10*time.Second))
			}
			if f, _ := r.Fence(t.Context(), "r"); f != b.l.Token {
				t.Fatalf("Fence=%d, want %d", f, b.l.Token)
			}
			if _, err := s.Renew(t.Context(), "r", a.Token, 0); !errors.Is(err, fence.ErrLeaseLost) {
				t.Fatalf("Renew by the old holder: err=%v, want ErrLeaseLost", err)
			}
			if _, err := s.Renew(t.Context(), "r", b.l.Token, 0); err != nil {
				t.Fatalf("Renew by the new holder: %v", err)
			}
			if n, m := logs.count("lock released"), logs.count("lock acquired"); n != 1 || m != 2 {
				t.Fatalf("logged %d releases and %d acquires, want 1 and 2", n, m)
			}
		})
	})

	// A grant whose caller left while it was recorded ends in the change
	// that grants the next waiter; waiters whose callers have gone are
	// skipped, and the first live one is served with its retries.
	t.Run("SkipsGoneWaiters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, logs := openRecorded(t, 0)
			x := acquire(t, s, "r", "x", time.Minute)
			yCtx, cancelY := context.WithCancel(t.Context())
			yC := queueCtx(yCtx, t, s, "r", "y", time.Second)
			goneCtx, cancelGone := context.WithCancel(t.Context())
			goneC := queueCtx(goneCtx, t, s, "r", "gone", time.Second)
			cC := queue(t, s, "r", "c", time.Second)
			dC := queue(t, s, "r", "d", time.Second)
			cAgainC := queue(t, s, "r", "c", time.Second)
			r.entered, r.gate = make(chan struct{}, 2), make(chan struct{})
			r.take()
			errC := make(chan error, 1)
			go func() { errC <- s.Release(t.Context(), "r", x.Token) }()
			<-r.entered // the hand-off to y is being recorded, under the entry's mutex
			cancelY()
			cancelGone()
			close(r.gate)
			if err := <-errC; err != nil {
				t.Fatalf("Release: %v", err)
			}
			for name, c := range map[string]<-chan acquired{"y": yC, "gone": goneC} {
				if got := <-c; !errors.Is(got.err, context.Canceled) {
					t.Fatalf("%s: %+v, %v; want context.Canceled", name, got.l, got.err)
				}
			}
			c, cAgain := <-cC, <-cAgainC
			if c.err != nil || cAgain.err != nil || c.l.Holder != "c" || c.l.Token != x.Token+2 || cAgain.l.Token != c.l.Token {
				t.Fatalf("c got %+v, %v and %+v, %v; want token %d twice", c.l, c.err, cAgain.l, cAgain.err, x.Token+2)
			}
			if got := r.take(); got != "Handoff Handoff" {
				t.Fatalf("ledger changes=%q, want two Handoffs (x to y, y to c)", got)
			}
			if n := logs.count("abandoned grant released"); n != 1 {
				t.Fatalf("logged %d abandoned grants, want 1", n)
			}
			synctest.Wait()
			select {
			case d := <-dC:
				t.Fatalf("d served while c holds: %+v, %v", d.l, d.err)
			default:
			}
		})
	})

	// A failed hand-off is a failed release: the old holder still holds,
	// and the waiter still waits, first in line, with no token spent.
	t.Run("ReleaseFails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, _ := openRecorded(t, 0)
			a := acquire(t, s, "r", "a", time.Minute)
			bC := queue(t, s, "r", "b", time.Minute)
			boom := errors.New("disk on fire")
			r.failHandoff(boom)
			r.take()
			if err := s.Release(t.Context(), "r", a.Token); !errors.Is(err, boom) {
				t.Fatalf("Release: err=%v, want %v", err, boom)
			}
			if got := r.take(); got != "Handoff" {
				t.Fatalf("ledger changes=%q, want one Handoff", got)
			}
			synctest.Wait()
			select {
			case b := <-bC:
				t.Fatalf("waiter answered after a failed release: %+v, %v", b.l, b.err)
			default:
			}
			st, _ := s.Status(t.Context(), "r")
			if !st.Held || st.Holder != "a" || st.Token != a.Token || st.LastToken != a.Token {
				t.Fatalf("Status=%+v, want a still holding %d, no token spent", st, a.Token)
			}
			if _, err := s.Renew(t.Context(), "r", a.Token, 0); err != nil {
				t.Fatalf("Renew after a failed release: %v", err)
			}
			if leases, _, _ := r.Leases(t.Context()); len(leases) != 1 || leases[0].Token != a.Token {
				t.Fatalf("recorded leases=%+v, want a's only", leases)
			}

			r.failHandoff(nil)
			if err := s.Release(t.Context(), "r", a.Token); err != nil {
				t.Fatalf("Release retried: %v", err)
			}
			if b := <-bC; b.err != nil || b.l.Holder != "b" || b.l.Token != a.Token+1 {
				t.Fatalf("waiter: %+v, %v; want b with token %d", b.l, b.err, a.Token+1)
			}
		})
	})

	t.Run("Expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, logs := openRecorded(t, 0)
			start := time.Now()
			a := acquire(t, s, "r", "a", time.Second)
			bC := queue(t, s, "r", "b", 10*time.Second)
			r.take()
			b := <-bC
			if b.err != nil || b.l.Holder != "b" || b.l.Token != a.Token+1 {
				t.Fatalf("waiter: %+v, %v; want b with token %d", b.l, b.err, a.Token+1)
			}
			if got := r.take(); got != "Handoff" {
				t.Fatalf("ledger changes=%q, want one Handoff", got)
			}
			if want := start.Add(time.Second); !b.at.Equal(want) || !b.l.Expires.Equal(want.Add(10*time.Second)) {
				t.Fatalf("served at %v until %v, want at %v until %v", b.at, b.l.Expires, want, want.Add(10*time.Second))
			}
			if f, _ := r.Fence(t.Context(), "r"); f != b.l.Token {
				t.Fatalf("Fence=%d, want %d", f, b.l.Token)
			}
			if n, m := logs.count("lock expired"), logs.count("lock acquired"); n != 1 || m != 2 {
				t.Fatalf("logged %d expiries and %d acquires, want 1 and 2", n, m)
			}
		})
	})

	// An expired lease is over whatever the ledger answers: if the hand-off
	// fails, the lease ends anyway and the waiter is granted on its own, as
	// when End failed before a grant.
	t.Run("ExpiryFails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, logs := openRecorded(t, 0)
			a := acquire(t, s, "r", "a", time.Second)
			bC := queue(t, s, "r", "b", 10*time.Second)
			r.failHandoff(errors.New("disk on fire"))
			r.take()
			b := <-bC
			if b.err != nil || b.l.Holder != "b" || b.l.Token != a.Token+1 {
				t.Fatalf("waiter: %+v, %v; want b with token %d", b.l, b.err, a.Token+1)
			}
			if got := r.take(); got != "Handoff Grant" {
				t.Fatalf("ledger changes=%q, want a failed Handoff, then a Grant", got)
			}
			if n := logs.count("recording the end of a lease failed"); n != 1 {
				t.Fatalf("logged %d failures, want 1", n)
			}
		})
	})

	// An expiry with a lock-delay ends the lease alone; the waiter is
	// granted when the delay ends.
	t.Run("LockDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, _ := openRecorded(t, 5*time.Second)
			start := time.Now()
			a := acquire(t, s, "r", "a", 10*time.Second)
			wC := queue(t, s, "r", "w", 10*time.Second)
			r.take()
			time.Sleep(12 * time.Second)
			if got := r.take(); got != "End SetDelay" {
				t.Fatalf("ledger changes at the expiry=%q, want End and SetDelay (no hand-off)", got)
			}
			select {
			case w := <-wC:
				t.Fatalf("waiter served during the delay: %+v", w)
			default:
			}
			w := <-wC
			if w.err != nil || w.l.Token != a.Token+1 || !w.at.Equal(start.Add(15*time.Second)) {
				t.Fatalf("waiter: %+v, %v at %v; want token %d at 15s", w.l, w.err, w.at.Sub(start), a.Token+1)
			}
			if got := r.take(); got != "SetDelay Grant" {
				t.Fatalf("ledger changes at the end of the delay=%q, want SetDelay and Grant", got)
			}
		})
	})

	// A revoke issues a token to nobody, and then grants the waiter the
	// next: two changes, as before (see Service.Revoke).
	t.Run("Revoke", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, r, _ := openRecorded(t, 0)
			a := acquire(t, s, "r", "a", time.Minute)
			bC := queue(t, s, "r", "b", time.Minute)
			r.take()
			res, err := s.Revoke(t.Context(), "r")
			if err != nil || res.Revoked != a.Token || res.LastFence != a.Token+1 {
				t.Fatalf("Revoke=%+v, %v; want {Revoked: %d, LastFence: %d}", res, err, a.Token, a.Token+1)
			}
			if b := <-bC; b.err != nil || b.l.Token != res.LastFence+1 {
				t.Fatalf("waiter: %+v, %v; want token %d", b.l, b.err, res.LastFence+1)
			}
			if got := r.take(); got != "Revoke Grant" {
				t.Fatalf("ledger changes=%q, want Revoke and Grant", got)
			}
		})
	})
}
