package fencetest

import (
	"testing"

	"github.com/fence-lock/fence"
)

// world is a backend with some history, for tests of rejections:
//
//	"a":     granted to A (token 1, now stale), then to B (token 2);
//	        a/k written by A, then by B; a/x written by B; a/gone absent.
//	"b":     granted to C (token 1); b/k written by C.
//	"probe": granted, written only by next, to see the store-wide revision.
//	"never": never granted.
type world struct {
	b                       Backend
	stale, cur, tokB, probe fence.Token
	revK, revX, revB        fence.Rev // revisions of a/k, a/x, b/k
	rev                     fence.Rev // revision of the last accepted write
	extra                   []string  // more resources for observe to read
}

func newWorld(t *testing.T, open func(t *testing.T) Backend) *world {
	t.Helper()
	b := open(t)
	w := &world{b: b}
	w.stale = grant(t, b, "a", "A")
	put(t, b, "a", "k", "A1", w.stale, fence.Cond{})
	w.cur = grant(t, b, "a", "B")
	w.revK = put(t, b, "a", "k", "B1", w.cur, fence.Cond{}).Rev
	w.revX = put(t, b, "a", "x", "B2", w.cur, fence.Cond{}).Rev
	w.tokB = grant(t, b, "b", "C")
	w.revB = put(t, b, "b", "k", "C1", w.tokB, fence.Cond{}).Rev
	w.probe = grant(t, b, "probe", "P")
	w.rev = w.revB
	if w.stale != 1 || w.cur != 2 || w.tokB != 1 {
		t.Fatalf("Grant: tokens %d, %d, %d, want 1, 2, 1", w.stale, w.cur, w.tokB)
	}
	return w
}

func (w *world) observe(t *testing.T) observed {
	t.Helper()
	return observe(t, w.b, append([]string{"a", "b", "probe", "never"}, w.extra...), [][2]string{
		{"a", "k"}, {"a", "x"}, {"a", "gone"}, {"b", "k"}, {"b", "gone"}, {"never", "k"}, {"probe", "p"},
	})
}

// rejected runs fn, which must fail, and hands its error to check. Then it
// checks that the rejection changed nothing (invariant 5): fences, last tokens
// and items read as before, and the next accepted write gets the revision
// right after the last accepted one.
func (w *world) rejected(t *testing.T, fn func() error, check func(t *testing.T, err error)) {
	t.Helper()
	before := w.observe(t)
	err := fn()
	if err == nil {
		t.Fatalf("err=nil, want a rejection")
	}
	check(t, err)
	before.same(t, w.observe(t))
	w.next(t)
}

// next makes one accepted write and checks that its revision is one more than
// the last accepted write's.
func (w *world) next(t *testing.T) {
	t.Helper()
	res := put(t, w.b, "probe", "p", "probe", w.probe, fence.Cond{})
	if res.Rev != w.rev+1 {
		t.Fatalf("next write: Rev=%d, want %d (the store-wide revision moved)", res.Rev, w.rev+1)
	}
	w.rev = res.Rev
}
