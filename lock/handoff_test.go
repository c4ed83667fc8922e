package lock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/memory"
)

// gatedLedger is a memory ledger whose grants wait until gate is closed, to
// hold a hand-off in the middle of its ledger write.
type gatedLedger struct {
	*memory.DB
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedLedger) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.DB.Grant(ctx, resource, holder, ttl, expires)
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
