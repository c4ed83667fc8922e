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

// getObject returns the object key through g, failing the test on an error.
func getObject(t *testing.T, g *s3guard.Guard, key string) (string, fence.Token, bool) {
	t.Helper()
	b, f, ok, err := g.GetObject(t.Context(), key)
	if err != nil {
		t.Fatalf("GetObject(%q): %v", key, err)
	}
	return string(b), f, ok
}

// TestObject fences one object: a newer token's write fences the older
// holder, whose write is refused and changes nothing; an equal token is a
// retry; a delete leaves a tombstone that keeps the fence, so the stale
// holder cannot create the object again.
func TestObject(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.PutObject(ctx, "reports/q3.csv", []byte("A1"), 41))
	must(g.PutObject(ctx, "reports/q3.csv", []byte("B"), 42))
	fencetest.WantFenced(t, g.PutObject(ctx, "reports/q3.csv", []byte("A2"), 41), "reports/q3.csv", 41, 42)
	if v, f, ok := getObject(t, g, "reports/q3.csv"); !ok || v != "B" || f != 42 {
		t.Fatalf("GetObject=%q, %d, %v; want B, fence 42", v, f, ok)
	}
	must(g.PutObject(ctx, "reports/q3.csv", []byte("B again"), 42))
	fencetest.WantFenced(t, g.DeleteObject(ctx, "reports/q3.csv", 41), "reports/q3.csv", 41, 42)
	must(g.DeleteObject(ctx, "reports/q3.csv", 43))
	if v, f, ok := getObject(t, g, "reports/q3.csv"); ok || v != "" || f != 43 {
		t.Fatalf("GetObject after the delete=%q, %d, %v; want absent, fence 43", v, f, ok)
	}
	fencetest.WantFenced(t, g.PutObject(ctx, "reports/q3.csv", []byte("stale"), 42), "reports/q3.csv", 42, 43)
	must(g.PutObject(ctx, "reports/q3.csv", []byte("C"), 44))
	if v, f, ok := getObject(t, g, "reports/q3.csv"); !ok || v != "C" || f != 44 {
		t.Fatalf("GetObject=%q, %d, %v; want C, fence 44", v, f, ok)
	}
	// A delete of an absent object fences it too.
	must(g.DeleteObject(ctx, "never", 7))
	fencetest.WantFenced(t, g.PutObject(ctx, "never", []byte("stale"), 6), "never", 6, 7)

	for _, tc := range []struct {
		key   string
		token fence.Token
		want  error
	}{
		{"manifests/x", 1, fence.ErrBadRequest},
		{"data/x", 1, fence.ErrBadRequest},
		{".fence-check/x", 1, fence.ErrBadRequest},
		{"a//b", 1, fence.ErrBadRequest},
		{"ok", 0, fence.ErrInvalidToken},
		{"ok", fence.MaxToken + 1, fence.ErrInvalidToken},
	} {
		if err := g.PutObject(ctx, tc.key, []byte("x"), tc.token); !errors.Is(err, tc.want) {
			t.Errorf("PutObject(%q, %d): %v, want %v", tc.key, tc.token, err, tc.want)
		}
	}
}

// TestObject_StaleVsFresh races writers with different tokens on one
// object: the fence ends at the highest accepted token, and the object
// holds that write.
func TestObject_StaleVsFresh(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	var mu sync.Mutex
	var accepted []fence.Token
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 4 {
				tok := fence.Token(1 + i*8 + w)
				err := g.PutObject(ctx, "obj", []byte(fmt.Sprint(tok)), tok)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, tok)
					mu.Unlock()
				case errors.Is(err, fence.ErrFenced), errors.Is(err, s3guard.ErrContended):
				default:
					t.Errorf("PutObject(%d): %v", tok, err)
				}
			}
		})
	}
	wg.Wait()
	if len(accepted) == 0 {
		t.Fatal("no write was accepted")
	}
	top := slices.Max(accepted)
	if v, f, ok := getObject(t, g, "obj"); !ok || v != fmt.Sprint(top) || f != top {
		t.Fatalf("GetObject=%q, %d, %v; want the highest accepted write's %d", v, f, ok, top)
	}
	t.Logf("%d of 32 writes accepted, fence %d", len(accepted), top)
}

func TestObject_Sequencer(t *testing.T) {
	g := newGuard(t)
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return g.DeleteObject(ctx, resource, token)
		}
		return g.PutObject(ctx, resource, []byte("v"), token)
	}
	has := func(resource string) bool { _, _, ok := getObject(t, g, resource); return ok }
	fenceOf := func(resource string) fence.Token { _, f, _ := getObject(t, g, resource); return f }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, has, fenceOf)
}

func TestObject_Rejections(t *testing.T) {
	g := newGuard(t)
	fencetest.TestGuardRejections(t, "s3", func(r *reject.Recorder) { g.Rejections = r }, g.DeleteObject)
}

// TestObject_Untrusted: a guard whose endpoint fails the conformance check
// writes nothing through it, and says which case failed.
func TestObject_Untrusted(t *testing.T) {
	_, bucket, prefix := newBucket(t)
	g := s3guard.NewGuard(headerDropper(t), bucket)
	g.Prefix = prefix
	for range 2 { // the verdict is kept
		err := g.PutObject(t.Context(), "k", []byte("v"), 1)
		if !errors.Is(err, s3guard.ErrEndpoint) {
			t.Fatalf("PutObject through an endpoint that drops the conditional headers: %v, want ErrEndpoint", err)
		}
	}
	if _, err := g.Write(t.Context(), "r", 1, s3guard.Change{Key: "k", Value: []byte("v")}); !errors.Is(err, s3guard.ErrEndpoint) {
		t.Fatalf("Write: %v, want ErrEndpoint", err)
	}
	if _, _, ok := getObject(t, g, "k"); ok {
		t.Fatal("the object was written through an untrusted endpoint")
	}
}
