package fencetest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// Guarded is what TestGuard drives: a store with a fencing guard in front of
// it, as a guard's test adapts it. Tokens are any valid tokens: guards check
// only token >= last fence (they do not know which tokens a lock service
// issued).
type Guarded interface {
	// Write applies writes (key to value; a nil value deletes the key) to
	// resource in one atomic step, if token >= the resource's fence, and
	// raises the fence to token. It returns an error wrapping
	// *fence.FencedError when the token is stale; then nothing changed.
	Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error
	// Read returns the value of key in resource, and whether it exists.
	Read(t *testing.T, resource, key string) ([]byte, bool)
	// Fence returns the resource's last fence, 0 if never fenced.
	Fence(t *testing.T, resource string) fence.Token
}

// TestGuard is the conformance suite of fencing guards (PostgreSQL, Redis,
// etcd, and fence's own storage): the same semantics as fence storage, in
// the guarded store.
func TestGuard(t *testing.T, open func(t *testing.T) Guarded) {
	t.Run("StaleHolder", func(t *testing.T) {
		g := open(t)
		mustWrite(t, g, "orders", 41, map[string][]byte{"total": []byte("A1")})
		mustWrite(t, g, "orders", 42, map[string][]byte{"total": []byte("B")}) // B, the new holder
		err := g.Write(t, "orders", 41, map[string][]byte{"total": []byte("A2")})
		var fe *fence.FencedError
		if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || fe.Presented != 41 || fe.LastFence != 42 || fe.Resource != "orders" {
			t.Fatalf("stale write: err=%v, want *fence.FencedError{orders, 41, 42}", err)
		}
		wantValue(t, g, "orders", "total", "B")
		if f := g.Fence(t, "orders"); f != 42 {
			t.Fatalf("Fence=%d, want 42", f)
		}
	})

	t.Run("EqualTokenRetry", func(t *testing.T) {
		g := open(t)
		mustWrite(t, g, "r", 7, map[string][]byte{"k": []byte("1")})
		mustWrite(t, g, "r", 7, map[string][]byte{"k": []byte("2")})
		wantValue(t, g, "r", "k", "2")
		if f := g.Fence(t, "r"); f != 7 {
			t.Fatalf("Fence=%d, want 7", f)
		}
	})

	t.Run("NeverFenced", func(t *testing.T) {
		g := open(t)
		if f := g.Fence(t, "fresh"); f != 0 {
			t.Fatalf("Fence=%d for a new resource, want 0", f)
		}
		mustWrite(t, g, "fresh", 1, map[string][]byte{"k": []byte("v")})
		if f := g.Fence(t, "fresh"); f != 1 {
			t.Fatalf("Fence=%d, want 1", f)
		}
	})

	t.Run("RejectionChangesNothing", func(t *testing.T) {
		g := open(t)
		mustWrite(t, g, "r", 10, map[string][]byte{"a": []byte("1"), "b": []byte("2")})
		err := g.Write(t, "r", 9, map[string][]byte{"a": []byte("x"), "b": nil, "c": []byte("new")})
		if !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("err=%v, want ErrFenced", err)
		}
		wantValue(t, g, "r", "a", "1")
		wantValue(t, g, "r", "b", "2")
		if _, ok := g.Read(t, "r", "c"); ok {
			t.Fatal("a rejected write created a key")
		}
		if f := g.Fence(t, "r"); f != 10 {
			t.Fatalf("Fence=%d after a rejected write, want 10", f)
		}
	})

	t.Run("MultiKeyAllOrNothing", func(t *testing.T) {
		g := open(t)
		mustWrite(t, g, "r", 1, map[string][]byte{"a": []byte("1"), "b": []byte("1"), "gone": []byte("x")})
		mustWrite(t, g, "r", 2, map[string][]byte{"a": []byte("2"), "b": []byte("2"), "gone": nil})
		wantValue(t, g, "r", "a", "2")
		wantValue(t, g, "r", "b", "2")
		if _, ok := g.Read(t, "r", "gone"); ok {
			t.Fatal("a delete in a multi-key write did not apply")
		}
	})

	t.Run("ResourcesIndependent", func(t *testing.T) {
		g := open(t)
		mustWrite(t, g, "x", 100, map[string][]byte{"k": []byte("x")})
		mustWrite(t, g, "y", 1, map[string][]byte{"k": []byte("y")})
		if fx, fy := g.Fence(t, "x"), g.Fence(t, "y"); fx != 100 || fy != 1 {
			t.Fatalf("fences %d, %d; want 100, 1", fx, fy)
		}
	})

	t.Run("ConcurrentRandomTokens", func(t *testing.T) { testGuardConcurrent(t, open(t)) })
}

// testGuardConcurrent runs writers with random tokens on two resources. An
// accepted write must not carry a token lower than one accepted before it was
// sent; the fence ends at the highest accepted token; every key holds the
// value of an accepted write with that highest token, written by one
// write (the two keys of one write agree).
func testGuardConcurrent(t *testing.T, g Guarded) {
	const writers, perWriter = 8, 25
	type accepted struct {
		resource   string
		token      fence.Token
		call, done time.Time
	}
	var (
		mu   sync.Mutex
		acks []accepted
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			<-start
			for i := range perWriter {
				resource := []string{"p", "q"}[rng.IntN(2)]
				token := fence.Token(1 + rng.IntN(200))
				value := []byte(strconv.Itoa(int(token)) + "/" + strconv.Itoa(w) + "-" + strconv.Itoa(i))
				call := time.Now()
				err := g.Write(t, resource, token, map[string][]byte{"k1": value, "k2": value})
				done := time.Now()
				switch {
				case err == nil:
					mu.Lock()
					acks = append(acks, accepted{resource, token, call, done})
					mu.Unlock()
				case errors.Is(err, fence.ErrFenced):
				default:
					t.Errorf("write: %v", err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, resource := range []string{"p", "q"} {
		var top fence.Token
		for _, a := range acks {
			if a.resource != resource {
				continue
			}
			top = max(top, a.token)
			for _, b := range acks {
				if b.resource == resource && b.done.Before(a.call) && b.token > a.token {
					t.Fatalf("%s: token %d accepted after token %d had been", resource, a.token, b.token)
				}
			}
		}
		if top == 0 {
			continue
		}
		if f := g.Fence(t, resource); f != top {
			t.Fatalf("%s: Fence=%d, want the highest accepted token %d", resource, f, top)
		}
		v1, _ := g.Read(t, resource, "k1")
		v2, _ := g.Read(t, resource, "k2")
		if !bytes.Equal(v1, v2) || !bytes.HasPrefix(v1, []byte(strconv.Itoa(int(top))+"/")) {
			t.Fatalf("%s: k1=%q k2=%q, want one write's value with token %d in both", resource, v1, v2, top)
		}
	}
	if len(acks) == 0 {
		t.Fatal("no write accepted")
	}
}

func mustWrite(t *testing.T, g Guarded, resource string, token fence.Token, writes map[string][]byte) {
	t.Helper()
	if err := g.Write(t, resource, token, writes); err != nil {
		t.Fatalf("Write(%q, token %d): %v", resource, token, err)
	}
}

func wantValue(t *testing.T, g Guarded, resource, key, want string) {
	t.Helper()
	got, ok := g.Read(t, resource, key)
	if !ok || string(got) != want {
		t.Fatalf("%s/%s = %q (exists %v), want %q", resource, key, got, ok, want)
	}
}

// TestGuardUnfenced checks a guard's Unfenced option (fence.Unfenced): open
// returns the guard with u set. A best-effort resource's write with token 0
// is applied without the fence (not raised); one with a token is checked
// and raises it, as anywhere else; and token 0 on any other resource is
// refused with fence.ErrInvalidToken, changing nothing.
func TestGuardUnfenced(t *testing.T, open func(t *testing.T, u fence.Unfenced) Guarded) {
	g := open(t, fence.Unfenced{"cache/"})
	if err := g.Write(t, "cache/a", 0, map[string][]byte{"k": []byte("v1")}); err != nil {
		t.Fatalf("an unfenced write of a best-effort resource: %v", err)
	}
	wantValue(t, g, "cache/a", "k", "v1")
	if f := g.Fence(t, "cache/a"); f != 0 {
		t.Fatalf("fence %d after an unfenced write, want 0: it is neither checked nor raised", f)
	}
	mustWrite(t, g, "cache/a", 5, map[string][]byte{"k": []byte("v2")})
	if f := g.Fence(t, "cache/a"); f != 5 {
		t.Fatalf("fence %d after a write with token 5, want 5", f)
	}
	if err := g.Write(t, "cache/a", 3, map[string][]byte{"k": []byte("stale")}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a stale token on a best-effort resource: %v, want fenced", err)
	}
	wantValue(t, g, "cache/a", "k", "v2")
	if err := g.Write(t, "cache/a", 0, map[string][]byte{"k": []byte("v3")}); err != nil {
		t.Fatalf("an unfenced write after the fence was raised: %v", err)
	}
	wantValue(t, g, "cache/a", "k", "v3")
	if f := g.Fence(t, "cache/a"); f != 5 {
		t.Fatalf("fence %d after an unfenced write, want 5 still", f)
	}
	if err := g.Write(t, "orders", 0, map[string][]byte{"k": []byte("x")}); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("token 0 on a resource that is not best-effort: %v, want invalid_token", err)
	}
	if _, ok := g.Read(t, "orders", "k"); ok {
		t.Fatal("a refused write changed orders")
	}
}

// WantState fails t unless g's fence of resource is lastFence and key holds
// value ("" for absent).
func WantState(t *testing.T, g Guarded, resource string, lastFence fence.Token, key, value string) {
	t.Helper()
	if f := g.Fence(t, resource); f != lastFence {
		t.Fatalf("Fence=%d, want %d", f, lastFence)
	}
	got, ok := g.Read(t, resource, key)
	if value == "" && ok || value != "" && string(got) != value {
		t.Fatalf("%s/%s=%q (exists %v), want %q", resource, key, got, ok, value)
	}
}

// WantFenced fails t unless err is exactly the *fence.FencedError of
// resource, presented and lastFence.
func WantFenced(t testing.TB, err error, resource string, presented, lastFence fence.Token) {
	t.Helper()
	var fe *fence.FencedError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || *fe != (fence.FencedError{Resource: resource, Presented: presented, LastFence: lastFence}) {
		t.Fatalf("err=%v, want *fence.FencedError{%q, %d, %d}", err, resource, presented, lastFence)
	}
}

// TestGuardClaims checks a guard's Claim and Fence on resource "r" with
// tokens at the edges of the range: a claim raises the fence, an equal
// token is a retry, a lower one is a *fence.FencedError naming the fence
// that refused it, and nothing lowers the fence.
func TestGuardClaims(t *testing.T, claim func(ctx context.Context, resource string, token fence.Token) error,
	fenceOf func(ctx context.Context, resource string) (fence.Token, error)) {
	t.Helper()
	ctx := t.Context()
	for _, tc := range []struct {
		token, fence fence.Token
		fenced       bool
	}{
		{1, 1, false},
		{fence.MaxToken - 1, fence.MaxToken - 1, false},
		{fence.MaxToken - 1, fence.MaxToken - 1, false}, // retry
		{1 << 62, fence.MaxToken - 1, true},
		{fence.MaxToken, fence.MaxToken, false},
		{fence.MaxToken - 1, fence.MaxToken, true},
	} {
		err := claim(ctx, "r", tc.token)
		var fe *fence.FencedError
		if tc.fenced != errors.As(err, &fe) || (!tc.fenced && err != nil) {
			t.Fatalf("Claim(%d): %v, want fenced=%v", tc.token, err, tc.fenced)
		}
		if tc.fenced && (fe.LastFence != tc.fence || fe.Presented != tc.token || fe.Resource != "r") {
			t.Fatalf("Claim(%d): %+v, want LastFence %d", tc.token, fe, tc.fence)
		}
		if f, err := fenceOf(ctx, "r"); err != nil || f != tc.fence {
			t.Fatalf("after Claim(%d): Fence=%d, %v; want %d", tc.token, f, err, tc.fence)
		}
	}
}
