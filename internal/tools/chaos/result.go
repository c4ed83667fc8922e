package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// Result is what a run produced: where its history is, its faults and what
// the faults did.
type Result struct {
	History        string // Config.History
	Ops            int    // operations in the history
	Faults         []history.Fault
	PausesPastTTL  int // pauses that outlasted the client's TTL
	FencedByPauses int // writes fenced because their client had been paused past its TTL
	Duration       time.Duration
	ServerRestarts int // restarts of the embedded server (kill, bitflip, lose-unsynced, restore) or of a killed leader (leader-kill)
	// UnnamedRefusals counts the starts a bitflip made the server refuse
	// without naming the damaged file: an operator could not find it.
	UnnamedRefusals int
	Takeovers       int // leader-pauses during which another server took over
	// SkewedGrants counts the clock-skews during which grants were
	// acknowledged: leases that had to be timed across a step of the clock.
	SkewedGrants    int
	unknownAfterNet int
}

// Progress is a snapshot of a run under way, for Config.Progress.
type Progress struct {
	// Elapsed is the time since the workload started, and Remaining the
	// time left of Config.Duration: 0 once the workload ended, while the
	// clients stop and the harness reads the final values.
	Elapsed, Remaining time.Duration
	Ops                int            // operations in the history so far
	Errors             int            // of which failed or of unknown outcome (timeouts, resets, 5xx)
	Fenced             int            // writes and txns rejected as fenced
	Faults             map[string]int // faults injected so far, by kind (the run's own copy)
	Rate               float64        // operations per second since the previous snapshot
}

// FaultsBit reports whether the faults did something the checker could
// catch: a pause that outlasted its TTL, operations cut short by a kill
// (bitflip and lose-unsynced kill too) or a network fault, a leader
// replaced while it was paused, or grants made across a step of the clock.
func (r *Result) FaultsBit() bool {
	return r.PausesPastTTL > 0 || r.unknownAfterNet > 0 || r.ServerRestarts > 0 || r.Takeovers > 0 || r.SkewedGrants > 0
}

// result sums up the run: what bit, from one pass over the history (the
// paused clients' first writes after they woke; the operations cut short
// around a fault).
func (r *run) result() (*Result, error) {
	res := &Result{History: r.cfg.History, Ops: r.nops, Faults: r.faults, Duration: time.Since(r.start), ServerRestarts: r.restarts, Takeovers: r.takeovers, UnnamedRefusals: r.badRefusals, SkewedGrants: r.skewedGrants}
	pending := make(map[int][]pauseRecord) // by client: pauses whose first write after waking is still to come
	for _, p := range r.pauses {
		if time.Duration(p.end-p.start) > r.cfg.TTL {
			res.PausesPastTTL++
		}
		pending[p.client] = append(pending[p.client], p)
	}
	f, err := os.Open(r.cfg.History)
	if err != nil {
		return nil, fmt.Errorf("chaos: history: %w", err)
	}
	defer f.Close()
	hr := history.NewReader(f)
	for {
		e, err := hr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: history %s: %w", r.cfg.History, err)
		}
		op := &e.Op
		if e.IsFault {
			continue
		}
		// A client runs one op at a time, so its ops come in the order of
		// their calls: the first one found is its first after waking.
		ps := pending[op.Client]
		for i := 0; i < len(ps); i++ {
			p := ps[i]
			if op.Call < p.end || !writesWith(*op, p.resource, p.token) {
				continue
			}
			if op.Outcome == history.Fenced {
				res.FencedByPauses++
			}
			ps = slices.Delete(ps, i, i+1)
			i--
		}
		pending[op.Client] = ps
		if op.Outcome != history.Unknown && op.Outcome != history.Fail {
			continue
		}
		for _, w := range r.netWindows {
			if op.Call <= w[1] && op.Call >= w[0]-int64(2*r.cfg.TTL) {
				res.unknownAfterNet++
				break
			}
		}
	}
	return res, nil
}

// writesWith reports whether op writes resource with token.
func writesWith(op history.Op, resource string, token uint64) bool {
	switch op.Kind {
	case history.KindWrite:
		return op.Resource == resource && op.Token == token
	case history.KindTxn:
		for _, w := range op.Writes {
			if w.Resource == resource && w.Token == token {
				return true
			}
		}
	}
	return false
}
