package lock

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
)

// TestService_CloseUnderLoad closes the service while calls are in flight:
// nothing is granted after Close, every call returns, and the held-leases
// gauge ends where it started.
func TestService_CloseUnderLoad(t *testing.T) {
	for round := range 20 {
		held := testutil.ToFloat64(leasesHeld)
		s := NewService(memory.New())
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := fmt.Sprintf("r%d", g%4)
				for {
					l, err := s.Acquire(t.Context(), res, fmt.Sprint(g), time.Second, 10*time.Millisecond)
					if errors.Is(err, fence.ErrClosed) {
						return
					}
					if err == nil {
						s.Status(t.Context(), res)
						s.Release(t.Context(), res, l.Token)
					}
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
		s.Close()
		if _, err := s.Acquire(t.Context(), "after", "h", time.Second, 0); !errors.Is(err, fence.ErrClosed) {
			t.Fatalf("Acquire after Close: err=%v, want ErrClosed", err)
		}
		wg.Wait()
		if got := testutil.ToFloat64(leasesHeld); got != held {
			t.Fatalf("round %d: fence_lock_leases_held=%v after Close, want %v", round, got, held)
		}
	}
}
