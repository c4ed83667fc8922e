package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// testCommitNumbers checks the numbering of the commits of an epoch
// (state.Remote.Commit): a commit sent again after its answer was lost is
// confirmed; one that arrives before the one it follows, without carrying
// it, is refused as out of order and applies nothing; one that carries it
// applies both, and the one it carried, arriving late, applies nothing, so
// it undoes nothing; a commit that carries one applied already applies; an
// empty commit checks the epoch only; commit 10 sorts after commit 9.
func testCommitNumbers(t *testing.T, newStore func(t *testing.T) ReplicatedStore) {
	ctx := t.Context()
	r := newStore(t).Open(t, "http://127.0.0.1:1", false)
	term, err := r.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	commit := func(seq, since uint64) error {
		return r.Commit(ctx, term.Epoch(), &state.Changes{Seq: seq, Since: since,
			Resources: map[string]state.Resource{"r": {LastToken: fence.Token(seq), LastFence: fence.Token(seq)}}})
	}
	lastToken := func() fence.Token {
		var last fence.Token
		if _, err := r.Load(ctx, func(name string, res state.Resource) error {
			if name == "r" {
				last = res.LastToken
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return last
	}
	// Commit 2 arrives first, and does not carry commit 1: refused,
	// nothing applied.
	if err := commit(2, 0); !errors.Is(err, state.ErrOutOfOrder) || !errors.Is(err, state.ErrNotApplied) {
		t.Fatalf("commit 2 before commit 1: %v, want state.ErrOutOfOrder", err)
	}
	if got := lastToken(); got != 0 {
		t.Fatalf("LastToken %d after a commit out of order, want 0", got)
	}
	if err := commit(1, 0); err != nil {
		t.Fatal(err)
	}
	// Its answer lost: sent again, it is confirmed.
	if err := commit(1, 0); err != nil {
		t.Fatalf("the same commit sent again: %v, want it confirmed", err)
	}
	// Commit 3 carrying commit 2 arrives first: it applies both.
	if err := commit(3, 2); err != nil {
		t.Fatalf("commit 3 carrying commit 2: %v", err)
	}
	// Commit 2 arrives late: applied already, it applies nothing, so it
	// undoes nothing.
	if err := commit(2, 0); err != nil {
		t.Fatalf("commit 2 after commit 3 carried it: %v, want it confirmed", err)
	}
	if got := lastToken(); got != 3 {
		t.Fatalf("LastToken %d after the late commit, want 3: the later commit stands", got)
	}
	// A commit that carries one applied already applies too.
	if err := commit(4, 3); err != nil {
		t.Fatalf("commit 4 carrying commit 3, applied: %v", err)
	}
	// An empty commit checks the epoch only, whatever its number.
	if err := r.Commit(ctx, term.Epoch(), &state.Changes{}); err != nil {
		t.Fatalf("an empty commit: %v", err)
	}
	// Commit 10 of the epoch sorts after commit 9.
	for seq := uint64(5); seq <= 11; seq++ {
		if err := commit(seq, 0); err != nil {
			t.Fatalf("commit %d: %v", seq, err)
		}
	}
	if got := lastToken(); got != 11 {
		t.Fatalf("LastToken %d, want 11", got)
	}
}
