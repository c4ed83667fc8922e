package check_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// TestSearch_AgreesWithPorcupine: on simulated histories of safe and unsafe
// stores, and on the same histories with reads and revisions garbled at
// random (most of them no longer linearizable), the search says what
// porcupine's own checker says, partition by partition.
func TestSearch_AgreesWithPorcupine(t *testing.T) {
	illegal, legal := 0, 0
	for seed := range uint64(60) {
		cfg := simConfig{resources: 2, clients: 3, opsEach: 40, unknown: 0.08, unsafe: seed%3 == 0}
		ops := simulate(t, seed, cfg)
		if seed%2 == 1 {
			garble(ops, rand.New(rand.NewPCG(seed, 1)))
		}
		for _, fow := range []bool{false, true} {
			ours, theirs, _ := check.CompareSearch(ops, check.Options{FenceOnWrite: fow})
			if !slices.Equal(ours, theirs) {
				t.Fatalf("seed %d FenceOnWrite %v: search %v, porcupine %v", seed, fow, ours, theirs)
			}
			for _, v := range ours {
				if v == "illegal" {
					illegal++
				} else {
					legal++
				}
			}
		}
	}
	if illegal < 20 || legal < 20 {
		t.Fatalf("%d illegal and %d legal partitions: the test does not exercise both", illegal, legal)
	}
	t.Logf("%d illegal, %d legal partitions", illegal, legal)
}

// garble changes a few reads' values or revisions, and a few acknowledged
// writes' revisions.
func garble(ops []history.Op, rng *rand.Rand) {
	for range 3 {
		op := &ops[rng.IntN(len(ops))]
		switch {
		case op.Kind == history.KindRead && op.Outcome == history.OK:
			if rng.IntN(2) == 0 {
				op.Value += "?"
			} else {
				op.Rev++
			}
		case op.Mutates() && op.Outcome == history.OK:
			op.Rev = uint64(rng.IntN(int(op.Rev) + 1))
		case op.Kind == history.KindWrite && op.Outcome == history.Fenced:
			op.Outcome = history.OK
			op.Rev = 1 << 40
		}
	}
}
