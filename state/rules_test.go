package state_test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// mapTx is a state.Tx on maps, as in package memory.
type mapTx struct {
	resources map[string]state.Resource
	entries   map[[2]string]state.Entry
	rev       fence.Rev
}

func newTx() *mapTx {
	return &mapTx{resources: map[string]state.Resource{}, entries: map[[2]string]state.Entry{}}
}

func (t *mapTx) Resource(name string) (state.Resource, error) { return t.resources[name], nil }

func (t *mapTx) SetResource(name string, r state.Resource) error {
	t.resources[name] = r
	return nil
}

func (t *mapTx) Entry(resource, key string) (state.Entry, bool, error) {
	e, ok := t.entries[[2]string{resource, key}]
	return e, ok, nil
}

func (t *mapTx) SetEntry(resource, key string, e state.Entry) error {
	t.entries[[2]string{resource, key}] = e
	return nil
}

func (t *mapTx) DeleteEntry(resource, key string) error {
	delete(t.entries, [2]string{resource, key})
	return nil
}

func (t *mapTx) Rev() (fence.Rev, error) { return t.rev, nil }

func (t *mapTx) SetRev(rev fence.Rev) error {
	t.rev = rev
	return nil
}

// clone returns a deep enough copy of t to compare against later.
func (t *mapTx) Resources(fn func(name string, r state.Resource) error) error {
	for _, name := range slices.Sorted(maps.Keys(t.resources)) {
		if err := fn(name, t.resources[name]); err != nil {
			return err
		}
	}
	return nil
}

func (t *mapTx) clone() *mapTx {
	return &mapTx{resources: maps.Clone(t.resources), entries: maps.Clone(t.entries), rev: t.rev}
}

// same fails the test unless t holds what before held.
func (t *mapTx) same(tb testing.TB, before *mapTx) {
	tb.Helper()
	if t.rev != before.rev {
		tb.Fatalf("Rev=%d, want %d (unchanged)", t.rev, before.rev)
	}
	if !reflect.DeepEqual(t.resources, before.resources) {
		tb.Fatalf("resources=%+v, want %+v (unchanged)", t.resources, before.resources)
	}
	if !maps.EqualFunc(t.entries, before.entries, func(a, b state.Entry) bool {
		return a.Rev == b.Rev && a.Token == b.Token && string(a.Value) == string(b.Value)
	}) {
		tb.Fatalf("entries=%+v, want %+v (unchanged)", t.entries, before.entries)
	}
}

// manyFences returns n fences, of resources r0, r1, ...
func manyFences(n int) map[string]fence.Token {
	m := make(map[string]fence.Token, n)
	for i := range n {
		m[fmt.Sprintf("r%d", i)] = 1
	}
	return m
}

func TestValidateTxn(t *testing.T) {
	put := func(resource, key string, n int) fence.Op {
		return fence.Op{Kind: fence.OpPut, Resource: resource, Key: key, Value: make([]byte, n)}
	}
	f := map[string]fence.Token{"a": 1, "b": fence.MaxToken}
	for _, c := range []struct {
		name string
		txn  fence.Txn
		want error // nil: valid
	}{
		{"Empty", fence.Txn{}, nil},
		{"FencesOnly", fence.Txn{Fences: f}, nil},
		{"IfOnly", fence.Txn{If: []fence.Compare{{Resource: "c", Key: "k"}}}, nil},
		{"OK", fence.Txn{Fences: f, If: []fence.Compare{{Resource: "c", Key: "x/y", Rev: 3}},
			Then: []fence.Op{put("a", "k", 1), {Kind: fence.OpDelete, Resource: "b", Key: "k"}}}, nil},
		{"MaxValueSize", fence.Txn{Fences: f, Then: []fence.Op{put("a", "k", fence.MaxValueSize)}}, nil},
		{"MaxEntries", fence.Txn{Fences: manyFences(fence.MaxTxnEntries), If: make([]fence.Compare, fence.MaxTxnEntries)}, fence.ErrBadRequest}, // the compares' empty names, not their number
		{"TooManyFences", fence.Txn{Fences: manyFences(fence.MaxTxnEntries + 1)}, fence.ErrTooLarge},
		{"TooManyCompares", fence.Txn{If: make([]fence.Compare, fence.MaxTxnEntries+1)}, fence.ErrTooLarge},
		{"TooManyOps", fence.Txn{Fences: f, Then: make([]fence.Op, fence.MaxTxnEntries+1)}, fence.ErrTooLarge},

		{"FenceNameEmpty", fence.Txn{Fences: map[string]fence.Token{"": 1}}, fence.ErrBadRequest},
		{"FenceNameControl", fence.Txn{Fences: map[string]fence.Token{"a\x7f": 1}}, fence.ErrBadRequest},
		{"FenceNameTooLong", fence.Txn{Fences: map[string]fence.Token{strings.Repeat("a", fence.MaxNameLen+1): 1}}, fence.ErrBadRequest},
		{"FenceNameInvalidUTF8", fence.Txn{Fences: map[string]fence.Token{"\xc3": 1}}, fence.ErrBadRequest},
		{"FenceTokenZero", fence.Txn{Fences: map[string]fence.Token{"a": 0}}, fence.ErrInvalidToken},
		{"FenceTokenTooLarge", fence.Txn{Fences: map[string]fence.Token{"a": fence.MaxToken + 1}}, fence.ErrInvalidToken},
		{"IfResourceEmpty", fence.Txn{If: []fence.Compare{{Resource: "", Key: "k"}}}, fence.ErrBadRequest},
		{"IfKeyDotDot", fence.Txn{If: []fence.Compare{{Resource: "a", Key: "x/../y"}}}, fence.ErrBadRequest},
		{"OpKeyEmpty", fence.Txn{Fences: f, Then: []fence.Op{put("a", "", 1)}}, fence.ErrBadRequest},
		{"OpKeyEmptySegment", fence.Txn{Fences: f, Then: []fence.Op{put("a", "x//y", 1)}}, fence.ErrBadRequest},
		{"OpResourceNewline", fence.Txn{Fences: f, Then: []fence.Op{put("a\n", "k", 1)}}, fence.ErrBadRequest},
		{"OpKindUnknown", fence.Txn{Fences: f, Then: []fence.Op{{Kind: "increment", Resource: "a", Key: "k"}}}, fence.ErrBadRequest},
		{"OpKindEmpty", fence.Txn{Fences: f, Then: []fence.Op{{Resource: "a", Key: "k"}}}, fence.ErrBadRequest},
		{"OpKindCase", fence.Txn{Fences: f, Then: []fence.Op{{Kind: "PUT", Resource: "a", Key: "k"}}}, fence.ErrBadRequest},
		{"ValueTooLarge", fence.Txn{Fences: f, Then: []fence.Op{put("a", "k", 1), put("a", "big", fence.MaxValueSize+1)}}, fence.ErrTooLarge},
		{"FenceRequired", fence.Txn{Fences: f, Then: []fence.Op{put("a", "k", 1), put("c", "k", 1)}}, fence.ErrFenceRequired},
		{"FenceRequiredNoFences", fence.Txn{Then: []fence.Op{{Kind: fence.OpDelete, Resource: "a", Key: "k"}}}, fence.ErrFenceRequired},
		// A compare on a resource does not stand in for its fence.
		{"FenceRequiredIf", fence.Txn{If: []fence.Compare{{Resource: "a", Key: "k"}}, Then: []fence.Op{put("a", "k", 1)}}, fence.ErrFenceRequired},
		// A malformed op is bad_request, which comes before fence_required.
		{"BadRequestBeforeFenceRequired", fence.Txn{Then: []fence.Op{put("c", "k", 1), {Kind: "x", Resource: "a", Key: "k"}}}, fence.ErrBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := state.ValidateTxn(&c.txn)
			if c.want == nil {
				if err != nil {
					t.Fatalf("ValidateTxn: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("ValidateTxn: err=%v, want %v", err, c.want)
			}
			if !state.IsRejection(err) {
				t.Fatalf("IsRejection(%v)=false, want true", err)
			}
			// Txn validates before it reads or changes anything.
			tx := newTx()
			before := tx.clone()
			if _, err := state.Txn(tx, &c.txn); !errors.Is(err, c.want) {
				t.Fatalf("Txn: err=%v, want %v", err, c.want)
			}
			tx.same(t, before)
		})
	}
}

func TestGrant(t *testing.T) {
	exp := time.Unix(1_900_000_000, 5)
	t.Run("OK", func(t *testing.T) {
		tx := newTx()
		for want := fence.Token(1); want <= 3; want++ {
			tok, err := state.Grant(tx, "a", fmt.Sprint("h", want), fmt.Sprint("p", want), fence.SessionRef{}, time.Second, exp)
			if err != nil || tok != want {
				t.Fatalf("Grant=%d, %v; want %d, nil", tok, err, want)
			}
		}
		want := state.Resource{LastToken: 3, LastFence: 3, LeaseToken: 3, Holder: "h3", Owner: "p3", TTL: time.Second, Expires: exp.UnixNano()}
		if got := tx.resources["a"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("Resource=%+v, want %+v", got, want)
		}
		if tx.rev != 0 {
			t.Fatalf("Rev=%d, want 0 (a grant is not a write)", tx.rev)
		}
	})

	// A grant never lowers a fence, even one above the tokens the ledger knows.
	t.Run("FenceNeverDown", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: 2, LastFence: 9}
		if tok, err := state.Grant(tx, "a", "h", "", fence.SessionRef{}, time.Second, exp); err != nil || tok != 3 {
			t.Fatalf("Grant=%d, %v; want 3, nil", tok, err)
		}
		if f := tx.resources["a"].LastFence; f != 9 {
			t.Fatalf("LastFence=%d, want 9", f)
		}
	})

	t.Run("ErrTokensExhausted", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: fence.MaxToken - 1, LastFence: fence.MaxToken - 1}
		tok, err := state.Grant(tx, "a", "last", "", fence.SessionRef{}, time.Second, exp)
		if err != nil || tok != fence.MaxToken {
			t.Fatalf("Grant=%d, %v; want %d, nil", tok, err, fence.MaxToken)
		}
		before := tx.clone()
		for range 2 {
			tok, err = state.Grant(tx, "a", "h", "", fence.SessionRef{}, time.Second, exp)
			if !errors.Is(err, state.ErrTokensExhausted) {
				t.Fatalf("Grant=%d, %v; want ErrTokensExhausted", tok, err)
			}
			tx.same(t, before)
		}
		// Other resources are not affected.
		if tok, err := state.Grant(tx, "b", "h", "", fence.SessionRef{}, time.Second, exp); err != nil || tok != 1 {
			t.Fatalf("Grant(b)=%d, %v; want 1, nil", tok, err)
		}
	})
}

func TestRevoke(t *testing.T) {
	exp := time.Unix(1_900_000_000, 5)
	t.Run("Held", func(t *testing.T) {
		tx := newTx()
		tok, _ := state.Grant(tx, "a", "h", "alice", fence.SessionRef{}, time.Second, exp)
		lastFence, revoked, err := state.Revoke(tx, "a")
		if err != nil || lastFence != tok+1 || revoked != tok {
			t.Fatalf("Revoke=%d, %d, %v; want %d, %d, nil", lastFence, revoked, err, tok+1, tok)
		}
		want := state.Resource{LastToken: tok + 1, LastFence: tok + 1}
		if got := tx.resources["a"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("Resource=%+v, want %+v (no lease)", got, want)
		}
		if _, err := state.Refresh(tx, "a", tok, time.Second, exp); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Refresh of the revoked lease: err=%v, want ErrLeaseLost", err)
		}
		if _, err := state.Put(tx, "a", "k", nil, tok, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Put with the revoked token: err=%v, want ErrFenced", err)
		}
		if next, _ := state.Grant(tx, "a", "h2", "", fence.SessionRef{}, time.Second, exp); next != tok+2 {
			t.Fatalf("Grant after Revoke=%d, want %d", next, tok+2)
		}
	})
	t.Run("Free", func(t *testing.T) {
		tx := newTx()
		lastFence, revoked, err := state.Revoke(tx, "a")
		if err != nil || lastFence != 1 || revoked != 0 {
			t.Fatalf("Revoke=%d, %d, %v; want 1, 0, nil", lastFence, revoked, err)
		}
	})
	t.Run("ErrTokensExhausted", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: fence.MaxToken, LastFence: fence.MaxToken}
		before := tx.clone()
		if _, _, err := state.Revoke(tx, "a"); !errors.Is(err, state.ErrTokensExhausted) {
			t.Fatalf("Revoke: err=%v, want ErrTokensExhausted", err)
		}
		tx.same(t, before)
	})
}

// The tests below set a fence below the last token, which grants alone never
// do (a grant raises the fence to its token), to see that writes, claims and
// txns raise the fence themselves, and that rejections raise nothing.

func TestPut_RaisesFence(t *testing.T) {
	tx := newTx()
	tx.resources["a"] = state.Resource{LastToken: 5, LastFence: 2, LeaseToken: 5, Holder: "e"}
	for _, c := range []struct {
		token fence.Token
		want  error // nil: accepted
	}{
		{1, fence.ErrFenced},
		{3, nil},
		{2, fence.ErrFenced}, // the fence is 3 now
		{3, nil},
		{6, fence.ErrTokenNotIssued},
		{5, nil},
		{4, fence.ErrFenced},
	} {
		before := tx.clone()
		res, err := state.Put(tx, "a", "k", []byte("v"), c.token, fence.Cond{})
		if c.want != nil {
			if !errors.Is(err, c.want) {
				t.Fatalf("Put(token %d): err=%v, want %v", c.token, err, c.want)
			}
			tx.same(t, before)
			continue
		}
		if err != nil {
			t.Fatalf("Put(token %d): %v", c.token, err)
		}
		if res.LastFence != c.token || tx.resources["a"].LastFence != c.token {
			t.Fatalf("Put(token %d): LastFence=%d (stored %d), want %d", c.token, res.LastFence, tx.resources["a"].LastFence, c.token)
		}
		if res.Rev != before.rev+1 {
			t.Fatalf("Put(token %d): Rev=%d, want %d", c.token, res.Rev, before.rev+1)
		}
		// Holder only for the recorded lease's token.
		if want := map[bool]string{true: "e", false: ""}[c.token == 5]; res.Holder != want {
			t.Fatalf("Put(token %d): Holder=%q, want %q", c.token, res.Holder, want)
		}
	}
}

func TestClaim_RaisesFence(t *testing.T) {
	tx := newTx()
	tx.rev = 10
	tx.resources["a"] = state.Resource{LastToken: 5, LastFence: 2}
	res, err := state.Claim(tx, "a", 4)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if res.Rev != 10 || res.LastFence != 4 || tx.resources["a"].LastFence != 4 || tx.rev != 10 {
		t.Fatalf("Claim: %+v, stored fence %d, rev %d; want Rev 10, LastFence 4, rev unchanged", res, tx.resources["a"].LastFence, tx.rev)
	}
	before := tx.clone()
	if _, err := state.Claim(tx, "a", 3); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("Claim(3) after Claim(4): err=%v, want ErrFenced", err)
	}
	tx.same(t, before)
}

func TestTxn_RaisesFences(t *testing.T) {
	setup := func() *mapTx {
		tx := newTx()
		tx.rev = 10
		tx.resources["a"] = state.Resource{LastToken: 5, LastFence: 2}
		tx.resources["b"] = state.Resource{LastToken: 5, LastFence: 2}
		tx.entries[[2]string{"a", "k"}] = state.Entry{Value: []byte("old"), Rev: 7, Token: 2}
		return tx
	}
	op := fence.Op{Kind: fence.OpPut, Resource: "a", Key: "k", Value: []byte("new")}

	// Every entry of Fences is raised, with or without an op on it.
	t.Run("OK", func(t *testing.T) {
		tx := setup()
		rev, err := state.Txn(tx, &fence.Txn{Fences: map[string]fence.Token{"a": 3, "b": 4}, Then: []fence.Op{op}})
		if err != nil || rev != 11 {
			t.Fatalf("Txn=%d, %v; want 11, nil", rev, err)
		}
		if fa, fb := tx.resources["a"].LastFence, tx.resources["b"].LastFence; fa != 3 || fb != 4 {
			t.Fatalf("LastFence=%d, %d, want 3, 4", fa, fb)
		}
		if e := tx.entries[[2]string{"a", "k"}]; string(e.Value) != "new" || e.Rev != 11 || e.Token != 3 {
			t.Fatalf("entry=%+v, want new at rev 11 with token 3", e)
		}
	})

	t.Run("NoOps", func(t *testing.T) {
		tx := setup()
		rev, err := state.Txn(tx, &fence.Txn{Fences: map[string]fence.Token{"b": 5}})
		if err != nil || rev != 10 || tx.rev != 10 {
			t.Fatalf("Txn=%d, %v (rev %d); want 10, nil", rev, err, tx.rev)
		}
		if fb := tx.resources["b"].LastFence; fb != 5 {
			t.Fatalf("LastFence=%d, want 5", fb)
		}
	})

	// A rejected txn raises no fence, not even those that passed their check.
	t.Run("Rejected", func(t *testing.T) {
		for _, c := range []struct {
			name string
			txn  fence.Txn
			want error
		}{
			{"Fenced", fence.Txn{Fences: map[string]fence.Token{"a": 3, "b": 1}, Then: []fence.Op{op}}, fence.ErrFenced},
			{"NotIssued", fence.Txn{Fences: map[string]fence.Token{"a": 3, "b": 6}, Then: []fence.Op{op}}, fence.ErrTokenNotIssued},
			{"Precondition", fence.Txn{Fences: map[string]fence.Token{"a": 3, "b": 4},
				If: []fence.Compare{{Resource: "a", Key: "k", Rev: 8}}, Then: []fence.Op{op}}, fence.ErrPreconditionFailed},
			{"PreconditionAbsent", fence.Txn{Fences: map[string]fence.Token{"a": 3},
				If: []fence.Compare{{Resource: "a", Key: "k", Rev: 0}}}, fence.ErrPreconditionFailed},
		} {
			t.Run(c.name, func(t *testing.T) {
				tx := setup()
				before := tx.clone()
				if _, err := state.Txn(tx, &c.txn); !errors.Is(err, c.want) {
					t.Fatalf("Txn: err=%v, want %v", err, c.want)
				}
				tx.same(t, before)
			})
		}
	})
}

func TestRefreshEnd(t *testing.T) {
	exp := time.Unix(1_900_000_000, 5)
	tx := newTx()
	tx.resources["a"] = state.Resource{LastToken: 4, LastFence: 4, LeaseToken: 4, Holder: "h", Owner: "alice", TTL: time.Second, Expires: 1}
	before := tx.clone()
	for _, tok := range []fence.Token{0, 3, 5} {
		if _, err := state.Refresh(tx, "a", tok, time.Minute, exp); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Refresh(%d): err=%v, want ErrLeaseLost", tok, err)
		}
		if f, err := state.End(tx, "a", tok); err != nil || f != 4 {
			t.Fatalf("End(%d)=%d, %v; want 4, nil", tok, f, err)
		}
		tx.same(t, before)
	}
	if f, err := state.Refresh(tx, "a", 4, time.Minute, exp); err != nil || f != 4 {
		t.Fatalf("Refresh=%d, %v; want 4, nil", f, err)
	}
	if l, ok := tx.resources["a"].Lease("a"); !ok || l.TTL != time.Minute || l.Expires.UnixNano() != exp.UnixNano() || l.Holder != "h" || l.Owner != "alice" || l.Token != 4 {
		t.Fatalf("Lease=%+v, %v; want token 4 held by h (owner alice) for 1m until %v", l, ok, exp)
	}
	if _, err := state.End(tx, "a", 4); err != nil {
		t.Fatalf("End: %v", err)
	}
	if l, ok := tx.resources["a"].Lease("a"); ok {
		t.Fatalf("Lease after End=%+v, want none", l)
	}
	if r := tx.resources["a"]; !reflect.DeepEqual(r, state.Resource{LastToken: 4, LastFence: 4}) {
		t.Fatalf("after End: %+v, want LastToken and LastFence 4 and no lease (no holder, no owner)", r)
	}
	// With no lease recorded, token 0 does not match the empty lease.
	if _, err := state.Refresh(tx, "a", 0, time.Minute, exp); !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("Refresh(0) without a lease: err=%v, want ErrLeaseLost", err)
	}
}

func TestHandoff(t *testing.T) {
	exp := time.Unix(1_900_000_000, 5)
	t.Run("OK", func(t *testing.T) {
		tx := newTx()
		old, _ := state.Grant(tx, "a", "h1", "alice", fence.SessionRef{}, time.Second, exp)
		next, lastFence, err := state.Handoff(tx, "a", old, "h2", "bob", fence.SessionRef{}, time.Minute, exp.Add(time.Hour))
		if err != nil || next != old+1 || lastFence != next {
			t.Fatalf("Handoff=%d, %d, %v; want %d, %d, nil", next, lastFence, err, old+1, old+1)
		}
		want := state.Resource{LastToken: next, LastFence: next, LeaseToken: next, Holder: "h2", Owner: "bob", TTL: time.Minute, Expires: exp.Add(time.Hour).UnixNano()}
		if got := tx.resources["a"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("Resource=%+v, want %+v", got, want)
		}
		// The same state as End and then Grant.
		two := newTx()
		state.Grant(two, "a", "h1", "alice", fence.SessionRef{}, time.Second, exp)
		state.End(two, "a", old)
		state.Grant(two, "a", "h2", "bob", fence.SessionRef{}, time.Minute, exp.Add(time.Hour))
		if got := two.resources["a"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("End+Grant: Resource=%+v, want %+v", got, want)
		}
		if _, err := state.Refresh(tx, "a", old, time.Second, exp); !errors.Is(err, fence.ErrLeaseLost) {
			t.Fatalf("Refresh of the old lease: err=%v, want ErrLeaseLost", err)
		}
		if _, err := state.Put(tx, "a", "k", nil, old, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Put with the old token: err=%v, want ErrFenced", err)
		}
		if tx.rev != 0 {
			t.Fatalf("Rev=%d, want 0 (a hand-off is not a write)", tx.rev)
		}
	})

	// A hand-off never lowers a fence, as a grant never does.
	t.Run("FenceNeverDown", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: 2, LastFence: 9, LeaseToken: 2, Holder: "h"}
		if next, lastFence, err := state.Handoff(tx, "a", 2, "h2", "", fence.SessionRef{}, time.Second, exp); err != nil || next != 3 || lastFence != 9 {
			t.Fatalf("Handoff=%d, %d, %v; want 3, 9, nil", next, lastFence, err)
		}
	})

	// A stale or unknown token changes nothing: not the lease, not the tokens.
	t.Run("ErrLeaseLost", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: 4, LastFence: 4, LeaseToken: 4, Holder: "h", Owner: "alice", TTL: time.Second, Expires: 1}
		tx.resources["free"] = state.Resource{LastToken: 4, LastFence: 4}
		before := tx.clone()
		for _, c := range []struct {
			resource string
			token    fence.Token
			current  fence.Token
		}{{"a", 3, 4}, {"a", 5, 4}, {"a", 0, 4}, {"free", 4, 0}, {"free", 0, 0}, {"never", 1, 0}} {
			_, _, err := state.Handoff(tx, c.resource, c.token, "h2", "bob", fence.SessionRef{}, time.Second, exp)
			var lost *fence.LeaseLostError
			if !errors.As(err, &lost) || lost.Resource != c.resource || lost.Presented != c.token || lost.Current != c.current {
				t.Fatalf("Handoff(%q, %d): err=%v, want LeaseLostError{Presented: %d, Current: %d}", c.resource, c.token, err, c.token, c.current)
			}
			if !state.IsRejection(err) {
				t.Fatalf("IsRejection(%v)=false, want true", err)
			}
			tx.same(t, before)
		}
	})

	// With no token left, the old lease stays recorded.
	t.Run("ErrTokensExhausted", func(t *testing.T) {
		tx := newTx()
		tx.resources["a"] = state.Resource{LastToken: fence.MaxToken, LastFence: fence.MaxToken, LeaseToken: fence.MaxToken, Holder: "h", Owner: "alice"}
		before := tx.clone()
		if _, _, err := state.Handoff(tx, "a", fence.MaxToken, "h2", "bob", fence.SessionRef{}, time.Second, exp); !errors.Is(err, state.ErrTokensExhausted) {
			t.Fatalf("Handoff: err=%v, want ErrTokensExhausted", err)
		}
		tx.same(t, before)
	})
}

func TestIsRejection(t *testing.T) {
	for _, err := range []error{
		fence.ErrFenced, fence.ErrTokenNotIssued, fence.ErrLeaseLost, fence.ErrFenceRequired, fence.ErrInvalidToken,
		fence.ErrPreconditionFailed, fence.ErrNotFound, fence.ErrBadRequest, fence.ErrTooLarge,
		&fence.FencedError{Resource: "a", Presented: 1, LastFence: 2},
		&fence.TokenNotIssuedError{Resource: "a", Presented: 3, LastToken: 2},
		&fence.LeaseLostError{Resource: "a", Presented: 1},
		fmt.Errorf("wrapped: %w", &fence.FencedError{}),
	} {
		if !state.IsRejection(err) {
			t.Fatalf("IsRejection(%v)=false, want true", err)
		}
	}
	for _, err := range []error{nil, io.ErrUnexpectedEOF, errors.New("fence: stale fencing token"), fence.ErrClosed} {
		if state.IsRejection(err) {
			t.Fatalf("IsRejection(%v)=true, want false", err)
		}
	}
}

// TestRevisionsExhausted checks that the store revision never passes
// MaxRev, the highest If-Match can name: neither by a raise of the floor
// nor by a write.
func TestRevisionsExhausted(t *testing.T) {
	tx := newTx()
	tx.rev = state.MaxRev - 5
	if _, err := state.RaiseFloor(tx, 10); !errors.Is(err, state.ErrRevisionsExhausted) {
		t.Fatalf("RaiseFloor past MaxRev: %v, want ErrRevisionsExhausted", err)
	}
	if f, _ := state.Floor(tx); f != 0 || tx.rev != state.MaxRev-5 {
		t.Fatalf("a refused RaiseFloor left floor %d, revision %d", f, tx.rev)
	}
	tx.rev = state.MaxRev
	token, err := state.Grant(tx, "r", "h", "", fence.SessionRef{}, time.Second, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.Put(tx, "r", "k", []byte("v"), token, fence.Cond{}); !errors.Is(err, state.ErrRevisionsExhausted) {
		t.Fatalf("Put at MaxRev: %v, want ErrRevisionsExhausted", err)
	}
	if tx.rev != state.MaxRev {
		t.Fatalf("revision %d after the refusals, want MaxRev", tx.rev)
	}
}

// TestRaiseFloor checks that raising the floor sets it above the highest
// token of any resource, and records nothing for the resources.
func TestRaiseFloor(t *testing.T) {
	tx := newTx()
	tx.resources["a"] = state.Resource{LastToken: 4, LastFence: 3, LeaseToken: 4, Holder: "h", Owner: "alice", TTL: time.Second, Expires: 1}
	tx.resources["b"] = state.Resource{LastToken: 9, LastFence: 9}
	floor, err := state.RaiseFloor(tx, 10)
	if err != nil || floor != 19 {
		t.Fatalf("RaiseFloor=%d, %v; want 19", floor, err)
	}
	if got, _ := state.Floor(tx); got != 19 {
		t.Fatalf("Floor=%d, want 19", got)
	}
	if got, want := tx.resources["a"].LastToken, fence.Token(4); !reflect.DeepEqual(got, want) {
		t.Fatalf("the record of a: LastToken %d, want %d untouched (the floor is read through, not written)", got, want)
	}
	if _, err := state.RaiseFloor(tx, fence.MaxToken-18); !errors.Is(err, state.ErrTokensExhausted) {
		t.Fatalf("RaiseFloor past MaxToken: %v, want ErrTokensExhausted", err)
	}
	if _, err := state.RaiseFloor(tx, 0); !errors.Is(err, fence.ErrBadRequest) {
		t.Fatalf("RaiseFloor by 0: %v, want ErrBadRequest", err)
	}
}
