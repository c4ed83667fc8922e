package fencetest

import (
	"testing"

	"github.com/fence-lock/fence"
)

type fences = map[string]fence.Token

func opPut(resource, key, value string) fence.Op {
	return fence.Op{Kind: fence.OpPut, Resource: resource, Key: key, Value: []byte(value)}
}

func opDelete(resource, key string) fence.Op {
	return fence.Op{Kind: fence.OpDelete, Resource: resource, Key: key}
}

func testTxn(t *testing.T, open func(t *testing.T) Backend) {
	// Several resources and keys in one step; every write shares one new revision.
	t.Run("OK", func(t *testing.T) {
		w := newWorld(t, open)
		rev := txn(t, w.b, &fence.Txn{
			Fences: fences{"a": w.cur, "b": w.tokB},
			If:     []fence.Compare{{Resource: "a", Key: "k", Rev: w.revK}, {Resource: "a", Key: "gone", Rev: 0}},
			Then:   []fence.Op{opPut("a", "k", "T1"), opPut("b", "new", "T2"), opDelete("a", "x"), opPut("a", "gone", "T3")},
		})
		if rev != w.rev+1 {
			t.Fatalf("Txn: Rev=%d, want %d", rev, w.rev+1)
		}
		w.rev = rev
		wantItem(t, w.b, "a", "k", "T1", rev, w.cur)
		wantItem(t, w.b, "b", "new", "T2", rev, w.tokB)
		wantItem(t, w.b, "a", "gone", "T3", rev, w.cur)
		wantAbsent(t, w.b, "a", "x")
		wantItem(t, w.b, "b", "k", "C1", w.revB, w.tokB)
		wantFence(t, w.b, "a", w.cur)
		wantFence(t, w.b, "b", w.tokB)
		w.next(t)
	})

	// A txn without ops checks and raises its fences and returns the current revision.
	t.Run("NoOps", func(t *testing.T) {
		w := newWorld(t, open)
		for _, tx := range []*fence.Txn{
			{},
			{Fences: fences{"a": w.cur, "b": w.tokB}},
			{Fences: fences{"a": w.cur}, If: []fence.Compare{{Resource: "b", Key: "k", Rev: w.revB}}},
		} {
			if rev := txn(t, w.b, tx); rev != w.rev {
				t.Fatalf("Txn(%+v): Rev=%d, want %d", tx, rev, w.rev)
			}
		}
		wantFence(t, w.b, "a", w.cur)
		w.next(t)
		w.rejected(t, func() error {
			_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.stale}})
			return err
		}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
	})

	// A resource that appears only in If needs no fence, even one never granted.
	t.Run("IfOnly", func(t *testing.T) {
		w := newWorld(t, open)
		rev := txn(t, w.b, &fence.Txn{
			Fences: fences{"a": w.cur},
			If: []fence.Compare{
				{Resource: "b", Key: "k", Rev: w.revB},
				{Resource: "never", Key: "k", Rev: 0},
			},
			Then: []fence.Op{opPut("a", "k", "T")},
		})
		if rev != w.rev+1 {
			t.Fatalf("Rev=%d, want %d", rev, w.rev+1)
		}
		wantItem(t, w.b, "a", "k", "T", rev, w.cur)
		wantFence(t, w.b, "never", 0)
	})

	// A failing compare applies nothing, raises nothing.
	t.Run("ErrPreconditionFailed", func(t *testing.T) {
		w := newWorld(t, open)
		for _, c := range []fence.Compare{
			{Resource: "b", Key: "k", Rev: 0},           // exists, compare says absent
			{Resource: "a", Key: "gone", Rev: w.revK},   // absent
			{Resource: "a", Key: "k", Rev: w.revK + 1},  // another revision
			{Resource: "never", Key: "k", Rev: w.revK},  // unknown resource
			{Resource: "a", Key: "k", Rev: w.rev + 100}, // a revision from the future
		} {
			w.rejected(t, func() error {
				_, err := w.b.Txn(t.Context(), &fence.Txn{
					Fences: fences{"a": w.cur, "b": w.tokB},
					If:     []fence.Compare{{Resource: "a", Key: "x", Rev: w.revX}, c},
					Then:   []fence.Op{opPut("a", "k", "T"), opPut("b", "k", "T"), opDelete("a", "x"), opPut("a", "gone", "T")},
				})
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrPreconditionFailed) })
		}
	})

	// One stale resource rejects the whole txn, even one without an op.
	t.Run("ErrFenced", func(t *testing.T) {
		w := newWorld(t, open)
		for _, then := range [][]fence.Op{
			{opPut("a", "k", "T"), opPut("b", "k", "T")},
			{opPut("b", "k", "T"), opDelete("b", "k"), opPut("b", "n", "T")}, // no op on the stale resource
			{opDelete("a", "x"), opDelete("b", "k")},
		} {
			w.rejected(t, func() error {
				_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.stale, "b": w.tokB}, Then: then})
				return err
			}, func(t *testing.T, err error) { wantFenced(t, err, "a", w.stale, w.cur) })
		}
	})

	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.cur, "b": w.tokB + 1},
				Then: []fence.Op{opPut("a", "k", "T"), opPut("b", "k", "T")}})
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "b", w.tokB+1, w.tokB) })
		w.rejected(t, func() error {
			_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.cur, "never": fence.MaxToken},
				Then: []fence.Op{opPut("a", "k", "T")}})
			return err
		}, func(t *testing.T, err error) { wantNotIssued(t, err, "never", fence.MaxToken, 0) })
	})

	// Every op needs its resource in Fences.
	t.Run("ErrFenceRequired", func(t *testing.T) {
		w := newWorld(t, open)
		for _, tx := range []*fence.Txn{
			{Fences: fences{"a": w.cur}, Then: []fence.Op{opPut("a", "k", "T"), opPut("b", "k", "T")}},
			{Fences: fences{"a": w.cur}, Then: []fence.Op{opDelete("b", "k")}},
			{Then: []fence.Op{opPut("a", "k", "T")}},
			{Fences: fences{"a": w.cur}, If: []fence.Compare{{Resource: "b", Key: "k", Rev: w.revB}}, Then: []fence.Op{opPut("b", "k", "T")}},
		} {
			w.rejected(t, func() error {
				_, err := w.b.Txn(t.Context(), tx)
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrFenceRequired) })
		}
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		w := newWorld(t, open)
		for _, tok := range []fence.Token{0, fence.MaxToken + 1} {
			w.rejected(t, func() error {
				_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.cur, "b": tok}, Then: []fence.Op{opPut("a", "k", "T")}})
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrInvalidToken) })
		}
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		w := newWorld(t, open)
		for _, tx := range []*fence.Txn{
			{Fences: fences{"a": w.cur}, Then: []fence.Op{opPut("a", "k", "T"), {Kind: "increment", Resource: "a", Key: "x"}}},
			{Fences: fences{"a": w.cur}, Then: []fence.Op{{Resource: "a", Key: "x"}}},
			{Fences: fences{"a": w.cur}, Then: []fence.Op{opPut("a", "x//y", "T")}},
			{Fences: fences{"a": w.cur, "": 1}, Then: []fence.Op{opPut("a", "k", "T")}},
			{Fences: fences{"a": w.cur}, If: []fence.Compare{{Resource: "a", Key: ".."}}, Then: []fence.Op{opPut("a", "k", "T")}},
		} {
			w.rejected(t, func() error {
				_, err := w.b.Txn(t.Context(), tx)
				return err
			}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrBadRequest) })
		}
	})

	t.Run("ErrTooLarge", func(t *testing.T) {
		w := newWorld(t, open)
		w.rejected(t, func() error {
			_, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.cur},
				Then: []fence.Op{opPut("a", "k", "T"), {Kind: fence.OpPut, Resource: "a", Key: "big", Value: make([]byte, fence.MaxValueSize+1)}}})
			return err
		}, func(t *testing.T, err error) { wantIs(t, err, fence.ErrTooLarge) })
	})

	// Of several failing resources, the first in byte order is named, and
	// token_not_issued wins over fenced, which wins over precondition_failed.
	t.Run("Precedence", func(t *testing.T) {
		w := newWorld(t, open)
		w.extra = []string{"B", "ab", "a b"}
		for _, r := range w.extra {
			grantN(t, w.b, r, "X", 2) // token 1 is stale, 2 current, 3 not issued
		}
		all := func(tok fence.Token) fences { return fences{"a": tok, "B": tok, "ab": tok, "a b": tok} }
		then := []fence.Op{opPut("a", "k", "T"), opPut("ab", "k", "T")}
		failIf := []fence.Compare{{Resource: "a", Key: "k", Rev: w.revK + 1}}
		for _, c := range []struct {
			name  string
			tx    *fence.Txn
			check func(t *testing.T, err error)
		}{
			{"FencedByteOrder", &fence.Txn{Fences: all(1), Then: then},
				func(t *testing.T, err error) { wantFenced(t, err, "B", 1, 2) }},
			{"NotIssuedByteOrder", &fence.Txn{Fences: all(3), Then: then},
				func(t *testing.T, err error) { wantNotIssued(t, err, "B", 3, 2) }},
			{"FencedAfterFirst", &fence.Txn{Fences: fences{"B": 2, "a": 2, "ab": 1, "a b": 1}, Then: then},
				func(t *testing.T, err error) { wantFenced(t, err, "a b", 1, 2) }},
			// "a" is fenced, but "b" was never issued its token: token_not_issued, for "b".
			{"NotIssuedOverFenced", &fence.Txn{Fences: fences{"a": w.stale, "b": w.tokB + 1}, Then: then[:1]},
				func(t *testing.T, err error) { wantNotIssued(t, err, "b", w.tokB+1, w.tokB) }},
			{"NotIssuedOverFencedByteOrder", &fence.Txn{Fences: fences{"B": 1, "a": 1, "ab": 3, "a b": 1}, Then: then},
				func(t *testing.T, err error) { wantNotIssued(t, err, "ab", 3, 2) }},
			{"FencedOverPrecondition", &fence.Txn{Fences: fences{"a": 2, "ab": 1}, If: failIf, Then: then},
				func(t *testing.T, err error) { wantFenced(t, err, "ab", 1, 2) }},
			{"NotIssuedOverPrecondition", &fence.Txn{Fences: fences{"a": 2, "ab": 3}, If: failIf, Then: then},
				func(t *testing.T, err error) { wantNotIssued(t, err, "ab", 3, 2) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				// Maps iterate in random order: an implementation that names
				// whichever resource it meets first fails some of the rounds.
				for range 8 {
					w.rejected(t, func() error {
						_, err := w.b.Txn(t.Context(), c.tx)
						return err
					}, c.check)
				}
			})
		}
	})

	// Deleting an absent key in a txn is not an error; the other ops apply.
	t.Run("DeleteAbsent", func(t *testing.T) {
		w := newWorld(t, open)
		rev := txn(t, w.b, &fence.Txn{Fences: fences{"a": w.cur}, Then: []fence.Op{opDelete("a", "gone"), opPut("a", "k", "T")}})
		if rev != w.rev+1 {
			t.Fatalf("Rev=%d, want %d", rev, w.rev+1)
		}
		wantAbsent(t, w.b, "a", "gone")
		wantItem(t, w.b, "a", "k", "T", rev, w.cur)
		if _, err := w.b.Txn(t.Context(), &fence.Txn{Fences: fences{"a": w.cur}, Then: []fence.Op{opDelete("a", "gone")}}); err != nil {
			t.Fatalf("Txn deleting only an absent key: %v", err)
		}
		wantAbsent(t, w.b, "a", "gone")
	})

	// Ops apply in order: a later op on the same key sees the earlier one.
	t.Run("Order", func(t *testing.T) {
		w := newWorld(t, open)
		rev := txn(t, w.b, &fence.Txn{Fences: fences{"a": w.cur}, Then: []fence.Op{
			opPut("a", "n", "1"), opDelete("a", "n"),
			opDelete("a", "k"), opPut("a", "k", "again"),
			opPut("a", "m", "1"), opPut("a", "m", "2"),
		}})
		if rev != w.rev+1 {
			t.Fatalf("Rev=%d, want %d", rev, w.rev+1)
		}
		wantAbsent(t, w.b, "a", "n")
		wantItem(t, w.b, "a", "k", "again", rev, w.cur)
		wantItem(t, w.b, "a", "m", "2", rev, w.cur)
	})

	// The compares see the state before the txn, not the txn's own ops.
	t.Run("IfBeforeThen", func(t *testing.T) {
		w := newWorld(t, open)
		rev := txn(t, w.b, &fence.Txn{Fences: fences{"a": w.cur},
			If:   []fence.Compare{{Resource: "a", Key: "k", Rev: w.revK}, {Resource: "a", Key: "gone", Rev: 0}},
			Then: []fence.Op{opPut("a", "gone", "T"), opDelete("a", "k")}})
		wantItem(t, w.b, "a", "gone", "T", rev, w.cur)
		wantAbsent(t, w.b, "a", "k")
	})
}
