package fencetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// TestStore checks that the backends open returns follow the rules of fenced
// storage: the token check, conditions, transactions, the store-wide
// revision, and that rejections change nothing. open is called once per
// subtest and must return a new, empty backend, closed by t.Cleanup.
func TestStore(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("Put", func(t *testing.T) { testPut(t, open) })
	t.Run("Get", func(t *testing.T) { testGet(t, open) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open) })
	t.Run("Claim", func(t *testing.T) { testClaim(t, open) })
	t.Run("Fence", func(t *testing.T) { testFence(t, open) })
	t.Run("Txn", func(t *testing.T) { testTxn(t, open) })
	t.Run("Revision", func(t *testing.T) { testRevision(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
}

func testPut(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		tok := grant(t, b, "orders", "A")
		r1 := put(t, b, "orders", "o-1", "v1", tok, fence.Cond{})
		if r1.Rev == 0 {
			t.Fatalf("Rev=%d, want > 0", r1.Rev)
		}
		wantResult(t, "Put", r1, r1.Rev, tok, "A")
		wantItem(t, b, "orders", "o-1", "v1", r1.Rev, tok)
		wantFence(t, b, "orders", tok)

		// Keys may contain '/' and any printable UTF-8; values may be empty.
		r2 := put(t, b, "orders", "eu/o-2/ä €", "", tok, fence.Cond{})
		wantResult(t, "Put", r2, r1.Rev+1, tok, "A")
		wantItem(t, b, "orders", "eu/o-2/ä €", "", r2.Rev, tok)
		wantItem(t, b, "orders", "o-1", "v1", r1.Rev, tok)
	})

	// A holder retrying with the same token is accepted: equal to the fence is not stale.
	t.Run("SameToken", func(t *testing.T) {
		b := open(t)
		tok := grant(t, b, "orders", "A")
		r1 := put(t, b, "orders", "o-1", "v1", tok, fence.Cond{})
		r2 := put(t, b, "orders", "o-1", "v2", tok, fence.Cond{})
		wantResult(t, "second Put", r2, r1.Rev+1, tok, "A")
		wantItem(t, b, "orders", "o-1", "v2", r2.Rev, tok)
		wantFence(t, b, "orders", tok)
	})

	// Holder names the lease holder while the token is the recorded lease, and
	// is empty once the lease is over, though the token is still accepted.
	t.Run("Holder", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		tok := grant(t, b, "orders", "A")
		r := put(t, b, "orders", "o-1", "v1", tok, fence.Cond{})
		wantResult(t, "Put", r, r.Rev, tok, "A")
		if _, err := b.Refresh(ctx, "orders", tok, testTTL, time.Now().Add(testTTL)); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		r = put(t, b, "orders", "o-1", "v2", tok, fence.Cond{})
		wantResult(t, "Put after Refresh", r, r.Rev, tok, "A")
		if _, err := b.End(ctx, "orders", tok); err != nil {
			t.Fatalf("End: %v", err)
		}
		r = put(t, b, "orders", "o-1", "v3", tok, fence.Cond{})
		wantResult(t, "Put after End", r, r.Rev, tok, "")
		wantItem(t, b, "orders", "o-1", "v3", r.Rev, tok)
	})

	t.Run("ErrFenced", func(t *testing.T) {
		w := newWorld(t, open)
		for _, c := range []struct {
			key  string
			cond fence.Cond
		}{
			{"k", fence.Cond{}},
			{"new", fence.Cond{}},
			{"gone", fence.Cond{IfAbsent: true}}, // the condition holds, the token does not
		} {
			w.rejected(t, func() error {
				_, err := w.b.Put(t.Context(), "a", c.key, []byte("zombie"), w.stale, c.cond)
				return err
			}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
		}
	})

	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		w := newWorld(t, open)
		for _, c := range []struct {
			name      string
			resource  string
			token     fence.Token
			lastToken fence.Token
		}{
			{"Next", "a", w.cur + 1, w.cur},
			{"MaxToken", "a", fence.MaxToken, w.cur},
			{"NeverGranted", "never", 1, 0},
			{"NeverGrantedMaxToken", "never", fence.MaxToken, 0},
		} {
			t.Run(c.name, func(t *testing.T) {
				w.rejected(t, func() error {
					_, err := w.b.Put(t.Context(), c.resource, "k", []byte("forged"), c.token, fence.Cond{})
					return err
				}, func(t *testing.T, err error) { wantNotIssued(t, err, c.resource, c.token, c.lastToken) })
			})
		}
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		w := newWorld(t, open)
		for _, resource := range []string{"a", "never"} {
			for _, tok := range []fence.Token{0, fence.MaxToken + 1, ^fence.Token(0)} {
				w.rejected(t, func() error {
					_, err := w.b.Put(t.Context(), resource, "k", []byte("bad"), tok, fence.Cond{})
					return err
				}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrInvalidToken) })
			}
		}
	})

	t.Run("IfMatch", func(t *testing.T) {
		w := newWorld(t, open)
		r := put(t, w.b, "a", "k", "B3", w.cur, fence.Cond{IfMatch: w.revK})
		wantResult(t, "Put", r, w.rev+1, w.cur, "B")
		w.rev = r.Rev
		wantItem(t, w.b, "a", "k", "B3", r.Rev, w.cur)
		t.Run("ErrPreconditionFailed", func(t *testing.T) {
			for _, c := range []struct {
				key string
				rev fence.Rev
			}{
				{"k", w.revK}, // the revision before the last write
				{"k", r.Rev + 1},
				{"gone", w.revK}, // an absent key never matches
			} {
				w.rejected(t, func() error {
					_, err := w.b.Put(t.Context(), "a", c.key, []byte("cas"), w.cur, fence.Cond{IfMatch: c.rev})
					return err
				}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrPreconditionFailed) })
			}
		})
	})

	t.Run("IfAbsent", func(t *testing.T) {
		w := newWorld(t, open)
		r := put(t, w.b, "a", "gone", "new", w.cur, fence.Cond{IfAbsent: true})
		wantResult(t, "Put", r, w.rev+1, w.cur, "B")
		w.rev = r.Rev
		t.Run("ErrPreconditionFailed", func(t *testing.T) {
			for _, key := range []string{"k", "gone"} {
				w.rejected(t, func() error {
					_, err := w.b.Put(t.Context(), "a", key, []byte("again"), w.cur, fence.Cond{IfAbsent: true})
					return err
				}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrPreconditionFailed) })
			}
		})
	})

	t.Run("IfExists", func(t *testing.T) {
		w := newWorld(t, open)
		r := put(t, w.b, "a", "k", "B3", w.cur, fence.Cond{IfExists: true})
		wantResult(t, "Put", r, w.rev+1, w.cur, "B")
		w.rev = r.Rev
		t.Run("ErrPreconditionFailed", func(t *testing.T) {
			w.rejected(t, func() error {
				_, err := w.b.Put(t.Context(), "a", "gone", []byte("x"), w.cur, fence.Cond{IfExists: true})
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrPreconditionFailed) })
		})
	})

	// token_not_issued, then fenced, then precondition_failed.
	t.Run("Precedence", func(t *testing.T) {
		w := newWorld(t, open)
		bad := fence.Cond{IfMatch: 12345}
		w.rejected(t, func() error {
			_, err := w.b.Put(t.Context(), "a", "k", []byte("x"), w.stale, bad)
			return err
		}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
		w.rejected(t, func() error {
			_, err := w.b.Put(t.Context(), "a", "k", []byte("x"), w.cur+1, fence.Cond{IfAbsent: true})
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "a", w.cur+1, w.cur) })
		w.rejected(t, func() error {
			_, err := w.b.Put(t.Context(), "never", "k", []byte("x"), 0, fence.Cond{})
			return err
		}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrInvalidToken) })
	})

	t.Run("ErrTooLarge", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Put(t.Context(), "a", "k", make([]byte, fence.MaxValueSize+1), w.cur, fence.Cond{})
			return err
		}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrTooLarge) })
		big := bytes.Repeat([]byte("x"), fence.MaxValueSize)
		r := put(t, w.b, "a", "k", string(big), w.cur, fence.Cond{})
		if r.Rev != w.rev+1 {
			t.Fatalf("Rev=%d, want %d", r.Rev, w.rev+1)
		}
		if got := get(t, w.b, "a", "k"); !bytes.Equal(got.Value, big) {
			t.Fatalf("len(Value)=%d, want %d", len(got.Value), len(big))
		}
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		w := newWorld(t, open)
		for _, c := range []struct{ resource, key string }{
			{"", "k"}, {"a\x00", "k"}, {"a\n", "k"}, {"\xff", "k"}, {strings.Repeat("r", fence.MaxNameLen+1), "k"},
			{"a", ""}, {"a", "x//y"}, {"a", "/x"}, {"a", "x/"}, {"a", "."}, {"a", "../k"}, {"a", "k\t"},
			{"a", strings.Repeat("k", fence.MaxNameLen+1)},
		} {
			w.rejected(t, func() error {
				_, err := w.b.Put(t.Context(), c.resource, c.key, []byte("x"), w.cur, fence.Cond{})
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrBadRequest) })
		}
	})

	// The store keeps its own copy: changing the caller's slice, before or
	// after the write, changes nothing stored.
	t.Run("ValueCopied", func(t *testing.T) {
		b := open(t)
		tok := grant(t, b, "r", "A")
		v := []byte("v1")
		r := put2(t, b, "r", "k", v, tok)
		v[0] = 'X'
		item := get(t, b, "r", "k")
		item.Value[0] = 'Y'
		wantItem(t, b, "r", "k", "v1", r.Rev, tok)
	})
}

func put2(t *testing.T, b Backend, resource, key string, value []byte, tok fence.Token) fence.WriteResult {
	t.Helper()
	r, err := b.Put(t.Context(), resource, key, value, tok, fence.Cond{})
	if err != nil {
		t.Fatalf("Put(%q, %q): %v", resource, key, err)
	}
	return r
}

func testGet(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		w := newWorld(t, open)
		// Item.Token is the token of the write that stored the value.
		wantItem(t, w.b, "a", "k", "B1", w.revK, w.cur)
		wantItem(t, w.b, "a", "x", "B2", w.revX, w.cur)
		wantItem(t, w.b, "b", "k", "C1", w.revB, w.tokB)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		w := newWorld(t, open)
		for _, k := range [][2]string{{"a", "gone"}, {"never", "k"}, {"probe", "k"}, {"b", "k/sub"}, {"a", "K"}} {
			wantAbsent(t, w.b, k[0], k[1])
		}
	})
}

func testDelete(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		w := newWorld(t, open)
		r := del(t, w.b, "a", "k", w.cur, fence.Cond{})
		wantResult(t, "Delete", r, w.rev+1, w.cur, "B")
		wantAbsent(t, w.b, "a", "k")
		wantItem(t, w.b, "a", "x", "B2", w.revX, w.cur)
		wantFence(t, w.b, "a", w.cur)
		// The key can be created again.
		r2 := put(t, w.b, "a", "k", "again", w.cur, fence.Cond{IfAbsent: true})
		if r2.Rev != r.Rev+1 {
			t.Fatalf("Rev=%d, want %d", r2.Rev, r.Rev+1)
		}
		wantItem(t, w.b, "a", "k", "again", r2.Rev, w.cur)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		w := newWorld(t, open)
		for _, key := range []string{"gone", "k/sub"} {
			w.rejected(t, func() error {
				_, err := w.b.Delete(t.Context(), "a", key, w.cur, fence.Cond{})
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrNotFound) })
		}
		del(t, w.b, "a", "x", w.cur, fence.Cond{})
		w.rev++
		w.rejected(t, func() error {
			_, err := w.b.Delete(t.Context(), "a", "x", w.cur, fence.Cond{})
			return err
		}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrNotFound) })
	})

	// The token is checked before the key's existence.
	t.Run("ErrFenced", func(t *testing.T) {
		w := newWorld(t, open)
		for _, key := range []string{"k", "gone"} {
			w.rejected(t, func() error {
				_, err := w.b.Delete(t.Context(), "a", key, w.stale, fence.Cond{})
				return err
			}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
		}
	})

	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		w := newWorld(t, open)
		for _, key := range []string{"k", "gone"} {
			w.rejected(t, func() error {
				_, err := w.b.Delete(t.Context(), "a", key, w.cur+1, fence.Cond{IfMatch: 999})
				return err
			}, func(t *testing.T, err error) { wantNotIssued(t, err, "a", w.cur+1, w.cur) })
		}
		w.rejected(t, func() error {
			_, err := w.b.Delete(t.Context(), "never", "k", 1, fence.Cond{})
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "never", 1, 0) })
	})

	t.Run("IfMatch", func(t *testing.T) {
		w := newWorld(t, open)
		t.Run("ErrPreconditionFailed", func(t *testing.T) {
			for _, c := range []struct {
				key  string
				cond fence.Cond
			}{
				{"k", fence.Cond{IfMatch: w.revK + 100}},
				{"k", fence.Cond{IfAbsent: true}},
				// A precondition on an absent key fails before not_found.
				{"gone", fence.Cond{IfMatch: w.revK}},
				{"gone", fence.Cond{IfExists: true}},
			} {
				w.rejected(t, func() error {
					_, err := w.b.Delete(t.Context(), "a", c.key, w.cur, c.cond)
					return err
				}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrPreconditionFailed) })
			}
		})
		r := del(t, w.b, "a", "k", w.cur, fence.Cond{IfMatch: w.revK})
		wantResult(t, "Delete", r, w.rev+1, w.cur, "B")
		wantAbsent(t, w.b, "a", "k")
	})
}

func testClaim(t *testing.T, open func(t *testing.T) Backend) {
	// A claim raises the fence without a revision of its own.
	t.Run("OK", func(t *testing.T) {
		w := newWorld(t, open)
		r, err := w.b.Claim(t.Context(), "a", w.cur)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		wantResult(t, "Claim", r, w.rev, w.cur, "B")
		wantFence(t, w.b, "a", w.cur)
		w.next(t)

		// A new holder claims before it writes anything.
		tok := grant(t, w.b, "fresh", "D")
		r, err = w.b.Claim(t.Context(), "fresh", tok)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		wantResult(t, "Claim", r, w.rev, tok, "D")
		wantFence(t, w.b, "fresh", tok)
		w.next(t)
	})

	t.Run("SameToken", func(t *testing.T) {
		w := newWorld(t, open)
		for range 3 {
			r, err := w.b.Claim(t.Context(), "b", w.tokB)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			wantResult(t, "Claim", r, w.rev, w.tokB, "C")
		}
		w.next(t)
		r := put(t, w.b, "b", "k", "C2", w.tokB, fence.Cond{})
		wantResult(t, "Put after Claim", r, w.rev+1, w.tokB, "C")
	})

	t.Run("ErrFenced", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Claim(t.Context(), "a", w.stale)
			return err
		}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
	})

	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Claim(t.Context(), "a", w.cur+1)
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "a", w.cur+1, w.cur) })
		w.rejected(t, func() error {
			_, err := w.b.Claim(t.Context(), "a", fence.MaxToken)
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "a", fence.MaxToken, w.cur) })
		w.rejected(t, func() error {
			_, err := w.b.Claim(t.Context(), "never", 1)
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "never", 1, 0) })
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Claim(t.Context(), "a", 0)
			return err
		}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrInvalidToken) })
	})
}

// testFence checks invariant 3: a grant raises the fence at once.
func testFence(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("Unknown", func(t *testing.T) {
		b := open(t)
		wantFence(t, b, "never", 0)
		if got := lastToken(t, b, "never"); got != 0 {
			t.Fatalf("LastToken=%d, want 0", got)
		}
	})

	// A paused holder is rejected right after a new grant, before the new
	// holder has written anything.
	t.Run("Zombie", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		a := grant(t, b, "orders", "A")
		ra := put(t, b, "orders", "o-1", "A", a, fence.Cond{})
		bt := grant(t, b, "orders", "B")
		if a != 1 || bt != 2 {
			t.Fatalf("Tokens=%d, %d, want 1, 2", a, bt)
		}
		wantFence(t, b, "orders", bt)

		_, err := b.Put(ctx, "orders", "o-1", []byte("zombie"), a, fence.Cond{})
		wantFenced(t, err, "orders", 1, 2)
		_, err = b.Delete(ctx, "orders", "o-1", a, fence.Cond{})
		wantFenced(t, err, "orders", 1, 2)
		_, err = b.Claim(ctx, "orders", a)
		wantFenced(t, err, "orders", 1, 2)
		_, err = b.Txn(ctx, &fence.Txn{Fences: map[string]fence.Token{"orders": a},
			Then: []fence.Op{{Kind: fence.OpPut, Resource: "orders", Key: "o-2", Value: []byte("zombie")}}})
		wantFenced(t, err, "orders", 1, 2)
		wantItem(t, b, "orders", "o-1", "A", ra.Rev, a)
		wantAbsent(t, b, "orders", "o-2")
		wantFence(t, b, "orders", bt)

		rb := put(t, b, "orders", "o-1", "B", bt, fence.Cond{})
		wantResult(t, "B's Put", rb, ra.Rev+1, bt, "B")
	})

	// The story of DESIGN.md: A holds token N and pauses; B gets N+1 and
	// writes; A wakes up and writes; A is fenced, B's value stands.
	t.Run("Seed", func(t *testing.T) {
		b := open(t)
		n := grantN(t, b, "x", "A", 41)
		if n != 41 {
			t.Fatalf("Token=%d, want 41", n)
		}
		put(t, b, "x", "v", "A-before-pause", n, fence.Cond{})
		m := grant(t, b, "x", "B")
		if m != n+1 {
			t.Fatalf("Token=%d, want %d", m, n+1)
		}
		rb := put(t, b, "x", "v", "B", m, fence.Cond{})
		_, err := b.Put(t.Context(), "x", "v", []byte("A"), n, fence.Cond{})
		wantFenced(t, err, "x", n, n+1)
		wantItem(t, b, "x", "v", "B", rb.Rev, m)
		wantFence(t, b, "x", m)
	})
}

// testRevision checks that the revision is one store-wide counter that grows
// by exactly one with every accepted write, whatever its resource and kind.
func testRevision(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("StoreWide", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		ta, tb, tc := grant(t, b, "a", "A"), grant(t, b, "b", "B"), grant(t, b, "c", "C")
		rev := txn(t, b, &fence.Txn{}) // the current revision
		step := func(what string, got fence.Rev) {
			t.Helper()
			if got != rev+1 {
				t.Fatalf("%s: Rev=%d, want %d", what, got, rev+1)
			}
			rev = got
		}
		step("put a/1", put(t, b, "a", "1", "x", ta, fence.Cond{}).Rev)
		step("put b/1", put(t, b, "b", "1", "x", tb, fence.Cond{}).Rev)
		step("put a/1", put(t, b, "a", "1", "y", ta, fence.Cond{}).Rev)
		if _, err := b.Claim(ctx, "c", tc); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if _, err := b.Put(ctx, "a", "1", nil, ta, fence.Cond{IfAbsent: true}); err == nil {
			t.Fatalf("Put IfAbsent on an existing key: err=nil, want ErrPreconditionFailed")
		}
		step("txn", txn(t, b, &fence.Txn{Fences: map[string]fence.Token{"a": ta, "c": tc},
			Then: []fence.Op{{Kind: fence.OpPut, Resource: "a", Key: "2", Value: []byte("t")}, {Kind: fence.OpPut, Resource: "c", Key: "1", Value: []byte("t")}}}))
		step("delete a/1", del(t, b, "a", "1", ta, fence.Cond{}).Rev)
		grant(t, b, "d", "D")
		step("put c/1", put(t, b, "c", "1", "z", tc, fence.Cond{}).Rev)
		if got := txn(t, b, &fence.Txn{}); got != rev {
			t.Fatalf("Txn with no ops: Rev=%d, want %d", got, rev)
		}
	})
}
