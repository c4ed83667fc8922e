package fence

import (
	"context"
	"errors"
	"testing"
)

func TestKeySetCheck(t *testing.T) {
	ctx := context.Background()
	if err := KeySet(nil).Check(ctx, "r", MaxToken); err != nil {
		t.Fatalf("nil KeySet: %v, want nil (nothing required)", err)
	}
	if s, ok := SequencerFrom(ctx); ok || s != "" {
		t.Fatalf("SequencerFrom(empty ctx) = %q, %v", s, ok)
	}
	if _, ok := SequencerFrom(WithSequencer(ctx, "")); ok {
		t.Fatal(`SequencerFrom(WithSequencer(ctx, "")) reports one`)
	}
	key, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	ks := KeySet{key.ID: key.Public().Key}
	if err := ks.Check(ctx, "r", 5); !errors.Is(err, ErrInvalidSequencer) {
		t.Fatalf("no sequencer: %v, want ErrInvalidSequencer", err)
	}
	if err := (KeySet{}).Check(ctx, "r", 5); !errors.Is(err, ErrInvalidSequencer) {
		t.Fatalf("empty KeySet, no sequencer: %v, want ErrInvalidSequencer", err)
	}
	s, err := key.Sign(Sequencer{Resource: "r", Holder: "h", Token: 5})
	if err != nil {
		t.Fatal(err)
	}
	sctx := WithSequencer(ctx, s)
	if got, ok := SequencerFrom(sctx); !ok || got != s {
		t.Fatalf("SequencerFrom = %q, %v", got, ok)
	}
	if err := ks.Check(sctx, "r", 5); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, tc := range []struct {
		res string
		tok Token
	}{{"other", 5}, {"r", 6}, {"r", MaxToken}} {
		if err := ks.Check(sctx, tc.res, tc.tok); !errors.Is(err, ErrInvalidSequencer) {
			t.Fatalf("%q %d: %v, want ErrInvalidSequencer", tc.res, tc.tok, err)
		}
	}
}

// TestKeySetCheck_Rotation: during a rotation both keys verify; removing the
// old key revokes what it signed.
func TestKeySetCheck_Rotation(t *testing.T) {
	oldKey, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k SigningKey) context.Context {
		s, err := k.Sign(Sequencer{Resource: "r", Holder: "h", Token: 9})
		if err != nil {
			t.Fatal(err)
		}
		return WithSequencer(context.Background(), s)
	}
	oldCtx, newCtx := sign(oldKey), sign(newKey)
	ks := KeySet{oldKey.ID: oldKey.Public().Key, newKey.ID: newKey.Public().Key}
	for name, ctx := range map[string]context.Context{"old": oldCtx, "new": newCtx} {
		if err := ks.Check(ctx, "r", 9); err != nil {
			t.Fatalf("during rotation, %s key: %v", name, err)
		}
	}
	delete(ks, oldKey.ID)
	if err := ks.Check(oldCtx, "r", 9); !errors.Is(err, ErrInvalidSequencer) || !errors.Is(err, errUnknownKey) {
		t.Fatalf("old key after removal: %v, want ErrInvalidSequencer (unknown key)", err)
	}
	if err := ks.Check(newCtx, "r", 9); err != nil {
		t.Fatalf("new key after removal: %v", err)
	}
}
