package reject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRecorder(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	pg, err := New("postgres", slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := New("redis", nil, reg) // the same metric, another store
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fenced := fmt.Errorf("postgres: run: %w", &fence.FencedError{Resource: "orders", Presented: 41, LastFence: 42})
	if got := pg.Observe(ctx, "run", "orders", 41, fenced); got != fenced {
		t.Fatalf("Observe returned %v, want its error unchanged", got)
	}
	pg.Observe(ctx, "claim", "orders", 1, fmt.Errorf("x: %w", fence.ErrInvalidSequencer))
	pg.Observe(ctx, "run", "orders", 50, errors.New("connection reset")) // not a rejection
	pg.Observe(ctx, "run", "orders", 50, nil)
	rd.Observe(ctx, "apply", "orders", 3, &fence.FencedError{Resource: "orders", Presented: 3, LastFence: 4})

	for _, c := range []struct {
		store, reason string
		want          float64
	}{{"postgres", "fenced", 1}, {"postgres", "invalid_sequencer", 1}, {"postgres", "invalid_token", 0}, {"redis", "fenced", 1}} {
		if got := testutil.ToFloat64(pg.total.WithLabelValues(c.store, c.reason)); got != c.want {
			t.Errorf("%s{store=%s,reason=%s} = %g, want %g", MetricName, c.store, c.reason, got, c.want)
		}
	}
	out := logs.String()
	if strings.Count(out, "guarded write rejected") != 2 || !strings.Contains(out, "presented=41") || !strings.Contains(out, "last_fence=42") {
		t.Fatalf("logs:\n%s", out)
	}
	var none *Recorder
	none.Observe(ctx, "run", "r", 1, fenced) // records nothing, no panic
}
