package fencetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/object"
	"github.com/fence-lock/fence/guard/reject"
)

// TestObjectGuard is the conformance suite of fencing guards over object
// stores (package guard/object): every store's adapter (guard/s3,
// guard/azblob) runs it against a real server of its kind. It
// runs the guard suites above (TestGuard and the others) on the guard's
// manifest mode, and the per-object mode's own: stale and fresh writers
// racing, tombstones, sequencers, refusals counted; revisions; and the
// conformance check passing. open returns a guard on a store (or a prefix
// of one) of its own for each test, trusting the store (the suite checks
// it itself); store names it in the refusals' metric ("s3").
func TestObjectGuard(t *testing.T, store string, open func(tb testing.TB) *object.Guard) {
	t.Run("Check", func(t *testing.T) {
		g := open(t)
		rep, err := g.Check(t.Context())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		for _, c := range rep.Cases {
			t.Logf("%-15s ok  %8s  %s", c.Name, c.Took.Round(100_000), c.What)
		}
		t.Logf("the check took %s", rep.Took)
	})
	t.Run("Guard", func(t *testing.T) {
		TestGuard(t, func(t *testing.T) Guarded { return ObjectGuarded{open(t)} })
	})
	t.Run("Unfenced", func(t *testing.T) {
		TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) Guarded {
			g := open(t)
			g.Unfenced = u
			return ObjectGuarded{g}
		})
	})
	t.Run("Claims", func(t *testing.T) {
		g := open(t)
		TestGuardClaims(t, g.Claim, g.Fence)
	})
	t.Run("Rejections", func(t *testing.T) {
		g := open(t)
		TestGuardRejections(t, store, func(r *reject.Recorder) { g.Rejections = r }, g.Claim)
	})
	t.Run("Sequencer", func(t *testing.T) {
		g := open(t)
		write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
			if claim {
				return g.Claim(ctx, resource, token)
			}
			_, err := g.Write(ctx, resource, token, object.Change{Key: "k", Value: []byte("v")})
			return err
		}
		has := func(resource string) bool { _, ok, _ := g.Read(t.Context(), resource, "k"); return ok }
		fenceOf := func(resource string) fence.Token { return ObjectGuarded{g}.Fence(t, resource) }
		TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, has, fenceOf)
	})
	t.Run("StaleVsFresh", func(t *testing.T) {
		g := open(t)
		raceTokens(t, func(ctx context.Context, tok fence.Token) error {
			_, err := g.Write(ctx, "contended", tok, object.Change{Key: "k", Value: []byte(fmt.Sprint(tok))})
			return err
		}, func(top fence.Token) {
			item, _, err := g.Read(t.Context(), "contended", "k")
			if f, ferr := g.Fence(t.Context(), "contended"); ferr != nil || f != top {
				t.Fatalf("fence %d, %v; want the highest accepted token %d", f, ferr, top)
			}
			if err != nil || string(item.Value) != fmt.Sprint(top) || item.Token != top {
				t.Fatalf("value %q (token %d), %v; want the highest accepted write's %d", item.Value, item.Token, err, top)
			}
		})
	})
	t.Run("Revisions", func(t *testing.T) { testObjectRevisions(t, open(t)) })
	t.Run("Object", func(t *testing.T) { testObjectFenced(t, open(t)) })
	t.Run("ObjectStaleVsFresh", func(t *testing.T) {
		g := open(t)
		raceTokens(t, func(ctx context.Context, tok fence.Token) error {
			return g.PutObject(ctx, "obj", []byte(fmt.Sprint(tok)), tok)
		}, func(top fence.Token) {
			b, f, ok, err := g.GetObject(t.Context(), "obj")
			if err != nil || !ok || string(b) != fmt.Sprint(top) || f != top {
				t.Fatalf("GetObject=%q, %d, %v, %v; want the highest accepted write's %d", b, f, ok, err, top)
			}
		})
	})
	t.Run("ObjectSequencer", func(t *testing.T) {
		g := open(t)
		write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
			if claim {
				return g.DeleteObject(ctx, resource, token)
			}
			return g.PutObject(ctx, resource, []byte("v"), token)
		}
		has := func(resource string) bool { _, _, ok, _ := g.GetObject(t.Context(), resource); return ok }
		fenceOf := func(resource string) fence.Token { _, f, _, _ := g.GetObject(t.Context(), resource); return f }
		TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, has, fenceOf)
	})
	t.Run("ObjectRejections", func(t *testing.T) {
		g := open(t)
		TestGuardRejections(t, store, func(r *reject.Recorder) { g.Rejections = r }, g.DeleteObject)
	})
}

// ObjectGuarded adapts an object guard's manifest mode (Write, Read,
// Fence) to Guarded.
type ObjectGuarded struct{ G *object.Guard }

// Write implements Guarded.
func (a ObjectGuarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	var changes []object.Change
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range writes {
			if !yield(k) {
				return
			}
		}
	}) {
		changes = append(changes, object.Change{Key: k, Value: writes[k], Delete: writes[k] == nil})
	}
	_, err := a.G.Write(t.Context(), resource, token, changes...)
	return err
}

// Read implements Guarded.
func (a ObjectGuarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	t.Helper()
	item, ok, err := a.G.Read(t.Context(), resource, key)
	if err != nil {
		t.Fatalf("Read(%q, %q): %v", resource, key, err)
	}
	return item.Value, ok
}

// Fence implements Guarded.
func (a ObjectGuarded) Fence(t *testing.T, resource string) fence.Token {
	t.Helper()
	f, err := a.G.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

// raceTokens races 8 writers of 4 tokens each (1..32, interleaved) through
// write, and hands the highest accepted token to check: whatever the
// order, the store must end at that write.
func raceTokens(t *testing.T, write func(ctx context.Context, tok fence.Token) error, check func(top fence.Token)) {
	t.Helper()
	var mu sync.Mutex
	var accepted []fence.Token
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 4 {
				tok := fence.Token(1 + i*8 + w)
				err := write(t.Context(), tok)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, tok)
					mu.Unlock()
				case errors.Is(err, fence.ErrFenced), errors.Is(err, object.ErrContended):
				default:
					t.Errorf("write with token %d: %v", tok, err)
				}
			}
		})
	}
	wg.Wait()
	if len(accepted) == 0 {
		t.Fatal("no write was accepted")
	}
	check(slices.Max(accepted))
	t.Logf("%d of 32 writes accepted", len(accepted))
}

// testRevisions: each commit of a resource has the next revision, which
// Read gives with the token of the commit that wrote the key; a refused
// write takes none.
func testObjectRevisions(t *testing.T, g *object.Guard) {
	ctx := t.Context()
	for i, tc := range []struct {
		token   fence.Token
		changes []object.Change
	}{
		{3, []object.Change{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("1")}}},
		{4, []object.Change{{Key: "a", Value: []byte("2")}}},
		{4, nil},
	} {
		rev, err := g.Write(ctx, "r", tc.token, tc.changes...)
		if err != nil || rev != uint64(i+1) {
			t.Fatalf("write %d: rev %d, %v; want %d", i, rev, err, i+1)
		}
	}
	if _, err := g.Write(ctx, "r", 2, object.Change{Key: "a", Value: []byte("stale")}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a stale write: %v", err)
	}
	if rev, err := g.Write(ctx, "r", 5, object.Change{Key: "b", Delete: true}); err != nil || rev != 4 {
		t.Fatalf("a delete: rev %d, %v; want 4 (the refused write took none)", rev, err)
	}
	a, ok, err := g.Read(ctx, "r", "a")
	if err != nil || !ok || string(a.Value) != "2" || a.Rev != 2 || a.Token != 4 {
		t.Fatalf("Read(a)=%+v, %v, %v; want 2 at revision 2, token 4", a, ok, err)
	}
	if _, ok, err := g.Read(ctx, "r", "b"); ok || err != nil {
		t.Fatalf("Read(b) after its delete: found %v, %v", ok, err)
	}
	if keys, err := g.List(ctx, "r"); err != nil || !slices.Equal(keys, []string{"a"}) {
		t.Fatalf("List=%v, %v; want [a]", keys, err)
	}
}

// testObject fences one object: a newer token's write fences the older
// holder, whose write is refused and changes nothing; an equal token is a
// retry; a delete leaves a tombstone that keeps the fence, so the stale
// holder cannot create the object again.
func testObjectFenced(t *testing.T, g *object.Guard) {
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) (string, fence.Token, bool) {
		t.Helper()
		b, f, ok, err := g.GetObject(ctx, key)
		if err != nil {
			t.Fatalf("GetObject(%q): %v", key, err)
		}
		return string(b), f, ok
	}
	must(g.PutObject(ctx, "reports/q3.csv", []byte("A1"), 41))
	must(g.PutObject(ctx, "reports/q3.csv", []byte("B"), 42))
	WantFenced(t, g.PutObject(ctx, "reports/q3.csv", []byte("A2"), 41), "reports/q3.csv", 41, 42)
	if v, f, ok := get("reports/q3.csv"); !ok || v != "B" || f != 42 {
		t.Fatalf("GetObject=%q, %d, %v; want B, fence 42", v, f, ok)
	}
	must(g.PutObject(ctx, "reports/q3.csv", []byte("B again"), 42))
	WantFenced(t, g.DeleteObject(ctx, "reports/q3.csv", 41), "reports/q3.csv", 41, 42)
	must(g.DeleteObject(ctx, "reports/q3.csv", 43))
	if v, f, ok := get("reports/q3.csv"); ok || v != "" || f != 43 {
		t.Fatalf("GetObject after the delete=%q, %d, %v; want absent, fence 43", v, f, ok)
	}
	WantFenced(t, g.PutObject(ctx, "reports/q3.csv", []byte("stale"), 42), "reports/q3.csv", 42, 43)
	must(g.PutObject(ctx, "reports/q3.csv", []byte("C"), 44))
	if v, f, ok := get("reports/q3.csv"); !ok || v != "C" || f != 44 {
		t.Fatalf("GetObject=%q, %d, %v; want C, fence 44", v, f, ok)
	}
	// A delete of an absent object fences it too.
	must(g.DeleteObject(ctx, "never", 7))
	WantFenced(t, g.PutObject(ctx, "never", []byte("stale"), 6), "never", 6, 7)

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
