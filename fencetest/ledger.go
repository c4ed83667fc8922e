package fencetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// TestLedger checks that the backends open returns keep the lock service's
// record: tokens issued in sequence per resource and never lower, the
// current lease and its owner, that a hand-off ends one lease and grants the
// next at once, and that a stale refresh, end or hand-off never touches a
// newer lease.
// open is called once per subtest and must return a new, empty backend,
// closed by t.Cleanup.
func TestLedger(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("Grant", func(t *testing.T) { testGrant(t, open) })
	t.Run("Refresh", func(t *testing.T) { testRefresh(t, open) })
	t.Run("End", func(t *testing.T) { testEnd(t, open) })
	t.Run("Handoff", func(t *testing.T) { testHandoff(t, open) })
	t.Run("GrantAll", func(t *testing.T) { testGrantAll(t, open) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open) })
	t.Run("Delays", func(t *testing.T) { testDelays(t, open) })
	t.Run("Owner", func(t *testing.T) { testOwner(t, open) })
	t.Run("Session", func(t *testing.T) { testSession(t, open) })
	t.Run("Shared", func(t *testing.T) { testShared(t, open) })
	t.Run("RequestRevoke", func(t *testing.T) { testRequestRevoke(t, open) })
	t.Run("LastToken", func(t *testing.T) { testLastToken(t, open) })
	t.Run("Floor", func(t *testing.T) { testFloor(t, open) })
	t.Run("ListFences", func(t *testing.T) { testListFences(t, open) })
}

// updater is a backend that runs the rules of package state in its
// transactions: every backend built on state.DB.
type updater interface {
	Update(ctx context.Context, fn func(tx state.Tx) error) error
}

// testFloor checks that a raised token floor (state.RaiseFloor, what fence
// bump does) fences every token below it on every resource, those the
// backend has no record of included: their next grant is above the floor,
// a write or a renewal with an older token is refused, and no lease from
// before is listed.
func testFloor(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	u, ok := b.(updater)
	if !ok {
		t.Skipf("%T does not run state's transactions", b)
	}
	ctx := t.Context()
	old := grantAt(t, b, "known", "A", testTTL, expires1)
	var floor fence.Token
	if err := u.Update(ctx, func(tx state.Tx) (err error) {
		floor, err = state.RaiseFloor(tx, 100)
		return err
	}); err != nil {
		t.Fatalf("RaiseFloor: %v", err)
	}
	if floor != old+100 {
		t.Fatalf("RaiseFloor=%d, want %d", floor, old+100)
	}
	wantLeases(t, b)
	for _, res := range []string{"known", "unknown"} {
		if got := lastToken(t, b, res); got != floor {
			t.Fatalf("%s: LastToken=%d, want the floor %d", res, got, floor)
		}
		wantFence(t, b, res, floor)
		_, err := b.Put(ctx, res, "k", []byte("stale"), old, fence.Cond{})
		wantFenced(t, err, res, old, floor)
		_, err = b.Refresh(ctx, res, old, testTTL, expires2)
		wantLeaseLost(t, err, res, old, 0)
		if tok := grantAt(t, b, res, "B", testTTL, expires2); tok != floor+1 {
			t.Fatalf("%s: Grant after the floor=%d, want %d", res, tok, floor+1)
		}
	}
	if _, err := b.Refresh(ctx, "known", floor+1, testTTL, expires2); err != nil {
		t.Fatalf("the new lease's Refresh: %v", err)
	}
}

// Expiry times with nanoseconds, to catch a backend that rounds them.
var (
	expires1 = time.Unix(1_900_000_000, 123_456_789)
	expires2 = time.Unix(1_900_000_007, 987_654_321)
	expired  = time.Unix(1_000_000_000, 1) // long past: expired leases are listed too
)

func grantAt(t *testing.T, b Backend, resource, holder string, ttl time.Duration, expires time.Time) fence.Token {
	t.Helper()
	tok, err := b.Grant(t.Context(), resource, holder, ttl, expires)
	if err != nil {
		t.Fatalf("Grant(%q, %q): %v", resource, holder, err)
	}
	return tok
}

// wantLeases checks that Leases lists exactly want, in any order.
func wantLeases(t *testing.T, b Backend, want ...fence.Lease) {
	t.Helper()
	got, _, err := b.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	if g, w := leaseStrings(got), leaseStrings(want); fmt.Sprint(g) != fmt.Sprint(w) {
		t.Fatalf("Leases=%v, want %v", g, w)
	}
}

// leaseStrings describes leases in sorted order, with expiry as Unix nanoseconds.
func leaseStrings(ls []fence.Lease) []string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprintf("{%s holder=%s owner=%q token=%d ttl=%s expires=%d session=%s@%d shared=%v revoke=%s}", l.Resource, l.Holder, l.Owner, l.Token, l.TTL, l.Expires.UnixNano(),
			l.Session.Resource, l.Session.Token, l.Shared, l.RevokeGrace)
	}
	sort.Strings(s)
	return s
}

func testGrant(t *testing.T, open func(t *testing.T) Backend) {
	// Tokens are 1, 2, 3, … per resource, each resource on its own.
	t.Run("Sequence", func(t *testing.T) {
		b := open(t)
		for _, c := range []struct {
			resource string
			want     fence.Token
		}{{"a", 1}, {"a", 2}, {"b", 1}, {"a", 3}, {"c", 1}, {"b", 2}, {"a", 4}, {"A", 1}, {"a/b", 1}} {
			if got := grant(t, b, c.resource, "h"); got != c.want {
				t.Fatalf("Grant(%q): Token=%d, want %d", c.resource, got, c.want)
			}
		}
		for res, want := range map[string]fence.Token{"a": 4, "b": 2, "c": 1, "A": 1, "a/b": 1, "d": 0} {
			if got := lastToken(t, b, res); got != want {
				t.Fatalf("LastToken(%q)=%d, want %d", res, got, want)
			}
		}
	})

	// Invariant 3: the grant raised the fence before it returned.
	t.Run("RaisesFence", func(t *testing.T) {
		b := open(t)
		for i := range 3 {
			tok := grant(t, b, "a", fmt.Sprintf("h%d", i))
			wantFence(t, b, "a", tok)
		}
		wantFence(t, b, "b", 0)
	})

	// A grant records a new lease, replacing the previous one.
	t.Run("ReplacesLease", func(t *testing.T) {
		b := open(t)
		t1 := grantAt(t, b, "a", "A", time.Second, expires1)
		wantLeases(t, b, fence.Lease{Resource: "a", Holder: "A", Token: t1, TTL: time.Second, Expires: expires1})
		t2 := grantAt(t, b, "a", "B", 2*time.Second, expires2)
		wantLeases(t, b, fence.Lease{Resource: "a", Holder: "B", Token: t2, TTL: 2 * time.Second, Expires: expires2})
	})
}

func testRefresh(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		tok := grantAt(t, b, "a", "A", time.Second, expires1)
		lastFence, err := b.Refresh(t.Context(), "a", tok, 3*time.Second, expires2)
		if err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if lastFence != tok {
			t.Fatalf("Refresh: LastFence=%d, want %d", lastFence, tok)
		}
		wantLeases(t, b, fence.Lease{Resource: "a", Holder: "A", Token: tok, TTL: 3 * time.Second, Expires: expires2})
		if got := lastToken(t, b, "a"); got != tok {
			t.Fatalf("LastToken=%d, want %d", got, tok)
		}
	})

	// Invariant 6: a stale refresh never touches a newer lease.
	t.Run("ErrLeaseLost", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		old := grantAt(t, b, "a", "A", time.Second, expires1)
		cur := grantAt(t, b, "a", "B", 2*time.Second, expires2)
		lease := fence.Lease{Resource: "a", Holder: "B", Token: cur, TTL: 2 * time.Second, Expires: expires2}
		for _, tok := range []fence.Token{old, cur + 1, fence.MaxToken} {
			_, err := b.Refresh(ctx, "a", tok, time.Hour, expires1.Add(time.Hour))
			wantLeaseLost(t, err, "a", tok, cur)
			wantLeases(t, b, lease)
			wantFence(t, b, "a", cur)
		}
		_, err := b.Refresh(ctx, "never", 1, time.Hour, expires1)
		wantLeaseLost(t, err, "never", 1, 0)
		if _, err := b.End(ctx, "a", cur); err != nil {
			t.Fatalf("End: %v", err)
		}
		_, err = b.Refresh(ctx, "a", cur, time.Hour, expires1)
		wantLeaseLost(t, err, "a", cur, 0)
		wantLeases(t, b)
	})
}

func testEnd(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		ta := grantAt(t, b, "a", "A", time.Second, expires1)
		tb := grantAt(t, b, "b", "B", time.Second, expires2)
		lastFence, err := b.End(ctx, "a", ta)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if lastFence != ta {
			t.Fatalf("End: LastFence=%d, want %d", lastFence, ta)
		}
		wantLeases(t, b, fence.Lease{Resource: "b", Holder: "B", Token: tb, TTL: time.Second, Expires: expires2})
		// Ending twice changes nothing more.
		if lastFence, err = b.End(ctx, "a", ta); err != nil || lastFence != ta {
			t.Fatalf("second End=%d, %v; want %d, nil", lastFence, err, ta)
		}
		wantLeases(t, b, fence.Lease{Resource: "b", Holder: "B", Token: tb, TTL: time.Second, Expires: expires2})
		// End neither lowers the fence nor the tokens.
		wantFence(t, b, "a", ta)
		if got := grant(t, b, "a", "C"); got != ta+1 {
			t.Fatalf("Grant after End: Token=%d, want %d", got, ta+1)
		}
	})

	// A permit's end fences its slot at once: the slot may never be
	// granted again (its semaphore taken with another limit), and a holder
	// paused past its TTL must be fenced all the same.
	t.Run("Permit", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		slot := fence.SlotResource("jobs", 1, 2)
		tok := grantAt(t, b, slot, "A", time.Second, expires1)
		lastFence, err := b.End(ctx, slot, tok)
		if err != nil || lastFence != tok+1 {
			t.Fatalf("End of a permit=%d, %v; want the next token %d, nil", lastFence, err, tok+1)
		}
		wantLeases(t, b)
		wantFence(t, b, slot, tok+1)
		_, err = b.Put(ctx, slot, "k", []byte("stale"), tok, fence.Cond{})
		wantFenced(t, err, slot, tok, tok+1)
		if got := lastToken(t, b, slot); got != tok+1 {
			t.Fatalf("LastToken=%d, want %d", got, tok+1)
		}
		if got := grant(t, b, slot, "B"); got != tok+2 {
			t.Fatalf("Grant after the permit's end: Token=%d, want %d", got, tok+2)
		}
	})

	// Invariant 6: a stale end never touches a newer lease.
	t.Run("Stale", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		old := grantAt(t, b, "a", "A", time.Second, expires1)
		cur := grantAt(t, b, "a", "B", 2*time.Second, expires2)
		lease := fence.Lease{Resource: "a", Holder: "B", Token: cur, TTL: 2 * time.Second, Expires: expires2}
		for _, tok := range []fence.Token{old, cur + 1, 0} {
			lastFence, err := b.End(ctx, "a", tok)
			if err != nil {
				t.Fatalf("End(%d): %v", tok, err)
			}
			if lastFence != cur {
				t.Fatalf("End(%d): LastFence=%d, want %d", tok, lastFence, cur)
			}
			wantLeases(t, b, lease)
		}
		// The lease is still the recorded one: its holder can refresh it.
		if _, err := b.Refresh(ctx, "a", cur, 2*time.Second, expires2); err != nil {
			t.Fatalf("Refresh after a stale End: %v", err)
		}
		// Ending a resource that was never granted is a no-op too.
		if lastFence, err := b.End(ctx, "never", 1); err != nil || lastFence != 0 {
			t.Fatalf("End(never)=%d, %v; want 0, nil", lastFence, err)
		}
		wantLeases(t, b, lease)
	})
}

func testHandoff(t *testing.T, open func(t *testing.T) Backend) {
	// One step ends the old lease and grants the next token: afterwards the
	// old token can neither renew, end nor write, and the fence is the new
	// token.
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		old := grantAt(t, b, "a", "A", time.Second, expires1)
		tb := grantAt(t, b, "b", "B", time.Second, expires1)
		put(t, b, "a", "k", "A", old, fence.Cond{})
		next, lastFence, err := b.Handoff(ctx, "a", old, "N", 2*time.Second, expires2)
		if err != nil {
			t.Fatalf("Handoff: %v", err)
		}
		if next != old+1 || lastFence != next {
			t.Fatalf("Handoff: Token=%d, LastFence=%d; want %d, %d", next, lastFence, old+1, old+1)
		}
		lease := fence.Lease{Resource: "a", Holder: "N", Token: next, TTL: 2 * time.Second, Expires: expires2}
		other := fence.Lease{Resource: "b", Holder: "B", Token: tb, TTL: time.Second, Expires: expires1}
		wantLeases(t, b, lease, other)
		wantFence(t, b, "a", next)
		if got := lastToken(t, b, "a"); got != next {
			t.Fatalf("LastToken=%d, want %d", got, next)
		}
		_, err = b.Refresh(ctx, "a", old, time.Hour, expires1)
		wantLeaseLost(t, err, "a", old, next)
		if lastFence, err := b.End(ctx, "a", old); err != nil || lastFence != next {
			t.Fatalf("End(old)=%d, %v; want %d, nil", lastFence, err, next)
		}
		_, err = b.Put(ctx, "a", "k", []byte("late"), old, fence.Cond{})
		wantFenced(t, err, "a", old, next)
		wantLeases(t, b, lease, other)
		// The new lease is the recorded one, and hands off in turn.
		if _, err := b.Refresh(ctx, "a", next, 2*time.Second, expires2); err != nil {
			t.Fatalf("Refresh(next): %v", err)
		}
		after, _, err := b.Handoff(ctx, "a", next, "M", time.Second, expires1)
		if err != nil || after != next+1 {
			t.Fatalf("second Handoff=%d, %v; want %d, nil", after, err, next+1)
		}
		wantLeases(t, b, fence.Lease{Resource: "a", Holder: "M", Token: after, TTL: time.Second, Expires: expires1}, other)
		wantFence(t, b, "b", tb)
	})

	// Invariant 6: a stale hand-off changes nothing, neither the lease, nor
	// the tokens, nor the fence.
	t.Run("Stale", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		old := grantAt(t, b, "a", "A", time.Second, expires1)
		cur := grantAt(t, b, "a", "B", 2*time.Second, expires2)
		lease := fence.Lease{Resource: "a", Holder: "B", Token: cur, TTL: 2 * time.Second, Expires: expires2}
		for _, tok := range []fence.Token{old, cur + 1, fence.MaxToken} {
			_, _, err := b.Handoff(ctx, "a", tok, "N", time.Hour, expires1)
			wantLeaseLost(t, err, "a", tok, cur)
			wantLeases(t, b, lease)
			wantFence(t, b, "a", cur)
			if got := lastToken(t, b, "a"); got != cur {
				t.Fatalf("LastToken=%d after a stale Handoff, want %d", got, cur)
			}
		}
		// The lease is still the recorded one: its holder can refresh it.
		if _, err := b.Refresh(ctx, "a", cur, 2*time.Second, expires2); err != nil {
			t.Fatalf("Refresh after a stale Handoff: %v", err)
		}
		// A lease that has ended hands nothing off.
		if _, err := b.End(ctx, "a", cur); err != nil {
			t.Fatalf("End: %v", err)
		}
		_, _, err := b.Handoff(ctx, "a", cur, "N", time.Hour, expires1)
		wantLeaseLost(t, err, "a", cur, 0)
		_, _, err = b.Handoff(ctx, "never", 1, "N", time.Hour, expires1)
		wantLeaseLost(t, err, "never", 1, 0)
		wantLeases(t, b)
		if got, never := lastToken(t, b, "a"), lastToken(t, b, "never"); got != cur || never != 0 {
			t.Fatalf("LastToken=%d, %d (never); want %d, 0", got, never, cur)
		}
	})
}

func testLeases(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("Empty", func(t *testing.T) {
		b := open(t)
		wantLeases(t, b)
	})

	// Leases lists exactly the recorded leases, expired or not, with their
	// holder, TTL and expiry.
	t.Run("OK", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		grantAt(t, b, "a", "A-old", time.Minute, expires1)
		ta := grantAt(t, b, "a", "A", 1500*time.Millisecond, expires1)
		tb := grantAt(t, b, "b", "B", 24*time.Hour, expires2)
		tc := grantAt(t, b, "c", "C", 10*time.Millisecond, expired)
		td := grantAt(t, b, "d", "D", time.Second, expires2)
		want := []fence.Lease{
			{Resource: "a", Holder: "A", Token: ta, TTL: 1500 * time.Millisecond, Expires: expires1},
			{Resource: "b", Holder: "B", Token: tb, TTL: 24 * time.Hour, Expires: expires2},
			{Resource: "c", Holder: "C", Token: tc, TTL: 10 * time.Millisecond, Expires: expired},
			{Resource: "d", Holder: "D", Token: td, TTL: time.Second, Expires: expires2},
		}
		wantLeases(t, b, want...)
		if _, err := b.End(ctx, "d", td); err != nil {
			t.Fatalf("End: %v", err)
		}
		wantLeases(t, b, want[:3]...)
		// Storage writes do not touch leases.
		put(t, b, "a", "k", "v", ta, fence.Cond{})
		if _, err := b.Claim(ctx, "b", tb); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		wantLeases(t, b, want[:3]...)

		got, _, err := b.Leases(ctx)
		if err != nil {
			t.Fatalf("Leases: %v", err)
		}
		for _, l := range got {
			if l.Resource == "a" && !l.Expires.Equal(expires1) {
				t.Fatalf("Expires=%v, want %v", l.Expires, expires1)
			}
		}
	})
}

// wantDelays checks that Leases lists exactly the lock-delays want (resource: length).
func wantDelays(t *testing.T, b Backend, want map[string]time.Duration) {
	t.Helper()
	_, delays, err := b.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	got := map[string]time.Duration{}
	for _, d := range delays {
		got[d.Resource] = d.Delay
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays=%v, want %v", got, want)
	}
}

// testDelays checks that lock-delays are recorded while no lease is, and
// that a grant or a revoke ends them.
func testDelays(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	ctx := t.Context()
	wantDelays(t, b, map[string]time.Duration{})
	ta := grant(t, b, "a", "A")
	if err := b.SetDelay(ctx, "a", time.Second); err != nil {
		t.Fatalf("SetDelay while leased: %v", err)
	}
	wantDelays(t, b, map[string]time.Duration{}) // a lease is recorded: no delay
	if _, err := b.End(ctx, "a", ta); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]time.Duration{"a": 5 * time.Second, "b": time.Minute, "c": time.Second} {
		if err := b.SetDelay(ctx, name, d); err != nil {
			t.Fatalf("SetDelay(%q, %s): %v", name, d, err)
		}
	}
	wantDelays(t, b, map[string]time.Duration{"a": 5 * time.Second, "b": time.Minute, "c": time.Second})
	wantFence(t, b, "a", ta) // a delay changes no fence
	if err := b.SetDelay(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	grant(t, b, "a", "B")
	if _, _, err := b.Revoke(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	wantDelays(t, b, map[string]time.Duration{})
}

// testLastToken checks invariant 1 through the ledger's eyes: the last token
// never goes down, whatever happens to the leases.
func testLastToken(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("NeverDown", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		var last fence.Token
		for i := range 4 {
			tok := grant(t, b, "a", fmt.Sprintf("h%d", i))
			if tok != last+1 {
				t.Fatalf("Grant: Token=%d, want %d", tok, last+1)
			}
			last = tok
			if i%2 == 0 {
				if _, err := b.End(ctx, "a", tok); err != nil {
					t.Fatalf("End: %v", err)
				}
			} else if _, err := b.Refresh(ctx, "a", tok, time.Second, expires1); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if got := lastToken(t, b, "a"); got != last {
				t.Fatalf("LastToken=%d, want %d", got, last)
			}
			wantFence(t, b, "a", last)
		}
	})
}

// testOwner checks that a lease's owner, the principal in the ctx of Grant
// or Handoff (fence.WithOwner), is recorded with the lease and listed by
// Leases, so that a restored lease is still checked against it: kept by a
// refresh, replaced by a hand-off (the new lease is its grantee's), and gone
// with the lease after an end or a revoke. A grant without an owner records
// none.
func testOwner(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	ctx := t.Context()
	alice, bob := fence.WithOwner(ctx, "alice"), fence.WithOwner(ctx, "bob")
	ta, err := b.Grant(alice, "a", "A", time.Second, expires1)
	if err != nil {
		t.Fatalf("Grant as alice: %v", err)
	}
	tn := grantAt(t, b, "n", "N", time.Second, expires1) // no owner
	tr, err := b.Grant(bob, "r", "R", time.Second, expires1)
	if err != nil {
		t.Fatalf("Grant as bob: %v", err)
	}
	none := fence.Lease{Resource: "n", Holder: "N", Token: tn, TTL: time.Second, Expires: expires1}
	wantLeases(t, b,
		fence.Lease{Resource: "a", Holder: "A", Owner: "alice", Token: ta, TTL: time.Second, Expires: expires1},
		none,
		fence.Lease{Resource: "r", Holder: "R", Owner: "bob", Token: tr, TTL: time.Second, Expires: expires1})

	// A refresh (without an owner in ctx: the ledger checks none) keeps it.
	if _, err := b.Refresh(ctx, "a", ta, 2*time.Second, expires2); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	wantLeases(t, b,
		fence.Lease{Resource: "a", Holder: "A", Owner: "alice", Token: ta, TTL: 2 * time.Second, Expires: expires2},
		none,
		fence.Lease{Resource: "r", Holder: "R", Owner: "bob", Token: tr, TTL: time.Second, Expires: expires1})
	// A hand-off records the new grantee's owner; a stale one changes nothing.
	if _, _, err := b.Handoff(alice, "r", tr+1, "M", time.Hour, expires2); !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("stale Handoff: err=%v, want ErrLeaseLost", err)
	}
	next, _, err := b.Handoff(bob, "a", ta, "B", time.Second, expires1)
	if err != nil {
		t.Fatalf("Handoff to bob: %v", err)
	}
	wantLeases(t, b,
		fence.Lease{Resource: "a", Holder: "B", Owner: "bob", Token: next, TTL: time.Second, Expires: expires1},
		none,
		fence.Lease{Resource: "r", Holder: "R", Owner: "bob", Token: tr, TTL: time.Second, Expires: expires1})

	// An end and a revoke take the owner with the lease: the next grant
	// without one records none.
	if _, err := b.End(ctx, "a", next); err != nil {
		t.Fatalf("End: %v", err)
	}
	if _, _, err := b.Revoke(ctx, "r"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	ta2 := grantAt(t, b, "a", "A", time.Second, expires1)
	tr2 := grantAt(t, b, "r", "R", time.Second, expires1)
	wantLeases(t, b,
		fence.Lease{Resource: "a", Holder: "A", Token: ta2, TTL: time.Second, Expires: expires1},
		none,
		fence.Lease{Resource: "r", Holder: "R", Token: tr2, TTL: time.Second, Expires: expires1})
}

// testSession checks that Grant, GrantAll and Handoff record the session
// in ctx with the lease, that a refresh keeps it, and that an end or a
// revoke takes it with the lease.
func testSession(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	ctx := t.Context()
	sess := fence.SessionRef{Resource: fence.SessionResource("s"), Token: 9}
	in := fence.WithSession(ctx, sess)
	ta, err := b.Grant(in, "a", "A", time.Second, expires1)
	if err != nil {
		t.Fatalf("Grant in a session: %v", err)
	}
	tbc, err := b.GrantAll(in, []string{"b", "c"}, "A", time.Second, expires1)
	if err != nil {
		t.Fatalf("GrantAll in a session: %v", err)
	}
	tn := grantAt(t, b, "n", "N", time.Second, expires1)
	lease := func(res string, tok fence.Token, s fence.SessionRef) fence.Lease {
		holder := "A"
		if res == "n" {
			holder = "N"
		}
		return fence.Lease{Resource: res, Holder: holder, Token: tok, TTL: time.Second, Expires: expires1, Session: s}
	}
	none := fence.SessionRef{}
	wantLeases(t, b, lease("a", ta, sess), lease("b", tbc[0], sess), lease("c", tbc[1], sess), lease("n", tn, none))
	// A refresh keeps the session.
	if _, err := b.Refresh(ctx, "a", ta, time.Second, expires1); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	wantLeases(t, b, lease("a", ta, sess), lease("b", tbc[0], sess), lease("c", tbc[1], sess), lease("n", tn, none))
	// A hand-off records the session of ctx, none here; an end and a
	// revoke take the session with the lease, so the next grant without
	// one records none.
	next, _, err := b.Handoff(ctx, "a", ta, "A", time.Second, expires1)
	if err != nil {
		t.Fatalf("Handoff: %v", err)
	}
	nextIn, _, err := b.Handoff(in, "n", tn, "N", time.Second, expires1)
	if err != nil {
		t.Fatalf("Handoff in a session: %v", err)
	}
	if _, err := b.End(ctx, "b", tbc[0]); err != nil {
		t.Fatalf("End: %v", err)
	}
	if _, _, err := b.Revoke(ctx, "c"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	tb := grantAt(t, b, "b", "A", time.Second, expires1)
	tc := grantAt(t, b, "c", "A", time.Second, expires1)
	wantLeases(t, b, lease("a", next, none), lease("b", tb, none), lease("c", tc, none), lease("n", nextIn, sess))
}
