package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fence-lock/fence/fencetest"

	"github.com/fence-lock/fence"
	"github.com/jackc/pgx/v5"
)

func TestGuard_Sequencer(t *testing.T) {
	a := newGuarded(t)
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return a.Claim(ctx, resource, token)
		}
		return a.Run(ctx, resource, token, func(ctx context.Context, tx pgx.Tx) error {
			return a.apply(ctx, tx, resource, map[string][]byte{"k": []byte("v")})
		})
	}
	read := func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return a.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { a.Keys = ks }, write, read, fenceOf)

	// Check, inside a caller's transaction, requires it too.
	a.Keys = fence.KeySet{}
	tx, err := a.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if err := a.Check(t.Context(), tx, "acct", fence.MaxToken); !errors.Is(err, fence.ErrInvalidSequencer) {
		t.Fatalf("Check without a sequencer: %v, want ErrInvalidSequencer", err)
	}
	tx.Rollback(t.Context())
	if f := a.Fence(t, "acct"); f != 7 {
		t.Fatalf("fence %d, want 7", f)
	}
}
