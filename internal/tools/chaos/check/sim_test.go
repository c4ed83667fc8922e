package check_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// simConfig shapes a simulated run.
type simConfig struct {
	resources int     // resources, each with keysPer keys
	clients   int     // clients per resource
	opsEach   int     // ops each client completes
	unknown   float64 // chance that an acquire, write or txn ends with an unknown outcome
	unsafe    bool    // the store accepts every write (last writer wins)
}

const keysPer = 3

type simKey struct {
	value string
	rev   uint64
}

type simRes struct {
	name        string
	lastToken   uint64
	fence       uint64
	holder      int // client index, or -1
	holderToken uint64
	keys        map[string]simKey
}

type simClient struct {
	id      int
	res     *simRes
	token   uint64 // 0 when it holds nothing it knows of
	done    int
	pending *simPending
}

type simPending struct {
	op      history.Op
	applied bool
	unknown bool
	other   *simRes // a txn's second resource
}

// simulate returns the history of clients running against a simulated fenced
// store (or, with cfg.unsafe, one that checks no fence). Every op takes
// effect at one instant strictly between its call and its return, and the
// clients' ops interleave at random, so the history is linearizable by
// construction when the store is safe.
func simulate(tb testing.TB, seed uint64, cfg simConfig) []history.Op {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	res := make([]*simRes, cfg.resources)
	for i := range res {
		res[i] = &simRes{name: fmt.Sprintf("res-%02d", i), holder: -1, keys: make(map[string]simKey)}
	}
	var clients []*simClient
	for i := range cfg.resources * cfg.clients {
		clients = append(clients, &simClient{id: i, res: res[i/cfg.clients]})
	}
	var ops []history.Op
	var rev uint64
	now, seq := int64(0), 0
	record := func(op history.Op) {
		op.ID = int64(len(ops) + 1)
		ops = append(ops, op)
	}
	active := slices.Clone(clients)
	for len(active) > 0 {
		now += 1 + rng.Int64N(1000)
		i := rng.IntN(len(active))
		c := active[i]
		p := c.pending
		switch {
		case p == nil:
			if c.done == cfg.opsEach {
				active = slices.Delete(active, i, i+1)
				continue
			}
			c.pending = simStart(rng, c, res, now, &seq)
		case !p.applied:
			p.applied = true
			p.unknown = rng.Float64() < cfg.unknown && p.op.Kind != history.KindRead && p.op.Kind != history.KindRelease
			if p.unknown && rng.IntN(2) == 0 {
				p.op.Outcome = history.Unknown // and it never happened
				if p.op.Kind == history.KindAcquire {
					c.token = 0
				}
				continue
			}
			simApply(rng, c, p, &rev, cfg.unsafe)
			if p.unknown {
				p.op.Outcome, p.op.Rev = history.Unknown, 0
				if p.op.Kind == history.KindAcquire {
					p.op.Token, c.token = 0, 0 // granted, but the client does not know
				}
			}
		default:
			if !p.unknown {
				p.op.Return = now
			}
			record(p.op)
			c.pending = nil
			c.done++
		}
	}
	// The harness's final reads.
	for _, r := range res {
		for k := range keysPer {
			key := fmt.Sprintf("k%d", k)
			now += 10
			v := r.keys[key]
			record(history.Op{Client: -1, Kind: history.KindRead, Resource: r.name, Key: key, Value: v.value, Rev: v.rev, Call: now, Return: now + 5, Outcome: history.OK})
		}
	}
	return ops
}

// simStart picks c's next op.
func simStart(rng *rand.Rand, c *simClient, res []*simRes, now int64, seq *int) *simPending {
	op := history.Op{Client: c.id, Resource: c.res.name, Call: now}
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(keysPer)) }
	value := func() string { *seq++; return fmt.Sprintf("c%d-%d", c.id, *seq) }
	p := &simPending{}
	x := rng.Float64()
	switch {
	case c.token == 0 || x < 0.05:
		op.Kind = history.KindAcquire
	case x < 0.40:
		op.Kind, op.Key = history.KindRead, key()
	case x < 0.80:
		op.Kind, op.Key, op.Token, op.Value = history.KindWrite, key(), c.token, value()
	case x < 0.90:
		op.Kind, op.Resource = history.KindTxn, ""
		op.Writes = []history.Write{{Resource: c.res.name, Key: key(), Value: value(), Token: c.token}}
		if rng.IntN(2) == 0 {
			op.Writes = append(op.Writes, history.Write{Resource: c.res.name, Key: key(), Value: value(), Token: c.token})
		}
		if rng.IntN(3) == 0 && len(res) > 1 {
			// A write to a neighbour, with the fence seen now: it may
			// be stale by the time the txn applies.
			i := slices.Index(res, c.res)
			p.other = res[(i+1)%len(res)]
			op.Writes = append(op.Writes, history.Write{Resource: p.other.name, Key: key(), Value: value(), Token: max(p.other.fence, 1)})
		}
	default:
		op.Kind, op.Token = history.KindRelease, c.token
	}
	p.op = op
	return p
}

// simApply makes p take effect on the store now.
func simApply(rng *rand.Rand, c *simClient, p *simPending, rev *uint64, unsafe bool) {
	op := &p.op
	r := c.res
	op.Outcome = history.OK
	switch op.Kind {
	case history.KindAcquire:
		switch {
		case r.holder == c.id:
			op.Token = r.holderToken // the same holder again
		case r.holder < 0 || rng.IntN(3) == 0: // free, or the lease expired
			r.lastToken++
			r.fence = r.lastToken
			r.holder, r.holderToken = c.id, r.lastToken
			op.Token = r.lastToken
		default:
			op.Outcome, op.Error = history.Rejected, "lock_held"
			return
		}
		c.token = op.Token
	case history.KindRead:
		v := r.keys[op.Key]
		op.Value, op.Rev = v.value, v.rev
	case history.KindWrite:
		if op.Token < r.fence && !unsafe {
			op.Outcome, op.Error = history.Fenced, "fenced"
			c.token = 0
			return
		}
		*rev++
		r.fence = max(r.fence, op.Token)
		r.keys[op.Key] = simKey{op.Value, *rev}
		op.Rev = *rev
	case history.KindTxn:
		byName := map[string]*simRes{r.name: r}
		if p.other != nil {
			byName[p.other.name] = p.other
		}
		var stale []string
		for _, w := range op.Writes {
			if w.Token < byName[w.Resource].fence && !unsafe {
				stale = append(stale, w.Resource)
			}
		}
		if len(stale) > 0 {
			slices.Sort(stale)
			op.Outcome, op.Error, op.Resource = history.Fenced, "fenced", stale[0]
			if stale[0] == r.name {
				c.token = 0
			}
			return
		}
		*rev++
		for _, w := range op.Writes {
			wr := byName[w.Resource]
			wr.fence = max(wr.fence, w.Token)
			wr.keys[w.Key] = simKey{w.Value, *rev}
		}
		op.Rev = *rev
	case history.KindRelease:
		if r.holder == c.id && r.holderToken == op.Token {
			r.holder = -1
		} else {
			op.Outcome, op.Error = history.Rejected, "lease_lost"
		}
		c.token = 0
	}
}
