package fencetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

// TestGuardSequencers is the conformance suite of a guard that requires
// signed sequencers (its Keys field): setKeys sets the guard's keys (nil:
// none required); write writes key "k" = "v" to resource with token through
// the guard, or only claims when claim is true, with the sequencer that ctx
// carries (fence.WithSequencer); read says whether "k" exists; fenceOf
// returns the resource's fence. A forged token must be refused with
// ErrInvalidSequencer without changing anything, and a valid sequencer must
// never make a stale token acceptable.
func TestGuardSequencers(t *testing.T, setKeys func(fence.KeySet),
	write func(ctx context.Context, resource string, token fence.Token, claim bool) error,
	read func(resource string) bool, fenceOf func(resource string) fence.Token) {
	t.Helper()
	key, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	setKeys(fence.KeySet{key.ID: key.Public().Key})
	sign := func(k fence.SigningKey, resource string, token fence.Token) string {
		t.Helper()
		s, err := k.Sign(fence.Sequencer{Resource: resource, Holder: "h", Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const res = "acct"
	ctx := context.Background()
	with := func(s string) context.Context { return fence.WithSequencer(ctx, s) }

	// A valid sequencer is accepted: claim 5.
	if err := write(with(sign(key, res, 5)), res, 5, true); err != nil {
		t.Fatalf("claim 5 with a valid sequencer: %v", err)
	}
	if f := fenceOf(res); f != 5 {
		t.Fatalf("fence %d after claim 5, want 5", f)
	}
	valid := sign(key, res, fence.MaxToken)
	tampered := []byte(valid)
	i := strings.IndexByte(valid, '.') + 10 // inside the signature
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no sequencer", ctx},
		{"empty sequencer", with("")},
		{"garbage", with("not-a-sequencer")},
		{"other resource", with(sign(key, "other", fence.MaxToken))},
		{"other token", with(sign(key, res, 6))},
		{"tampered", with(string(tampered))},
		{"unknown key", with(sign(stranger, res, fence.MaxToken))},
	} {
		for _, claim := range []bool{false, true} {
			err := write(tc.ctx, res, fence.MaxToken, claim)
			if !errors.Is(err, fence.ErrInvalidSequencer) {
				t.Fatalf("%s (claim %v), forged token 2^63-1: %v, want ErrInvalidSequencer", tc.name, claim, err)
			}
			if errors.Is(err, fence.ErrFenced) {
				t.Fatalf("%s: %v is also ErrFenced", tc.name, err)
			}
			if f := fenceOf(res); f != 5 {
				t.Fatalf("%s (claim %v): fence %d, want 5 (unchanged)", tc.name, claim, f)
			}
			if read(res) {
				t.Fatalf("%s (claim %v): data written", tc.name, claim)
			}
		}
	}
	// A valid sequencer never makes a stale token acceptable.
	for _, claim := range []bool{false, true} {
		err := write(with(sign(key, res, 3)), res, 3, claim)
		var fe *fence.FencedError
		if !errors.As(err, &fe) {
			t.Fatalf("stale token 3 with a valid sequencer (claim %v): %v, want *fence.FencedError", claim, err)
		}
		if f := fenceOf(res); f != 5 || read(res) {
			t.Fatalf("stale write changed something: fence %d, data %v", f, read(res))
		}
	}
	// A valid sequencer with a current token writes.
	if err := write(with(sign(key, res, 6)), res, 6, false); err != nil {
		t.Fatalf("write 6 with a valid sequencer: %v", err)
	}
	if f := fenceOf(res); f != 6 || !read(res) {
		t.Fatalf("after write 6: fence %d, data %v; want 6, true", f, read(res))
	}
	// Without Keys, nothing is required (the existing behaviour).
	setKeys(nil)
	if err := write(ctx, res, 7, true); err != nil {
		t.Fatalf("claim 7 without Keys: %v", err)
	}
}
