package s3_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/reject"
	s3guard "github.com/fence-lock/fence/guard/s3"
)

// newGuard returns a guard on a bucket of its own, that trusts the
// endpoint (TestCheck checks it) so that each test does not run the check.
func newGuard(tb testing.TB) *s3guard.Guard {
	tb.Helper()
	api, bucket, prefix := newBucket(tb)
	g := s3guard.NewGuard(api, bucket)
	g.Prefix, g.TrustEndpoint = prefix, true
	return g
}

// guarded adapts a Guard's many-objects mode (Write, Read, Fence) to
// fencetest.Guarded.
type guarded struct{ g *s3guard.Guard }

func (a guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	var changes []s3guard.Change
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range writes {
			if !yield(k) {
				return
			}
		}
	}) {
		changes = append(changes, s3guard.Change{Key: k, Value: writes[k], Delete: writes[k] == nil})
	}
	return a.g.Write(t.Context(), resource, token, changes...)
}

func (a guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	t.Helper()
	v, ok, err := a.g.Read(t.Context(), resource, key)
	if err != nil {
		t.Fatalf("Read(%q, %q): %v", resource, key, err)
	}
	return v, ok
}

func (a guarded) Fence(t *testing.T, resource string) fence.Token {
	t.Helper()
	f, err := a.g.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

func TestGuard(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded { return guarded{newGuard(t)} })
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		g := newGuard(t)
		g.Unfenced = u
		return guarded{g}
	})
}

func TestGuard_Claims(t *testing.T) {
	g := newGuard(t)
	fencetest.TestGuardClaims(t, g.Claim, g.Fence)
}

func TestGuard_Rejections(t *testing.T) {
	g := newGuard(t)
	fencetest.TestGuardRejections(t, "s3", func(r *reject.Recorder) { g.Rejections = r }, g.Claim)
}

func TestGuard_Sequencer(t *testing.T) {
	g := newGuard(t)
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return g.Claim(ctx, resource, token)
		}
		return g.Write(ctx, resource, token, s3guard.Change{Key: "k", Value: []byte("v")})
	}
	has := func(resource string) bool { _, ok, _ := g.Read(t.Context(), resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return guarded{g}.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, has, fenceOf)
}

// TestGuard_StaleVsFresh races writers with different tokens on one
// resource: whatever the order, the fence ends at the highest token, no
// write is accepted with a token below one accepted before it, and the
// value is the last accepted write's.
func TestGuard_StaleVsFresh(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	var mu sync.Mutex
	var accepted []fence.Token // in the order the writes returned
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 4 {
				tok := fence.Token(1 + i*8 + w)
				err := g.Write(ctx, "contended", tok, s3guard.Change{Key: "k", Value: []byte(fmt.Sprint(tok))})
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, tok)
					mu.Unlock()
				case errors.Is(err, fence.ErrFenced), errors.Is(err, s3guard.ErrContended):
				default:
					t.Errorf("Write(%d): %v", tok, err)
				}
			}
		})
	}
	wg.Wait()
	if len(accepted) == 0 {
		t.Fatal("no write was accepted")
	}
	f, err := g.Fence(ctx, "contended")
	if err != nil {
		t.Fatal(err)
	}
	top := slices.Max(accepted)
	if f != top {
		t.Fatalf("fence %d, want the highest accepted token %d", f, top)
	}
	v, _, err := g.Read(ctx, "contended", "k")
	if err != nil || string(v) != fmt.Sprint(top) {
		t.Fatalf("value %q, %v; want the highest accepted write's %d", v, err, top)
	}
	t.Logf("%d of 32 writes accepted, fence %d", len(accepted), f)
}
