package bolt_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/state"
)

func open(t *testing.T) fencetest.Backend { return openDir(t, t.TempDir()) }

// openDir opens the state in dir and closes it when the test ends.
func openDir(t *testing.T, dir string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestStore(t *testing.T) { fencetest.TestStore(t, open) }

func TestLedger(t *testing.T) { fencetest.TestLedger(t, open) }

// TestDB_Reopen checks that everything acknowledged is there after a clean
// restart: tokens, fences, values, revisions and leases, and that the token
// sequence continues.
func TestDB_Reopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	exp := time.Unix(1_900_000_000, 123_456_789)
	grant := func(resource, holder string, ttl time.Duration) fence.Token {
		t.Helper()
		tok, err := db.Grant(ctx, resource, holder, ttl, exp)
		if err != nil {
			t.Fatalf("Grant(%q): %v", resource, err)
		}
		return tok
	}
	staleA := grant("a", "A0", time.Second)
	ta := grant("a", "A", 2*time.Second)
	tb := grant("b", "B", 3*time.Second)
	tc := grant("c", "C", 4*time.Second)
	if _, err := db.Put(ctx, "a", "k", []byte("va"), ta, fence.Cond{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := db.Claim(ctx, "b", tb); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if _, err := db.Txn(ctx, &fence.Txn{Fences: map[string]fence.Token{"a": ta, "b": tb},
		Then: []fence.Op{{Kind: fence.OpPut, Resource: "a", Key: "t/1", Value: []byte("ta")},
			{Kind: fence.OpPut, Resource: "b", Key: "t/2", Value: []byte("tb")}}}); err != nil {
		t.Fatalf("Txn: %v", err)
	}
	if _, err := db.Put(ctx, "c", "gone", []byte("x"), tc, fence.Cond{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := db.Delete(ctx, "c", "gone", tc, fence.Cond{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := db.End(ctx, "c", tc); err != nil {
		t.Fatalf("End: %v", err)
	}
	before := dump(t, db, []string{"a", "b", "c", "never"}, [][2]string{{"a", "k"}, {"a", "t/1"}, {"b", "t/2"}, {"c", "gone"}})
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := db.Put(ctx, "a", "k", []byte("closed"), ta, fence.Cond{}); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("Put after Close: err=%v, want ErrClosed", err)
	}

	db2 := openDir(t, dir)
	after := dump(t, db2, []string{"a", "b", "c", "never"}, [][2]string{{"a", "k"}, {"a", "t/1"}, {"b", "t/2"}, {"c", "gone"}})
	if before != after {
		t.Fatalf("after reopen:\n%s\nwant\n%s", after, before)
	}
	if !strings.Contains(before, `a/k="va"`) || !strings.Contains(before, "lease a holder=A token=2") {
		t.Fatalf("dump before Close misses writes:\n%s", before)
	}
	// The stale holder is still fenced, the sequence continues, revisions go on.
	_, err = db2.Put(ctx, "a", "k", []byte("zombie"), staleA, fence.Cond{})
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Presented != staleA || fe.LastFence != ta {
		t.Fatalf("Put with the stale token after reopen: err=%v, want FencedError{%d, %d}", err, staleA, ta)
	}
	rev, err := db2.Txn(ctx, &fence.Txn{})
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	if tok, err := db2.Grant(ctx, "a", "D", time.Second, exp); err != nil || tok != ta+1 {
		t.Fatalf("Grant after reopen: Token=%d, %v; want %d", tok, err, ta+1)
	}
	if tok, err := db2.Grant(ctx, "c", "D", time.Second, exp); err != nil || tok != tc+1 {
		t.Fatalf("Grant after reopen: Token=%d, %v; want %d", tok, err, tc+1)
	}
	r, err := db2.Put(ctx, "b", "k", []byte("vb"), tb, fence.Cond{})
	if err != nil || r.Rev != rev+1 {
		t.Fatalf("Put after reopen: Rev=%d, %v; want %d", r.Rev, err, rev+1)
	}
}

// dump describes what the interfaces show of db: fences, last tokens, items,
// the revision and the leases.
// TestDB_RevokeReopen checks that a revoke is durable: after a reopen the
// revoked lease is gone, the fence stays raised and tokens keep growing.
func TestDB_RevokeReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	tok, err := db.Grant(ctx, "r", "a", time.Hour, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lastFence, revoked, err := db.Revoke(ctx, "r")
	if err != nil || lastFence != tok+1 || revoked != tok {
		t.Fatalf("Revoke=%d, %d, %v; want %d, %d, nil", lastFence, revoked, err, tok+1, tok)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDir(t, dir)
	if leases, _, err := db.Leases(ctx); err != nil || len(leases) != 0 {
		t.Fatalf("Leases after reopen=%v, %v; want none", leases, err)
	}
	if f, err := db.Fence(ctx, "r"); err != nil || f != lastFence {
		t.Fatalf("Fence after reopen=%d, %v; want %d", f, err, lastFence)
	}
	if _, err := db.Put(ctx, "r", "k", []byte("v"), tok, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("Put with the revoked token after reopen: err=%v, want ErrFenced", err)
	}
	if next, err := db.Grant(ctx, "r", "b", time.Second, time.Now().Add(time.Second)); err != nil || next != lastFence+1 {
		t.Fatalf("Grant after reopen=%d, %v; want %d", next, err, lastFence+1)
	}
	if lf, _, err := db.Revoke(ctx, "r"); err != nil || lf != lastFence+2 {
		t.Fatalf("second Revoke=%d, %v; want %d", lf, err, lastFence+2)
	}
}

func dump(t *testing.T, db *bolt.DB, resources []string, keys [][2]string) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	for _, r := range resources {
		f, err := db.Fence(ctx, r)
		if err != nil {
			t.Fatalf("Fence: %v", err)
		}
		last, err := db.LastToken(ctx, r)
		if err != nil {
			t.Fatalf("LastToken: %v", err)
		}
		fmt.Fprintf(&b, "%s fence=%d last_token=%d\n", r, f, last)
	}
	for _, k := range keys {
		item, err := db.Get(ctx, k[0], k[1])
		switch {
		case errors.Is(err, fence.ErrNotFound):
			fmt.Fprintf(&b, "%s/%s absent\n", k[0], k[1])
		case err != nil:
			t.Fatalf("Get: %v", err)
		default:
			fmt.Fprintf(&b, "%s/%s=%q rev=%d token=%d\n", k[0], k[1], item.Value, item.Rev, item.Token)
		}
	}
	rev, err := db.Txn(ctx, &fence.Txn{})
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	fmt.Fprintf(&b, "rev=%d\n", rev)
	leases, _, err := db.Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	var ls []string
	for _, l := range leases {
		ls = append(ls, fmt.Sprintf("lease %s holder=%s token=%d ttl=%s expires=%d\n", l.Resource, l.Holder, l.Token, l.TTL, l.Expires.UnixNano()))
	}
	slices.Sort(ls)
	b.WriteString(strings.Join(ls, ""))
	return b.String()
}

// TestDB_Locked checks that a second Open of a directory in use fails, with
// an error that says so, instead of corrupting the file or hanging.
func TestDB_Locked(t *testing.T) {
	dir := t.TempDir()
	db := openDir(t, dir)
	start := time.Now()
	db2, err := bolt.Open(dir)
	if err == nil {
		db2.Close()
		t.Fatalf("second Open: err=nil, want an error")
	}
	if !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), filepath.Join(dir, bolt.FileName)) {
		t.Fatalf("second Open: err=%q, want it to name the file and say it is in use", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("second Open took %s, want about 1s", d)
	}
	// The first one is unharmed.
	tok, err := db.Grant(t.Context(), "a", "A", time.Second, time.Now())
	if err != nil || tok != 1 {
		t.Fatalf("Grant=%d, %v; want 1, nil", tok, err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db3 := openDir(t, dir)
	if last, err := db3.LastToken(t.Context(), "a"); err != nil || last != 1 {
		t.Fatalf("LastToken=%d, %v; want 1, nil", last, err)
	}
}

// batchStats reads the commit batch size histogram of the default registry.
// commitMetrics gathers the commit's metrics, which no package registers
// by itself.
var commitMetrics = func() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(state.Metrics()...)
	return reg
}()

func batchStats(t *testing.T) (commits uint64, changes float64) {
	t.Helper()
	mfs, err := commitMetrics.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fence_storage_commit_batch_size" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("fence_storage_commit_batch_size is not registered")
	return 0, 0
}

// TestDB_GroupCommit checks that concurrent changes share commits (and so
// fsyncs): 64 concurrent writes take fewer than 64 commits. One in eight of
// them is rejected (a stale token), and must not cost the others their
// shared commit.
func TestDB_GroupCommit(t *testing.T) {
	ctx := t.Context()
	db := openDir(t, t.TempDir())
	const n = 64
	tokens := make([]fence.Token, n)
	for i := range tokens {
		grants := 1
		if i%8 == 0 {
			grants = 2 // and the write uses the first, stale, token
		}
		for range grants {
			tok, err := db.Grant(ctx, fmt.Sprintf("r%d", i), "h", time.Minute, time.Now().Add(time.Minute))
			if err != nil {
				t.Fatalf("Grant: %v", err)
			}
			tokens[i] = tok
		}
		if i%8 == 0 {
			tokens[i]--
		}
	}
	// A burst may, rarely, be scheduled one write at a time; try a few.
	for attempt := range 5 {
		commits0, changes0 := batchStats(t)
		start := make(chan struct{})
		revs := make([]fence.Rev, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				r, err := db.Put(ctx, fmt.Sprintf("r%d", i), fmt.Sprintf("k%d", attempt), []byte("v"), tokens[i], fence.Cond{})
				if i%8 == 0 {
					if !errors.Is(err, fence.ErrFenced) {
						t.Errorf("Put with a stale token: err=%v, want ErrFenced", err)
					}
					return
				}
				if err != nil {
					t.Errorf("Put: %v", err)
				}
				revs[i] = r.Rev
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		commits1, changes1 := batchStats(t)
		commits, changes := commits1-commits0, changes1-changes0
		// Each change is carried by exactly one commit: none was committed
		// twice (as when a shared commit fails and its changes are retried).
		if changes != n {
			t.Fatalf("changes committed=%v, want %d", changes, n)
		}
		// Shared commits still give every accepted write its own revision.
		revs = slices.DeleteFunc(revs, func(r fence.Rev) bool { return r == 0 })
		slices.Sort(revs)
		for i := 1; i < len(revs); i++ {
			if revs[i] != revs[i-1]+1 {
				t.Fatalf("revisions %v, want %d consecutive revisions", revs, len(revs))
			}
		}
		t.Logf("attempt %d: %d writes in %d commits", attempt, n, commits)
		if commits < n {
			return
		}
	}
	t.Fatalf("%d concurrent writes never shared a commit", n)
}
