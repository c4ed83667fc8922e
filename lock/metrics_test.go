package lock

import (
	"io"
	"log/slog"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence/engine/memory"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// histogram returns h's sample count and sum.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestWaitAndHoldSeconds checks that every grant observes its wait, and
// every lease's end how long it was held.
func TestWaitAndHoldSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewService(memory.New())
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		waits, waited := histogram(t, waitSeconds)
		holds, held := histogram(t, holdSeconds)

		a, err := s.Acquire(t.Context(), "r", "a", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { _, err := s.Acquire(t.Context(), "r", "b", time.Minute, time.Minute); done <- err }()
		time.Sleep(3 * time.Second)
		if err := s.Release(t.Context(), "r", a.Token); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		n, sum := histogram(t, waitSeconds)
		// The histograms are the package's, with the sums of earlier tests
		// in them: compare the differences within rounding.
		if n-waits != 2 || math.Abs(sum-waited-3) > 1e-9 {
			t.Fatalf("wait: %d grants observed, %gs in all; want 2 and 3s (0 for a, 3s for b)", n-waits, sum-waited)
		}
		n, sum = histogram(t, holdSeconds)
		if n-holds != 1 || math.Abs(sum-held-3) > 1e-9 {
			t.Fatalf("hold: %d ends observed, %gs in all; want a's 3s", n-holds, sum-held)
		}
	})
}
