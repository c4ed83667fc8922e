package fencetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// Replicated is a replicated engine as fence's servers use it: the state
// and the leadership of a store that several servers share.
type Replicated interface {
	state.Remote
	state.Elector
}

// ReplicatedStore opens servers on one shared, empty store of a replicated
// engine, for TestReplicated.
type ReplicatedStore struct {
	// Open opens the engine as the server url, with the writer-epoch check
	// skipped if unsafe; it is closed when t ends.
	Open func(t *testing.T, url string, unsafe bool) Replicated
	// EndLeadership ends, behind its back, the leadership of the server that
	// leads the store now (its lease runs out as if it were paused), so that
	// another can campaign and win.
	EndLeadership func(t *testing.T)
}

// TestReplicated checks a replicated engine: the store and ledger suites on
// a leader's LeaderEngine (TestStore, TestLedger), and invariant 9 — once another
// server has taken over, the old leader commits nothing and answers no read
// from its memory; with the epoch check skipped (the negative control) its
// stale write does get in; and the numbering of an epoch's commits
// (testCommitNumbers). newStore returns a new, empty shared store.
func TestReplicated(t *testing.T, newStore func(t *testing.T) ReplicatedStore) {
	open := func(t *testing.T) Backend {
		db, _ := Lead(t, newStore(t).Open(t, "http://127.0.0.1:1", false))
		return db
	}
	t.Run("Store", func(t *testing.T) { TestStore(t, open) })
	t.Run("Ledger", func(t *testing.T) { TestLedger(t, open) })
	t.Run("Takeover", func(t *testing.T) { testTakeover(t, newStore, false) })
	t.Run("TakeoverWithoutEpochCheck", func(t *testing.T) { testTakeover(t, newStore, true) })
	t.Run("CommitNumbers", func(t *testing.T) { testCommitNumbers(t, newStore) })
}

// Lead campaigns with r, and returns a DB on a state.LeaderEngine of the term it
// wins; both end when t does.
func Lead(t testing.TB, r Replicated) (*state.DB, state.Term) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := r.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	c, err := state.NewLeaderEngine(ctx, r, term.Epoch())
	if err != nil {
		t.Fatalf("NewLeaderEngine: %v", err)
	}
	db := state.NewDB("replicated", c)
	t.Cleanup(func() {
		db.Close()
		term.Resign(context.Background())
	})
	return db, term
}

func testTakeover(t *testing.T, newStore func(t *testing.T) ReplicatedStore, unsafe bool) {
	ctx := t.Context()
	st := newStore(t)
	a := st.Open(t, "http://127.0.0.1:1", unsafe)
	b := st.Open(t, "http://127.0.0.1:2", false)
	dbA, _ := Lead(t, a)
	tok := grant(t, dbA, "r", "A")
	put(t, dbA, "r", "k", "A", tok, fence.Cond{})
	owned, err := dbA.Grant(fence.WithOwner(ctx, "alice"), "owned", "A", testTTL, time.Now().Add(testTTL))
	if err != nil {
		t.Fatal(err)
	}

	// A raised floor is the store's, and the next leader's.
	var floor fence.Token
	if err := dbA.Update(ctx, func(tx state.Tx) (err error) { floor, err = state.RaiseFloor(tx, 10); return err }); err != nil {
		t.Fatalf("RaiseFloor: %v", err)
	}
	tok = grant(t, dbA, "r", "A")
	put(t, dbA, "r", "k", "A", tok, fence.Cond{})
	owned, err = dbA.Grant(fence.WithOwner(ctx, "alice"), "owned", "A", testTTL, time.Now().Add(testTTL))
	if err != nil || tok != floor+1 || owned != floor+1 {
		t.Fatalf("Grants after the floor %d: %d, %d, %v; want %d", floor, tok, owned, err, floor+1)
	}

	readers, err := dbA.Share(fence.WithOwner(ctx, "alice"), "readers", "R1", 0, testTTL, time.Now().Add(testTTL))
	if err == nil {
		_, err = dbA.Share(ctx, "readers", "R2", readers, testTTL, time.Now().Add(testTTL))
	}
	if err == nil {
		err = dbA.RequestRevoke(ctx, "owned", owned, 7*time.Second)
	}
	if err != nil {
		t.Fatalf("Share, RequestRevoke: %v", err)
	}
	// A session with a lease in it, and a permit (a lease on a slot).
	sessTok := grant(t, dbA, fence.SessionResource("s"), "S")
	ref := fence.SessionRef{Resource: fence.SessionResource("s"), Token: sessTok}
	joined, err := dbA.Grant(fence.WithSession(ctx, ref), "joined", "S", testTTL, time.Now().Add(testTTL))
	if err != nil {
		t.Fatalf("Grant in a session: %v", err)
	}
	slot := fence.SlotResource("pool", 2, 3)
	permit := grant(t, dbA, slot, "P")

	st.EndLeadership(t)
	dbB, _ := Lead(t, b)
	if got := lastToken(t, dbB, "unrecorded"); got != floor {
		t.Fatalf("the new leader: LastToken of an unrecorded resource %d, want the floor %d", got, floor)
	}
	if m, _, ok, err := b.Leader(ctx); err != nil || !ok || m.URL != "http://127.0.0.1:2" {
		t.Fatalf("Leader=%+v, %v, %v; want B", m, ok, err)
	}
	// The new leader has the lease's owner, which the store kept.
	leases, _, err := dbB.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(leases, func(l fence.Lease) bool { return l.Resource == "owned" }); i < 0 || leases[i].Owner != "alice" || leases[i].Token != owned ||
		leases[i].RevokeGrace != 7*time.Second {
		t.Fatalf("the new leader's leases %+v: want owned's, token %d, owner alice, a revoke requested with 7s grace", leases, owned)
	}
	// And the shared group, with each holder's owner.
	var group []string
	for _, l := range leases {
		if l.Resource == "readers" {
			group = append(group, fmt.Sprintf("%s/%s/%d/%v", l.Holder, l.Owner, l.Token, l.Shared))
		}
	}
	slices.Sort(group)
	if want := []string{fmt.Sprintf("R1/alice/%d/true", readers), fmt.Sprintf("R2//%d/true", readers)}; !slices.Equal(group, want) {
		t.Fatalf("the new leader's shared group %v, want %v", group, want)
	}
	// And the session, the lease in it with its session, and the permit.
	for _, want := range []fence.Lease{
		{Resource: ref.Resource, Holder: "S", Token: sessTok},
		{Resource: "joined", Holder: "S", Token: joined, Session: ref},
		{Resource: slot, Holder: "P", Token: permit},
	} {
		i := slices.IndexFunc(leases, func(l fence.Lease) bool { return l.Resource == want.Resource })
		if i < 0 || leases[i].Holder != want.Holder || leases[i].Token != want.Token || leases[i].Session != want.Session {
			t.Fatalf("the new leader's leases %+v: want %s's, holder %s, token %d, session %+v", leases, want.Resource, want.Holder, want.Token, want.Session)
		}
	}
	if tokB := grant(t, dbB, "r", "B"); tokB != tok+1 {
		t.Fatalf("B: Grant=%d, want %d (the tokens go on)", tokB, tok+1)
	}

	// A wakes up and writes with its stale state.
	_, err = dbA.Put(ctx, "r", "k", []byte("zombie"), tok, fence.Cond{})
	item := get(t, dbB, "r", "k")
	if unsafe {
		if err != nil || string(item.Value) != "zombie" {
			t.Fatalf("without the epoch check: Put err=%v, value %q; want the stale write applied (the check is what stops it)", err, item.Value)
		}
		return
	}
	if !errors.Is(err, state.ErrDeposed) || !errors.Is(err, fence.ErrNotLeader) {
		t.Fatalf("deposed leader: Put err=%v, want ErrDeposed", err)
	}
	if string(item.Value) != "A" {
		t.Fatalf("value %q, want A: the deposed leader's write must apply nothing", item.Value)
	}
	if _, err := dbA.Fence(ctx, "r"); !errors.Is(err, state.ErrDeposed) {
		t.Fatalf("deposed leader: read err=%v, want ErrDeposed (no answer from stale memory)", err)
	}
}
