package check

import (
	"cmp"
	"context"
	"slices"

	"github.com/anishathalye/porcupine"
)

// The linearizability search. It is porcupine's (checkSingle: Wing and
// Gong's search with Lowe's memoisation of the configurations already
// explored), with two differences that keep its memory linear in the length
// of a partition instead of quadratic:
//
//   - Porcupine caches every configuration it reaches with a copy of the set
//     of linearized operations as a bitset of the whole partition: n bits
//     for each of about n configurations, 1.2 GB for a partition of 100,000
//     operations. Here a cached set keeps only the words from the first
//     operation not yet linearized to the last one linearized, which is a
//     few words when few operations are concurrent: the operations before
//     the window are all linearized, those after it none.
//   - Porcupine's verbose mode records, each time it backtracks, the
//     longest linearizable prefix through every operation, copying the
//     stack for each; here only the longest prefix of all is kept, which is
//     what explain needs. The visualisation, which needs porcupine's own
//     record, is made by porcupine for the partitions that fail.
//
// The search explores the same configurations in the same order as
// porcupine's, so that its verdict and its running time are porcupine's.

// searchResult is the verdict of search.
type searchResult int

const (
	searchOK      searchResult = iota // linearizable
	searchIllegal                     // not linearizable
	searchUnknown                     // ctx ended first
)

// node is an event of the history in the search's doubly linked list: a
// call (match is its return) or a return (match is nil).
type node struct {
	value      any // Input of a call, Output of a return
	match      *node
	id         int
	prev, next *node
}

// lift takes a call and its return out of the list.
func lift(n *node) {
	n.prev.next = n.next
	n.next.prev = n.prev
	m := n.match
	m.prev.next = m.next
	if m.next != nil {
		m.next.prev = m.prev
	}
}

// unlift puts back what lift took out.
func unlift(n *node) {
	m := n.match
	m.prev.next = m
	if m.next != nil {
		m.next.prev = m
	}
	n.prev.next = n
	n.next.prev = n
}

// events returns the list of ops' calls and returns in time order, calls
// before returns at the same time (as porcupine orders them), headed by a
// sentinel.
func events(ops []porcupine.Operation) *node {
	type event struct {
		call bool
		id   int
		time int64
	}
	evs := make([]event, 0, 2*len(ops))
	for i, op := range ops {
		evs = append(evs, event{true, i, op.Call}, event{false, i, op.Return})
	}
	slices.SortStableFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.time, b.time); c != 0 {
			return c
		}
		switch {
		case a.call && !b.call:
			return -1
		case !a.call && b.call:
			return 1
		}
		return 0
	})
	rets := make([]*node, len(ops))
	head := &node{id: -1}
	last := head
	// Returns first, so that each call can point at its return.
	nodes := make([]node, len(evs))
	for i, e := range evs {
		if !e.call {
			nodes[i] = node{value: ops[e.id].Output, id: e.id}
			rets[e.id] = &nodes[i]
		}
	}
	for i, e := range evs {
		n := &nodes[i]
		if e.call {
			*n = node{value: ops[e.id].Input, match: rets[e.id], id: e.id}
		}
		n.prev, last.next = last, n
		last = n
	}
	return head
}

// window is the set of the operations linearized so far, with the bounds
// that let a copy of it keep only the words that are neither all ones nor
// all zeros at their ends.
type window struct {
	bits []uint64
	lo   int // the first word that is not all ones
	hi   int // the last word that is not zero; -1 if none
}

func newWindow(n int) *window {
	return &window{bits: make([]uint64, (n+63)/64), hi: -1}
}

func (w *window) set(i int) {
	k := i / 64
	w.bits[k] |= 1 << (i % 64)
	w.hi = max(w.hi, k)
	for w.lo < len(w.bits) && w.bits[w.lo] == ^uint64(0) {
		w.lo++
	}
}

func (w *window) clear(i int) {
	k := i / 64
	w.bits[k] &^= 1 << (i % 64)
	w.lo = min(w.lo, k)
	for w.hi >= 0 && w.bits[w.hi] == 0 {
		w.hi--
	}
}

// words returns the words between lo and hi, which with lo say what the set
// is: every bit before them is set, and every bit after them clear.
func (w *window) words() []uint64 {
	if w.hi < w.lo {
		return nil
	}
	return w.bits[w.lo : w.hi+1]
}

// hashWords hashes a window as porcupine hashes a bitset (MurmurHash3's
// finalizer prime), with lo first.
func hashWords(lo int, words []uint64) uint64 {
	const prime uint64 = 0xff51afd7ed558ccd
	h := uint64(lo) * prime
	for _, v := range words {
		h ^= v
		h *= prime
	}
	return h
}

// seen is a configuration the search has reached: the linearized set, as a
// window, and the model's state.
type seen struct {
	lo    int
	words []uint64
	state any
}

// search checks whether ops, one partition, are linearizable with respect
// to model. With searchIllegal, longest is the longest linearizable prefix
// it found, as indices of ops in order; with searchOK, a linearization.
func search(ctx context.Context, model porcupine.Model, ops []porcupine.Operation) (res searchResult, longest []int) {
	head := events(ops)
	lin := newWindow(len(ops))
	cache := make(map[uint64][]seen)
	type frame struct {
		n     *node
		state any
	}
	var calls []frame
	state := model.Init()
	n := head.next
	for steps := 0; head.next != nil; steps++ {
		if steps%1024 == 0 && ctx.Err() != nil {
			return searchUnknown, longest
		}
		if n.match != nil { // a call: try to linearize it here
			ok, next := model.Step(state, n.value, n.match.value)
			if !ok {
				n = n.next
				continue
			}
			lin.set(n.id)
			words := lin.words()
			key := hashWords(lin.lo, words)
			if model.Hash != nil {
				key ^= model.Hash(next)
			}
			bucket := cache[key]
			if slices.ContainsFunc(bucket, func(s seen) bool {
				return s.lo == lin.lo && slices.Equal(s.words, words) && model.Equal(s.state, next)
			}) {
				lin.clear(n.id) // explored already
				n = n.next
				continue
			}
			cache[key] = append(bucket, seen{lin.lo, slices.Clone(words), next})
			calls = append(calls, frame{n, state})
			state = next
			lift(n)
			n = head.next
			continue
		}
		// A return whose call could not be linearized: backtrack.
		if len(calls) == 0 {
			return searchIllegal, longest
		}
		if len(calls) > len(longest) {
			longest = longest[:0]
			for _, f := range calls {
				longest = append(longest, f.n.id)
			}
		}
		top := calls[len(calls)-1]
		calls = calls[:len(calls)-1]
		n, state = top.n, top.state
		lin.clear(n.id)
		unlift(n)
		n = n.next
	}
	longest = longest[:0]
	for _, f := range calls {
		longest = append(longest, f.n.id)
	}
	return searchOK, longest
}
