package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	_, err := a.g.Write(t.Context(), resource, token, changes...)
	return err
}

func (a guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	t.Helper()
	item, ok, err := a.g.Read(t.Context(), resource, key)
	if err != nil {
		t.Fatalf("Read(%q, %q): %v", resource, key, err)
	}
	return item.Value, ok
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
		_, err := g.Write(ctx, resource, token, s3guard.Change{Key: "k", Value: []byte("v")})
		return err
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
				_, err := g.Write(ctx, "contended", tok, s3guard.Change{Key: "k", Value: []byte(fmt.Sprint(tok))})
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
	item, _, err := g.Read(ctx, "contended", "k")
	if err != nil || string(item.Value) != fmt.Sprint(top) || item.Token != top {
		t.Fatalf("value %q (token %d), %v; want the highest accepted write's %d", item.Value, item.Token, err, top)
	}
	t.Logf("%d of 32 writes accepted, fence %d", len(accepted), f)
}

// TestGuard_Revisions: each commit of a resource has the next revision,
// which Read gives with the token of the commit that wrote the key; a
// refused write takes none.
func TestGuard_Revisions(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	for i, tc := range []struct {
		token   fence.Token
		changes []s3guard.Change
	}{
		{3, []s3guard.Change{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("1")}}},
		{4, []s3guard.Change{{Key: "a", Value: []byte("2")}}},
		{4, nil},
	} {
		rev, err := g.Write(ctx, "r", tc.token, tc.changes...)
		if err != nil || rev != uint64(i+1) {
			t.Fatalf("write %d: rev %d, %v; want %d", i, rev, err, i+1)
		}
	}
	if _, err := g.Write(ctx, "r", 2, s3guard.Change{Key: "a", Value: []byte("stale")}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a stale write: %v", err)
	}
	if rev, err := g.Write(ctx, "r", 5, s3guard.Change{Key: "b", Delete: true}); err != nil || rev != 4 {
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

// TestGuard_LostAnswerNotResent: a commit whose answer is lost (here a 503
// from a proxy that never forwarded it) is sent once, not again by the
// SDK, and returned as an error that is neither a refusal nor contention:
// its outcome is the caller's to find out.
func TestGuard_LostAnswerNotResent(t *testing.T) {
	_, bucket, prefix := newBucket(t)
	target, err := url.Parse(server.S3)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var manifestPuts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			manifestPuts.Add(1)
			http.Error(w, "SlowDown", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g := s3guard.NewGuard(newClient(srv.URL), bucket)
	g.Prefix, g.TrustEndpoint = prefix, true
	_, err = g.Write(t.Context(), "r", 1, s3guard.Change{Key: "k", Value: []byte("v")})
	if err == nil || errors.Is(err, fence.ErrFenced) || errors.Is(err, s3guard.ErrContended) {
		t.Fatalf("Write with its commit's answer lost: %v, want the endpoint's error", err)
	}
	if n := manifestPuts.Load(); n != 1 {
		t.Fatalf("the commit was sent %d times, want once", n)
	}
}
