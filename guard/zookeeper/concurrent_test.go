package zookeeper_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/fence-lock/fence/guard/zookeeper"
)

// TestGuard_ConcurrentHolders races 32 holders whose tokens come from one
// counter, as a lock service grants them: each takes a token, claims it
// half of the time (as a grant does), and writes its token into one znode
// through the guard. No write may be accepted with a token below one
// accepted before it was sent; the fence and the znode end at the highest
// accepted token. Then a stale holder and a fresh one write at once: the
// stale one is refused, the fresh one commits.
func TestGuard_ConcurrentHolders(t *testing.T) {
	const holders, rounds = 32, 6
	g, data := newGuard(t)
	ctx := t.Context()
	key := data + "/balance"
	var next atomic.Uint64 // the lock service's grants
	stale := fence.Token(next.Add(1))
	if _, err := g.Apply(ctx, "acct", stale, zookeeper.Create(key, []byte(stale.String()))); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		token      fence.Token
		call, done time.Time
	}
	var (
		mu     sync.Mutex
		acks   []ack
		fenced atomic.Int64
		wg     sync.WaitGroup
	)
	start := make(chan struct{})
	for h := range holders {
		wg.Go(func() {
			<-start
			for i := range rounds {
				tok := fence.Token(next.Add(1))
				if (h+i)%2 == 0 {
					if err := g.Claim(ctx, "acct", tok); errors.Is(err, fence.ErrFenced) {
						fenced.Add(1)
						continue
					} else if err != nil {
						t.Errorf("Claim(%d): %v", tok, err)
						return
					}
				}
				call := time.Now()
				_, err := g.Apply(ctx, "acct", tok, zookeeper.Set(key, []byte(tok.String())))
				done := time.Now()
				switch {
				case err == nil:
					mu.Lock()
					acks = append(acks, ack{tok, call, done})
					mu.Unlock()
				case errors.Is(err, fence.ErrFenced):
					fenced.Add(1)
				default:
					t.Errorf("Apply(%d): %v", tok, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	var top fence.Token
	for _, a := range acks {
		top = max(top, a.token)
		for _, b := range acks {
			if b.done.Before(a.call) && b.token > a.token {
				t.Fatalf("token %d accepted after token %d had been", a.token, b.token)
			}
		}
	}
	t.Logf("%d writes accepted, %d refused", len(acks), fenced.Load())
	if len(acks) == 0 {
		t.Fatal("no write accepted")
	}
	if f, err := g.Fence(ctx, "acct"); err != nil || f < top {
		t.Fatalf("Fence=%d, %v; want at least the highest accepted token %d", f, err, top)
	}
	if got, _ := read(t, key); string(got) != top.String() {
		t.Fatalf("balance=%q, want the highest accepted token %d", got, top)
	}

	// A stale holder (the first token) and a fresh one (a new grant) race.
	fresh := fence.Token(next.Add(1))
	errs := make([]error, 2)
	wg.Go(func() { _, errs[0] = g.Apply(ctx, "acct", stale, zookeeper.Set(key, []byte("stale"))) })
	wg.Go(func() { _, errs[1] = g.Apply(ctx, "acct", fresh, zookeeper.Set(key, []byte("fresh"))) })
	wg.Wait()
	var fe *fence.FencedError
	if !errors.As(errs[0], &fe) || fe.Presented != stale || fe.LastFence <= stale {
		t.Fatalf("stale holder's write: %v, want *fence.FencedError", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("fresh holder's write: %v", errs[1])
	}
	if got, _ := read(t, key); string(got) != "fresh" {
		t.Fatalf("balance=%q, want fresh", got)
	}
	if f, err := g.Fence(ctx, "acct"); err != nil || f != fresh {
		t.Fatalf("Fence=%d, %v; want %d", f, err, fresh)
	}
}

// TestGuard_Rejections checks that the guard records its refusals, and only
// them, in Rejections.
func TestGuard_Rejections(t *testing.T) {
	g, data := newGuard(t)
	ctx := t.Context()
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	rec, err := reject.New("zookeeper", slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	g.Rejections = rec
	if err := g.Claim(ctx, "orders", 42); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Apply(ctx, "orders", 41, zookeeper.Create(data+"/k", nil)); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("stale Apply: %v", err)
	}
	if err := g.Claim(ctx, "orders", 7); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("stale Claim: %v", err)
	}
	if err := g.Claim(ctx, "orders", 0); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("Claim(0): %v", err)
	}
	if _, err := g.Apply(ctx, "orders", 43, zookeeper.Delete(g.FencePath("orders"))); !errors.Is(err, fence.ErrBadRequest) {
		t.Fatalf("Apply(delete the fence): %v", err)
	}
	if _, err := g.Apply(ctx, "orders", 43, zookeeper.Set(data+"/missing", nil)); err == nil {
		t.Fatal("Apply(set a missing znode) succeeded") // ZooKeeper's error: not a rejection
	}
	if _, err := g.Apply(ctx, "orders", 43, zookeeper.Create(data+"/k", nil)); err != nil {
		t.Fatal(err)
	}
	g.Keys = fence.KeySet{}
	if err := g.Claim(ctx, "orders", 44); !errors.Is(err, fence.ErrInvalidSequencer) {
		t.Fatalf("Claim without a sequencer: %v", err)
	}
	const want = `
# HELP fence_guard_rejections_total Writes refused by fencing guards, by store and reason (fenced, invalid_sequencer, invalid_token, bad_request).
# TYPE fence_guard_rejections_total counter
fence_guard_rejections_total{reason="bad_request",store="zookeeper"} 1
fence_guard_rejections_total{reason="fenced",store="zookeeper"} 2
fence_guard_rejections_total{reason="invalid_sequencer",store="zookeeper"} 1
fence_guard_rejections_total{reason="invalid_token",store="zookeeper"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), reject.MetricName); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Count(out, "guarded write rejected") != 5 || !strings.Contains(out, "op=apply") ||
		!strings.Contains(out, "presented=41") || !strings.Contains(out, "last_fence=42") {
		t.Fatalf("logs:\n%s", out)
	}
}
