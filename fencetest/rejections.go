package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/prometheus/client_golang/prometheus"
)

// TestGuardRejections checks that a guard logs and counts its refusals in
// the reject.Recorder it is given: set gives the guard its Recorder, and
// claim raises resource's fence to token through the guard. A stale claim
// counts as fenced, an accepted one counts nothing.
func TestGuardRejections(t *testing.T, store string, set func(*reject.Recorder), claim func(ctx context.Context, resource string, token fence.Token) error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := reject.New(store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	set(rec)
	count := func(reason string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if mf.GetName() == reject.MetricName && labels["store"] == store && labels["reason"] == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	ctx := context.Background()
	if err := claim(ctx, "rejections", 5); err != nil {
		t.Fatal(err)
	}
	if err := claim(ctx, "rejections", 4); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a stale claim: %v, want fenced", err)
	}
	if err := claim(ctx, "rejections", 0); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("token 0: %v, want invalid_token", err)
	}
	if got := count(reject.ReasonFenced); got != 1 {
		t.Errorf("%s{store=%q,reason=fenced} = %g, want 1", reject.MetricName, store, got)
	}
	if got := count(reject.ReasonInvalidToken); got != 1 {
		t.Errorf("%s{store=%q,reason=invalid_token} = %g, want 1", reject.MetricName, store, got)
	}
}
