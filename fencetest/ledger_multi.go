package fencetest

import (
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// testGrantAll checks Ledger.GrantAll: every resource granted in one
// change, each with its own next token and its fence raised, or, when one
// cannot be granted, none of them.
func testGrantAll(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		prev := grantAt(t, b, "a", "A", testTTL, expires1)
		tokens, err := b.GrantAll(t.Context(), []string{"b", "a"}, "M", testTTL, expires2)
		if err != nil {
			t.Fatalf("GrantAll: %v", err)
		}
		if len(tokens) != 2 || tokens[0] != 1 || tokens[1] != prev+1 {
			t.Fatalf("GrantAll tokens=%v, want [1 %d]", tokens, prev+1)
		}
		wantFence(t, b, "a", prev+1)
		wantFence(t, b, "b", 1)
		wantLeases(t, b,
			fence.Lease{Resource: "a", Holder: "M", Token: prev + 1, TTL: testTTL, Expires: expires2},
			fence.Lease{Resource: "b", Holder: "M", Token: 1, TTL: testTTL, Expires: expires2})
	})

	// A resource out of tokens fails the change: the other is not granted.
	t.Run("AllOrNone", func(t *testing.T) {
		b := open(t)
		u, ok := b.(updater)
		if !ok {
			t.Skipf("%T does not run state's transactions", b)
		}
		prev := grantAt(t, b, "a", "A", testTTL, expires1)
		if err := u.Update(t.Context(), func(tx state.Tx) error {
			return tx.SetResource("z", state.Resource{LastToken: fence.MaxToken, LastFence: fence.MaxToken})
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.GrantAll(t.Context(), []string{"a", "z"}, "M", testTTL, expires2); err == nil {
			t.Fatal("GrantAll with a resource out of tokens succeeded")
		}
		if got := lastToken(t, b, "a"); got != prev {
			t.Fatalf("LastToken(a)=%d after the failed GrantAll, want %d: half of it committed", got, prev)
		}
		wantFence(t, b, "a", prev)
		wantLeases(t, b, fence.Lease{Resource: "a", Holder: "A", Token: prev, TTL: testTTL, Expires: expires1})
	})
}
