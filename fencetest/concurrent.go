package fencetest

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// testConcurrent races holders against each other: 16 workers grant
// themselves a few shared resources and write (put, claim, txn) with the last
// token they got, so their writes race newer grants; a fenced worker goes on
// writing for a while, as a zombie would, before it acquires again. Whatever
// the interleaving, the accepted writes must tell a story in which every
// grant got its own token, no resource accepted a lower token after a higher
// one, and every key holds its last accepted write (invariants 1 and 2).
func testConcurrent(t *testing.T, open func(t *testing.T) Backend) {
	t.Run("GrantAndWrite", func(t *testing.T) {
		b := open(t)
		ctx := t.Context()
		const workers, rounds = 16, 48
		resources := []string{"c0", "c1", "c2", "c3"}
		keys := []string{"k0", "k1"}

		type write struct {
			op            int // writes of one txn share op and rev
			resource, key string
			token         fence.Token
			rev           fence.Rev
			value         string
		}
		var (
			mu       sync.Mutex
			writes   []write
			grants   = map[string][]fence.Token{}
			accepted = map[string]fence.Token{} // highest accepted token, by resource
			ops      int
			rejects  int
		)
		record := func(ws ...write) {
			mu.Lock()
			defer mu.Unlock()
			ops++
			for _, w := range ws {
				w.op = ops
				writes = append(writes, w)
				accepted[w.resource] = max(accepted[w.resource], w.token)
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				holder := fmt.Sprintf("w%d", w)
				mine := map[string]fence.Token{} // the last token this worker was granted
				fenced := map[string]bool{}      // whether that token was fenced
				var lastRev fence.Rev
				grantOK := func(res string) bool {
					tok, err := b.Grant(ctx, res, holder, testTTL, time.Now().Add(testTTL))
					if err != nil {
						t.Errorf("Grant(%q): %v", res, err)
						return false
					}
					if tok <= mine[res] {
						t.Errorf("Grant(%q)=%d, want > %d (the worker's previous token)", res, tok, mine[res])
						return false
					}
					mu.Lock()
					grants[res] = append(grants[res], tok)
					mu.Unlock()
					mine[res], fenced[res] = tok, false
					return true
				}
				// rejected accepts only a fenced error that is right about its tokens.
				rejected := func(err error) bool {
					var fe *fence.FencedError
					if !errors.As(err, &fe) {
						t.Errorf("err=%v, want nil or *fence.FencedError", err)
						return false
					}
					if fe.Presented != mine[fe.Resource] || fe.LastFence <= fe.Presented {
						t.Errorf("FencedError=%+v, want Presented=%d < LastFence", *fe, mine[fe.Resource])
						return false
					}
					fenced[fe.Resource] = true
					mu.Lock()
					rejects++
					mu.Unlock()
					return true
				}
				accept := func(rev fence.Rev) bool {
					if rev <= lastRev {
						t.Errorf("worker %d: Rev=%d after %d, want a later revision for a later write", w, rev, lastRev)
						return false
					}
					lastRev = rev
					return true
				}
				for i := range rounds {
					runtime.Gosched()        // interleave, also where operations take no time
					ri := w % len(resources) // mostly its own resource, sometimes another
					if rng.IntN(4) == 0 {
						ri = rng.IntN(len(resources))
					}
					res, key := resources[ri], keys[rng.IntN(len(keys))]
					other := resources[(ri+1)%len(resources)]
					// A fenced worker mostly goes on writing, as a zombie
					// would, and now and then acquires the resource again.
					if mine[res] == 0 || fenced[res] && rng.IntN(24) == 0 || rng.IntN(48) == 0 {
						if !grantOK(res) {
							return
						}
						continue
					}
					if fenced[res] {
						_, err := b.Put(ctx, res, key, []byte("zombie"), mine[res], fence.Cond{})
						if err == nil {
							t.Errorf("Put(%q) with token %d accepted after it was fenced", res, mine[res])
							return
						}
						if !rejected(err) {
							return
						}
						continue
					}
					tok := mine[res]
					value := fmt.Sprintf("%s/%d", holder, i)
					switch op := rng.IntN(5); {
					case op == 0 && mine[other] != 0:
						rev, err := b.Txn(ctx, &fence.Txn{
							Fences: fences{res: tok, other: mine[other]},
							Then:   []fence.Op{opPut(res, key, value), opPut(other, key, value)},
						})
						if err != nil {
							if !rejected(err) {
								return
							}
							continue
						}
						if !accept(rev) {
							return
						}
						record(write{resource: res, key: key, token: tok, rev: rev, value: value},
							write{resource: other, key: key, token: mine[other], rev: rev, value: value})
					case op == 1:
						r, err := b.Claim(ctx, res, tok)
						if err != nil {
							if !rejected(err) {
								return
							}
							continue
						}
						if r.LastFence != tok {
							t.Errorf("Claim: LastFence=%d, want %d", r.LastFence, tok)
							return
						}
						mu.Lock()
						accepted[res] = max(accepted[res], tok)
						mu.Unlock()
					default:
						r, err := b.Put(ctx, res, key, []byte(value), tok, fence.Cond{})
						if err != nil {
							if !rejected(err) {
								return
							}
							continue
						}
						if r.LastFence != tok {
							t.Errorf("Put: LastFence=%d, want %d", r.LastFence, tok)
							return
						}
						if !accept(r.Rev) {
							return
						}
						record(write{resource: res, key: key, token: tok, rev: r.Rev, value: value})
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		if len(writes) == 0 || rejects == 0 {
			t.Fatalf("%d writes accepted, %d rejected: want both, or the test raced nothing", len(writes), rejects)
		}

		for _, res := range resources {
			// Every grant got its own token, and together they are 1..LastToken.
			g := slices.Sorted(slices.Values(grants[res]))
			for i, tok := range g {
				if tok != fence.Token(i+1) {
					t.Fatalf("%s: grants %v, want 1..%d each once", res, g, len(g))
				}
			}
			last := lastToken(t, b, res)
			if int(last) != len(g) {
				t.Fatalf("LastToken(%q)=%d, want %d", res, last, len(g))
			}
			if accepted[res] > last {
				t.Fatalf("%s: a write with token %d was accepted, LastToken=%d", res, accepted[res], last)
			}
			// The last grant raised the fence to LastToken, and no write can go above it.
			wantFence(t, b, res, last)
		}

		// One revision per accepted operation, shared only by the writes of one txn.
		slices.SortFunc(writes, func(a, b write) int { return cmp.Compare(a.rev, b.rev) })
		for i := 1; i < len(writes); i++ {
			if (writes[i].rev == writes[i-1].rev) != (writes[i].op == writes[i-1].op) {
				t.Fatalf("writes %+v and %+v: revisions must be equal exactly for writes of one operation", writes[i-1], writes[i])
			}
		}

		// Per resource, in revision order, accepted tokens never go down.
		for _, res := range resources {
			var prev write
			for _, w := range writes {
				if w.resource != res {
					continue
				}
				if w.token < prev.token {
					t.Fatalf("%s: token %d accepted at rev %d after token %d at rev %d", res, w.token, w.rev, prev.token, prev.rev)
				}
				prev = w
			}
		}

		// Each key holds the accepted write with the highest revision.
		final := map[[2]string]write{}
		for _, w := range writes {
			final[[2]string{w.resource, w.key}] = w
		}
		for _, res := range resources {
			for _, key := range keys {
				w, ok := final[[2]string{res, key}]
				if !ok {
					wantAbsent(t, b, res, key)
					continue
				}
				wantItem(t, b, res, key, w.value, w.rev, w.token)
			}
		}
		t.Logf("%d writes accepted in %d operations, %d rejected", len(writes), ops, rejects)
	})
}
