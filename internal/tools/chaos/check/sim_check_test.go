package check_test

import (
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
)

// TestCheck_Performance: 20 resources x 4 clients x 500 ops of a correct
// fenced store check in a few seconds and are linearizable.
func TestCheck_Performance(t *testing.T) {
	ops := simulate(t, 42, simConfig{resources: 20, clients: 4, opsEach: 500, unknown: 0.005})
	start := time.Now()
	rep := check.Check(ops, nil, check.Options{Timeout: 30 * time.Second})
	took := time.Since(start)
	t.Logf("%d ops (%d in the model, largest partition %d): %v, porcupine %d ms; accepted %d, fenced %d, stale attempts %d, counts %v",
		len(ops), rep.Linearizability.Ops, rep.Linearizability.MaxOps, took, rep.Linearizability.DurationMS,
		rep.Accepted, rep.Fenced, rep.StaleAttempts, rep.Counts)
	for _, c := range rep.Checkers {
		if !c.OK {
			t.Errorf("%s: %d violations: %s", c.Name, c.Count, violations(c))
		}
	}
	if len(rep.Linearizability.Partitions) != 20 || rep.Linearizability.Result != "ok" {
		t.Errorf("Linearizability=%s with %d partitions", rep.Linearizability.Result, len(rep.Linearizability.Partitions))
	}
	if rep.Fenced == 0 || rep.StaleAttempts == 0 || rep.Counts["write/unknown"] == 0 || rep.Counts["acquire/unknown"] == 0 {
		t.Errorf("the simulation is too tame: %v", rep.Counts)
	}
	if took > 10*time.Second {
		t.Errorf("Check took %v, want a few seconds", took)
	}
}

// TestCheck_SimulatedSafe: many small, very ambiguous runs of a correct store
// raise no violation.
func TestCheck_SimulatedSafe(t *testing.T) {
	for seed := range uint64(40) {
		ops := simulate(t, seed, simConfig{resources: 3, clients: 3, opsEach: 60, unknown: 0.08})
		rep := check.Check(ops, nil, check.Options{Timeout: 10 * time.Second})
		for _, c := range rep.Checkers {
			if !c.OK {
				t.Fatalf("seed %d: %s: %s", seed, c.Name, violations(c))
			}
		}
	}
}

// TestCheck_SimulatedUnsafe: the same workload against a store that checks no
// fence is caught.
func TestCheck_SimulatedUnsafe(t *testing.T) {
	ops := simulate(t, 7, simConfig{resources: 4, clients: 4, opsEach: 150, unknown: 0.01, unsafe: true})
	rep := check.Check(ops, nil, check.Options{Timeout: 10 * time.Second})
	for _, name := range []string{check.TokenOrder, check.StaleAccepted, check.Linearizable} {
		if c := rep.Result(name); c.OK {
			t.Errorf("%s: OK on an unsafe store", name)
		}
	}
	if rep.Fenced != 0 || rep.StaleAttempts == 0 || rep.StaleRejected != 0 {
		t.Errorf("Fenced=%d StaleAttempts=%d StaleRejected=%d", rep.Fenced, rep.StaleAttempts, rep.StaleRejected)
	}
	if rep.Result(check.TokenMonotonic).Count != 0 || rep.Result(check.LostWrites).Count != 0 {
		t.Errorf("token-monotonic or lost-writes fired: the lock service and durability were fine")
	}
	t.Logf("unsafe: %d violations; stale attempts %d", rep.Violations(), rep.StaleAttempts)
}
