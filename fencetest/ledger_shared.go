package fencetest

import (
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// testShared checks the shared groups of a Ledger: a group shares one
// token, issued when it starts; its holders join, refresh and leave it one
// by one, and it ends with the last; a downgrade ends an exclusive lease
// and starts a group with the next token in one change; a grant, a
// hand-off and a revoke after a group get tokens above the group's.
func testShared(t *testing.T, open func(t *testing.T) Backend) {
	shared := func(res, holder, owner string, tok fence.Token, expires time.Time) fence.Lease {
		return fence.Lease{Resource: res, Holder: holder, Owner: owner, Token: tok, TTL: time.Second, Expires: expires, Shared: true}
	}
	t.Run("Group", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		before := grantAt(t, b, "r", "W", time.Second, expires1)
		if _, err := b.End(ctx, "r", before); err != nil {
			t.Fatal(err)
		}
		t1, err := b.Share(fence.WithOwner(ctx, "alice"), "r", "R1", 0, time.Second, expires1)
		if err != nil || t1 != before+1 {
			t.Fatalf("Share(R1)=%d, %v; want the next token %d", t1, err, before+1)
		}
		t2, err := b.Share(ctx, "r", "R2", t1, time.Second, expires2)
		if err != nil || t2 != t1 {
			t.Fatalf("Share(R2)=%d, %v; want the group's token %d", t2, err, t1)
		}
		if got := fenceOf(t, b, "r"); got != t1 {
			t.Fatalf("last fence %d, want the group's token %d", got, t1)
		}
		// The group's token writes, and an older one is fenced.
		put(t, b, "r", "k", "shared", t1, fence.Cond{})
		if _, err := b.Put(ctx, "r", "k", []byte("old"), before, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Put with the token before the group: %v, want fenced", err)
		}
		wantLeases(t, b, shared("r", "R1", "alice", t1, expires1), shared("r", "R2", "", t1, expires2))
		// Joining again refreshes; a refresh names its holder.
		if again, err := b.Share(ctx, "r", "R2", t1, time.Second, expires1); err != nil || again != t1 {
			t.Fatalf("Share(R2) again=%d, %v; want %d", again, err, t1)
		}
		if _, err := b.RefreshShare(ctx, "r", t1, "R1", time.Second, expires2); err != nil {
			t.Fatalf("RefreshShare(R1): %v", err)
		}
		wantLeases(t, b, shared("r", "R1", "alice", t1, expires2), shared("r", "R2", "", t1, expires1))
		var lost *fence.LeaseLostError
		if _, err := b.RefreshShare(ctx, "r", t1, "R3", time.Second, expires2); !errors.As(err, &lost) || lost.Current != t1 {
			t.Fatalf("RefreshShare of a holder not in the group: %v, want lease_lost (current %d)", err, t1)
		}
		if _, err := b.RefreshShare(ctx, "r", before, "R1", time.Second, expires2); !errors.As(err, &lost) {
			t.Fatalf("RefreshShare with another token: %v, want lease_lost", err)
		}
		// Joining a group that is not recorded changes nothing.
		var lostJoin *fence.LeaseLostError
		if _, err := b.Share(ctx, "r", "R3", before, time.Second, expires1); !errors.As(err, &lostJoin) || lostJoin.Current != t1 {
			t.Fatalf("Share into a stale group: %v, want lease_lost (current %d)", err, t1)
		}
		if lf, err := b.EndShare(ctx, "r", t1, "R3"); err != nil || lf != t1 {
			t.Fatalf("EndShare of a holder not in the group=%d, %v", lf, err)
		}
		// Holders leave one by one; the group ends with the last.
		if _, err := b.EndShare(ctx, "r", t1, "R1"); err != nil {
			t.Fatal(err)
		}
		wantLeases(t, b, shared("r", "R2", "", t1, expires1))
		if _, err := b.EndShare(ctx, "r", t1, "R2"); err != nil {
			t.Fatal(err)
		}
		wantLeases(t, b)
		// The next group gets a token of its own.
		if t3, err := b.Share(ctx, "r", "R1", 0, time.Second, expires1); err != nil || t3 != t1+1 {
			t.Fatalf("Share after the group ended=%d, %v; want %d", t3, err, t1+1)
		}
	})
	t.Run("Exclusive", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		tg, err := b.Share(ctx, "r", "R1", 0, time.Second, expires1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Share(ctx, "r", "R2", tg, time.Second, expires1); err != nil {
			t.Fatal(err)
		}
		// A new group (the lock service starts one once the last has
		// ended) gets the next token, and so does an exclusive grant.
		tn, err := b.Share(ctx, "r", "R3", 0, time.Second, expires1)
		if err != nil || tn != tg+1 {
			t.Fatalf("Share of a new group=%d, %v; want %d", tn, err, tg+1)
		}
		wantLeases(t, b, shared("r", "R3", "", tn, expires1))
		tg = tn
		// An exclusive grant (the lock service makes it once the group has
		// ended) gets a token above the group's and fences it.
		tw := grantAt(t, b, "r", "W", time.Second, expires1)
		if tw != tg+1 {
			t.Fatalf("Grant after a group=%d, want %d", tw, tg+1)
		}
		if _, err := b.Put(ctx, "r", "k", []byte("reader"), tg, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Put with the group's token after the exclusive grant: %v, want fenced", err)
		}
		wantLeases(t, b, fence.Lease{Resource: "r", Holder: "W", Token: tw, TTL: time.Second, Expires: expires1})
		// A downgrade of a token that is not the lease changes nothing.
		var lost *fence.LeaseLostError
		if _, err := b.Share(ctx, "r", "W", tg, time.Second, expires1); !errors.As(err, &lost) || lost.Current != tw {
			t.Fatalf("downgrade of a stale token: %v, want lease_lost (current %d)", err, tw)
		}
		// The downgrade: the lease ends, a group with the next token holds.
		td, err := b.Share(fence.WithOwner(ctx, "alice"), "r", "W", tw, time.Second, expires2)
		if err != nil || td != tw+1 {
			t.Fatalf("downgrade=%d, %v; want %d", td, err, tw+1)
		}
		if got := fenceOf(t, b, "r"); got != td {
			t.Fatalf("last fence after the downgrade %d, want %d", got, td)
		}
		wantLeases(t, b, shared("r", "W", "alice", td, expires2))
		// A revoke ends the group and fences it.
		lf, revoked, err := b.Revoke(ctx, "r")
		if err != nil || revoked != td || lf != td+1 {
			t.Fatalf("Revoke=%d, %d, %v; want %d, %d", lf, revoked, err, td+1, td)
		}
		wantLeases(t, b)
		// A hand-off from a group's token is refused once it has ended.
		if _, _, err := b.Handoff(ctx, "r", td, "X", time.Second, expires1); !errors.As(err, &lost) {
			t.Fatalf("Handoff from an ended group: %v, want lease_lost", err)
		}
	})
}

// testRequestRevoke checks that a revoke requested of a lease is recorded
// with it, the shortest grace standing, kept by a refresh and gone with the
// lease; a stale token's request changes nothing; a group takes one too.
func testRequestRevoke(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	ctx := t.Context()
	tok := grantAt(t, b, "r", "A", time.Second, expires1)
	lease := fence.Lease{Resource: "r", Holder: "A", Token: tok, TTL: time.Second, Expires: expires1}
	if err := b.RequestRevoke(ctx, "r", tok, 5*time.Second); err != nil {
		t.Fatalf("RequestRevoke: %v", err)
	}
	if err := b.RequestRevoke(ctx, "r", tok, time.Minute); err != nil {
		t.Fatalf("RequestRevoke again: %v", err)
	}
	if _, err := b.Refresh(ctx, "r", tok, time.Second, expires2); err != nil {
		t.Fatal(err)
	}
	lease.Expires, lease.RevokeGrace = expires2, 5*time.Second
	wantLeases(t, b, lease)
	var lost *fence.LeaseLostError
	if err := b.RequestRevoke(ctx, "r", tok+1, time.Second); !errors.As(err, &lost) || lost.Current != tok {
		t.Fatalf("RequestRevoke of a token not granted: %v, want lease_lost (current %d)", err, tok)
	}
	wantLeases(t, b, lease)
	// The next lease starts with none.
	next, _, err := b.Handoff(ctx, "r", tok, "B", time.Second, expires1)
	if err != nil {
		t.Fatal(err)
	}
	wantLeases(t, b, fence.Lease{Resource: "r", Holder: "B", Token: next, TTL: time.Second, Expires: expires1})
	if _, err := b.End(ctx, "r", next); err != nil {
		t.Fatal(err)
	}
	if err := b.RequestRevoke(ctx, "r", next, time.Second); !errors.As(err, &lost) {
		t.Fatalf("RequestRevoke of an ended lease: %v, want lease_lost", err)
	}
	// A shared group's request is each holder's.
	g, err := b.Share(ctx, "g", "R1", 0, time.Second, expires1)
	if err == nil {
		_, err = b.Share(ctx, "g", "R2", g, time.Second, expires1)
	}
	if err == nil {
		err = b.RequestRevoke(ctx, "g", g, 2*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantLeases(t, b,
		fence.Lease{Resource: "g", Holder: "R1", Token: g, TTL: time.Second, Expires: expires1, Shared: true, RevokeGrace: 2 * time.Second},
		fence.Lease{Resource: "g", Holder: "R2", Token: g, TTL: time.Second, Expires: expires1, Shared: true, RevokeGrace: 2 * time.Second})
}
