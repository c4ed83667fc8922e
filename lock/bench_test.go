package lock_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// BenchmarkService_AcquireRelease measures the lock service's own cost per
// grant and release, on an in-memory ledger (no fsync), one resource per goroutine.
func BenchmarkService_AcquireRelease(b *testing.B) {
	s := lock.NewService(memory.New())
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := s.Open(b.Context()); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		res := fmt.Sprintf("r-%d", n.Add(1))
		for pb.Next() {
			l, err := s.Acquire(b.Context(), res, "h", 10*time.Second, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Release(b.Context(), res, l.Token); err != nil {
				b.Fatal(err)
			}
		}
	})
}
