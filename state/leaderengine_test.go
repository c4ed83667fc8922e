package state_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/state"
)

// memRemote is a state.Remote in memory with a writer epoch, for the LeaderEngine's
// unit tests: the real ones (etcd, postgres) run the same suites against
// real servers.
type memRemote struct {
	mu         sync.Mutex
	epoch      state.Epoch
	resources  map[string]state.Resource
	entries    map[state.EntryID]state.Entry
	rev        fence.Rev
	seq        uint64 // the number of the last commit applied in this epoch
	commits    int
	reads      int
	fail       error                  // if set, Commit returns it after applying (an unknown outcome)
	failN      int                    // with fail: only the next failN commits fail so
	deposeOn   bool                   // with fail: another server raises the epoch right after a commit fails
	noResend   bool                   // Resends reports false: commits of unknown outcome are not sent again
	hangRead   chan struct{}          // if set, Entry waits until it is closed or ctx ends
	refuse     error                  // if set, Commit returns it without applying
	maxEntry   int                    // if > 0, a commit with more entries is refused (ErrNotApplied)
	hold       func(c *state.Changes) // if set, Commit calls it first, unlocked (commits in flight)
	refuseRes  string                 // with refuseN: a commit that writes this resource is refused (ErrNotApplied, a limit)
	refuseN    int                    // how many more commits refuseRes refuses
	outOfOrder int                    // commits refused with ErrOutOfOrder
	late       int                    // commits that arrived after a later one had carried them
}

func newMemRemote() *memRemote {
	return &memRemote{resources: map[string]state.Resource{}, entries: map[state.EntryID]state.Entry{}}
}

// lead raises the epoch, as a new leader does.
func (m *memRemote) lead() state.Epoch {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.seq = 0
	return m.epoch
}

func (m *memRemote) Load(ctx context.Context, fn func(string, state.Resource) error) (fence.Rev, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, r := range m.resources {
		if err := fn(name, r); err != nil {
			return 0, err
		}
	}
	return m.rev, nil
}

func (m *memRemote) Entry(ctx context.Context, resource, key string) (state.Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.hangRead != nil {
		m.mu.Unlock()
		select {
		case <-m.hangRead:
		case <-ctx.Done():
			m.mu.Lock()
			return state.Entry{}, false, ctx.Err()
		}
		m.mu.Lock()
	}
	e, ok := m.entries[state.EntryID{Resource: resource, Key: key}]
	return e, ok, nil
}

func (m *memRemote) Commit(ctx context.Context, epoch state.Epoch, c *state.Changes) error {
	if m.hold != nil {
		m.hold(c)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := c.Resources[m.refuseRes]; ok && m.refuseN > 0 {
		m.refuseN--
		return fmt.Errorf("mem: commit %d writes %s: %w", c.Seq, m.refuseRes, state.ErrNotApplied)
	}
	if epoch != m.epoch {
		return fmt.Errorf("mem: epoch %d, current %d: %w", epoch, m.epoch, state.ErrDeposed)
	}
	if m.refuse != nil {
		return m.refuse
	}
	if m.maxEntry > 0 && len(c.Entries) > m.maxEntry {
		return fmt.Errorf("mem: %d entries: %w", len(c.Entries), state.ErrNotApplied)
	}
	if c.Seq > 0 {
		switch {
		case m.seq < c.From()-1:
			m.outOfOrder++
			return fmt.Errorf("mem: commit %d (from %d) after %d: %w", c.Seq, c.From(), m.seq, state.ErrOutOfOrder)
		case m.seq > c.Seq:
			m.late++
			return nil // applied already: a later commit carried it
		}
		m.seq = c.Seq
	}
	m.commits++
	maps.Copy(m.resources, c.Resources)
	for id, e := range c.Entries {
		if e == nil {
			delete(m.entries, id)
		} else {
			m.entries[id] = *e
		}
	}
	if c.RevSet {
		m.rev = c.Rev
	}
	if m.fail != nil && m.deposeOn {
		m.epoch++
	}
	if m.failN > 0 {
		m.failN--
		if m.failN == 0 {
			defer func() { m.fail = nil }()
		}
	}
	return m.fail
}

// Resends implements state.Resender: memRemote applies a commit at once or
// never, so no attempt of it can arrive late.
func (m *memRemote) Resends() bool { return !m.noResend }

// openCache returns a DB on a LeaderEngine of a new leader of m; opts, if any,
// set the LeaderEngine's options.
func openCache(t *testing.T, m *memRemote, opts ...func(*state.LeaderEngine)) *state.DB {
	t.Helper()
	c, err := state.NewLeaderEngine(t.Context(), m, m.lead())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(c)
	}
	db := state.NewDB("cache", c)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLeaderEngine_Store(t *testing.T) {
	fencetest.TestStore(t, func(t *testing.T) fencetest.Backend { return openCache(t, newMemRemote()) })
}

func TestLeaderEngine_Ledger(t *testing.T) {
	fencetest.TestLedger(t, func(t *testing.T) fencetest.Backend { return openCache(t, newMemRemote()) })
}

// TestLeaderEngine_Takeover checks that a new leader's LeaderEngine starts from everything
// the old one committed, and that the old one, deposed, commits nothing and
// answers nothing more — not even a read from its memory.
func TestLeaderEngine_Takeover(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	old := openCache(t, m)
	tok, err := old.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "r", "k", []byte("a"), tok, fence.Cond{}); err != nil {
		t.Fatal(err)
	}

	next := openCache(t, m) // raises the epoch
	if f, err := next.Fence(ctx, "r"); err != nil || f != tok {
		t.Fatalf("new leader: Fence=%d, %v; want %d", f, err, tok)
	}
	if item, err := next.Get(ctx, "r", "k"); err != nil || string(item.Value) != "a" {
		t.Fatalf("new leader: Get=%+v, %v; want a", item, err)
	}
	tok2, err := next.Grant(ctx, "r", "b", time.Minute, time.Now().Add(time.Minute))
	if err != nil || tok2 != tok+1 {
		t.Fatalf("new leader: Grant=%d, %v; want %d", tok2, err, tok+1)
	}

	commits := m.commits
	if _, err := old.Put(ctx, "r", "k", []byte("zombie"), tok, fence.Cond{}); !errors.Is(err, state.ErrDeposed) {
		t.Fatalf("old leader: Put err=%v, want ErrDeposed", err)
	}
	if m.commits != commits {
		t.Fatalf("old leader committed")
	}
	select {
	case <-old.Done():
	default:
		t.Fatal("old leader's DB not Done after ErrDeposed")
	}
	for name, read := range map[string]func() error{
		"Fence":     func() error { _, err := old.Fence(ctx, "r"); return err },
		"Get":       func() error { _, err := old.Get(ctx, "r", "k"); return err },
		"LastToken": func() error { _, err := old.LastToken(ctx, "r"); return err },
		"Grant":     func() error { _, err := old.Grant(ctx, "x", "a", time.Second, time.Now()); return err },
	} {
		if err := read(); !errors.Is(err, state.ErrDeposed) {
			t.Errorf("old leader: %s err=%v, want ErrDeposed", name, err)
		}
	}
	if item, err := next.Get(ctx, "r", "k"); err != nil || string(item.Value) != "a" {
		t.Fatalf("Get=%+v, %v; want a (the zombie's write applied nothing)", item, err)
	}
}

// TestLeaderEngine_DeposedRead checks that a read on a deposed leader fails even
// though its memory holds the answer: reads are confirmed by a commit.
func TestLeaderEngine_DeposedRead(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	old := openCache(t, m)
	tok, err := old.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m.lead()
	if f, err := old.Fence(ctx, "r"); !errors.Is(err, state.ErrDeposed) {
		t.Fatalf("Fence=%d, %v; want ErrDeposed, not the remembered %d", f, err, tok)
	}
}

// TestLeaderEngine_UnknownOutcome checks that a commit whose outcome stays unknown
// (sent again until CommitTimeout, never confirmed) stops the DB: its
// memory may no longer match the engine.
func TestLeaderEngine_UnknownOutcome(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m, func(c *state.LeaderEngine) { c.CommitTimeout = 300 * time.Millisecond })
	m.fail = errors.New("connection reset")
	if _, err := db.Grant(ctx, "r", "a", time.Minute, time.Now()); err == nil || errors.Is(err, state.ErrDeposed) {
		t.Fatalf("Grant err=%v, want an unknown outcome", err)
	}
	m.fail = nil
	if _, err := db.Grant(ctx, "r", "a", time.Minute, time.Now()); err == nil {
		t.Fatal("Grant after an unknown outcome succeeded, want the DB out of service")
	}
	if db.Err() == nil {
		t.Fatal("Err()=nil after an unknown outcome")
	}
}

// TestLeaderEngine_UnknownOutcomeResent checks that a commit of unknown outcome
// (an etcd node dying under it) is sent again, and once applied is
// applied once: the DB goes on, and a leader keeps its term through an
// engine's own recovery.
func TestLeaderEngine_UnknownOutcomeResent(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m)
	m.fail, m.failN = errors.New("connection reset"), 2
	tok, err := db.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err != nil || tok != 1 {
		t.Fatalf("Grant=%d, %v; want token 1 once a commit is confirmed", tok, err)
	}
	if m.commits != 3 || db.Err() != nil {
		t.Fatalf("%d commits, Err()=%v; want the same commit sent 3 times, and the DB in service", m.commits, db.Err())
	}
	if tok, err := db.Grant(ctx, "s", "a", time.Minute, time.Now().Add(time.Minute)); err != nil || tok != 1 {
		t.Fatalf("the next Grant=%d, %v", tok, err)
	}
	if got := m.resources["r"].LastToken; got != 1 {
		t.Fatalf("LastToken of r in the engine %d, want 1: applied three times is applied once", got)
	}
}

// TestLeaderEngine_NoResend checks that a commit of unknown outcome on a Remote
// that does not number its commits (PostgreSQL: a late attempt could apply
// after the next commit) is not sent again: the DB stops.
func TestLeaderEngine_NoResend(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	m.noResend = true
	db := openCache(t, m)
	m.fail, m.failN = errors.New("connection reset"), 1
	if _, err := db.Grant(ctx, "r", "a", time.Minute, time.Now()); err == nil || db.Err() == nil {
		t.Fatalf("Grant err=%v, Err()=%v; want an unknown outcome and the DB out of service", err, db.Err())
	}
	if m.commits != 1 {
		t.Fatalf("%d commits, want 1: not sent again", m.commits)
	}
}

// TestLeaderEngine_UnknownOutcomeThenDeposed checks that a commit of unknown
// outcome that, sent again, finds the epoch moved is not reported as
// deposed (which says nothing was applied) but as unknown: the first
// attempt may have been applied.
func TestLeaderEngine_UnknownOutcomeThenDeposed(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m)
	// The first attempt applies and fails; before the second, another
	// server raises the epoch.
	m.fail, m.failN, m.deposeOn = errors.New("connection reset"), 1, true
	_, err := db.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err == nil || errors.Is(err, state.ErrDeposed) || errors.Is(err, fence.ErrNotLeader) {
		t.Fatalf("Grant err=%v; want an unknown outcome, not deposed", err)
	}
	if !errors.Is(err, fence.ErrClosed) || db.Err() == nil {
		t.Fatalf("Grant err=%v, Err()=%v; want unavailable, and the DB out of service", err, db.Err())
	}
}

// TestLeaderEngine_ReadTimeout checks that a read of an entry from an engine node
// that does not answer gives up after ReadTimeout, and that the commits
// behind it go on.
func TestLeaderEngine_ReadTimeout(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m, func(c *state.LeaderEngine) { c.ReadTimeout = 100 * time.Millisecond })
	m.hangRead = make(chan struct{})
	defer close(m.hangRead)
	start := time.Now()
	if _, err := db.Get(ctx, "r", "k"); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("Get from an engine that does not answer: %v, want unavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the read took %s, want about the ReadTimeout", d)
	}
	if _, err := db.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a Grant after the read gave up: %v", err)
	}
}

// TestLeaderEngine_NotApplied checks that a batch the engine refuses whole (a limit)
// is retried change by change, and that the cache keeps nothing of it.
func TestLeaderEngine_NotApplied(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	m.maxEntry = 1
	db := openCache(t, m)
	tok, err := db.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Txn(ctx, &fence.Txn{Fences: map[string]fence.Token{"r": tok}, Then: []fence.Op{
		{Kind: fence.OpPut, Resource: "r", Key: "a", Value: []byte("1")},
		{Kind: fence.OpPut, Resource: "r", Key: "b", Value: []byte("2")},
	}})
	if !errors.Is(err, state.ErrNotApplied) {
		t.Fatalf("Txn of 2 entries err=%v, want ErrNotApplied", err)
	}
	if _, err := db.Get(ctx, "r", "a"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after a refused txn: err=%v, want ErrNotFound", err)
	}
	// Concurrent puts share batches that the engine refuses; each goes alone.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = db.Put(ctx, "r", fmt.Sprint("k", i), []byte("v"), tok, fence.Cond{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if db.Err() != nil {
		t.Fatalf("Err()=%v after refused batches, want nil", db.Err())
	}
}

// TestLeaderEngine_ReadThrough checks that entries not in memory are read from the
// Remote once, and that the cache stays within its size.
func TestLeaderEngine_ReadThrough(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m)
	tok, err := db.Grant(ctx, "r", "a", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := db.Put(ctx, "r", fmt.Sprint("k", i), make([]byte, 1000), tok, fence.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := state.NewLeaderEngine(ctx, m, m.lead())
	if err != nil {
		t.Fatal(err)
	}
	c.MaxEntryBytes = 2500 // two values
	next := state.NewDB("cache", c)
	defer next.Close()
	reads := m.reads
	for range 3 {
		if item, err := next.Get(ctx, "r", "k0"); err != nil || len(item.Value) != 1000 {
			t.Fatalf("Get=%d bytes, %v", len(item.Value), err)
		}
	}
	if got := m.reads - reads; got != 1 {
		t.Fatalf("%d reads of the Remote for 3 Gets of one key, want 1", got)
	}
	for i := range 4 {
		if _, err := next.Get(ctx, "r", fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := next.Get(ctx, "r", "missing"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get(missing) err=%v, want ErrNotFound", err)
	}
}

// depth is the MaxInFlight of the pipeline's tests.
const depth = 4

// TestLeaderEngine_Pipeline checks the pipelined commit: commits are in
// flight at once (MaxInFlight of them), each built on the ones before it,
// and what the engine and the DB hold at the end is the same.
func TestLeaderEngine_Pipeline(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	var mu sync.Mutex
	inFlight, most := 0, 0
	m.hold = func(c *state.Changes) {
		if c.Seq == 0 {
			return
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		// Wait until the pipeline is full (or for a while): then the
		// commits behind this one were sent before it was applied.
		for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
			mu.Lock()
			full := most >= depth
			mu.Unlock()
			if full {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	db := openCache(t, m, func(c *state.LeaderEngine) { c.MaxInFlight = depth })
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		if i < depth {
			// One at a time until the pipeline is full: each change its
			// own commit, sent while the ones before are held.
			for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
				mu.Lock()
				sent := inFlight
				mu.Unlock()
				if sent >= i || time.Now().After(deadline) {
					break
				}
			}
		}
		wg.Go(func() {
			// Two grants of one resource: the second is built on the
			// first, whichever commit each is in.
			r := fmt.Sprintf("r%d", i%8)
			if _, err := db.Grant(ctx, r, "h", time.Minute, time.Now()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if most != depth {
		t.Fatalf("at most %d commits in flight, want %d", most, depth)
	}
	for i := range 8 {
		r := fmt.Sprintf("r%d", i)
		if got := m.resources[r].LastToken; got != n/8 {
			t.Errorf("%s: LastToken %d in the engine, want %d: one per grant", r, got, n/8)
		}
		if got, _ := db.Fence(ctx, r); got != m.resources[r].LastFence {
			t.Errorf("%s: the DB says last fence %d, the engine %d", r, got, m.resources[r].LastFence)
		}
	}
}

// TestLeaderEngine_PipelineCarried checks that a commit that reaches the
// engine before the one it follows applies both (it carries the changes of
// the commits in flight before it), and that the one it carried, arriving
// late, applies nothing: nothing is refused or sent again.
func TestLeaderEngine_PipelineCarried(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	second := make(chan struct{})
	var once sync.Once
	m.hold = func(c *state.Changes) {
		switch c.Seq {
		case 1:
			<-second // commit 2 arrives first
		case 2:
			once.Do(func() { time.AfterFunc(20*time.Millisecond, func() { close(second) }) })
		}
	}
	db := openCache(t, m, func(c *state.LeaderEngine) { c.MaxInFlight = depth })
	tokens := make(chan fence.Token, 2)
	go func() {
		tok, err := db.Grant(ctx, "a", "h", time.Minute, time.Now())
		if err != nil {
			t.Error(err)
		}
		tokens <- tok
	}()
	time.Sleep(10 * time.Millisecond) // commit 1 is sent and held
	if tok, err := db.Grant(ctx, "b", "h", time.Minute, time.Now()); err != nil || tok != 1 {
		t.Fatalf("the second Grant=%d, %v", tok, err)
	}
	if tok := <-tokens; tok != 1 {
		t.Fatalf("the first Grant=%d", tok)
	}
	if m.late != 1 || m.commits != 1 || m.outOfOrder != 0 {
		t.Fatalf("%d commits applied, %d late, %d refused out of order; want commit 2 to apply both, and commit 1 nothing", m.commits, m.late, m.outOfOrder)
	}
	if m.resources["a"].LastToken != 1 || m.resources["b"].LastToken != 1 || m.seq != 2 {
		t.Fatalf("engine: a=%d b=%d after commit %d; want both applied", m.resources["a"].LastToken, m.resources["b"].LastToken, m.seq)
	}
	if tok, err := db.Grant(ctx, "a", "h2", time.Minute, time.Now()); err != nil || tok != 2 {
		t.Fatalf("the next Grant of a=%d, %v; want token 2 (the DB kept commit 1)", tok, err)
	}
}

// TestLeaderEngine_PipelineFailure checks that when a commit fails (not
// applied: a limit), the commit sent after it on its state is not applied
// either, and that its changes are sent again on what is applied: the DB
// and the engine agree, and the DB goes on.
func TestLeaderEngine_PipelineFailure(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	m.refuseRes, m.refuseN = "r", 2 // commit 1, and commit 2, which carries it
	second := make(chan struct{})
	m.hold = func(c *state.Changes) {
		if c.Seq == 1 && c.From() == 1 {
			select {
			case <-second: // commit 2 is in flight, built on commit 1
			case <-time.After(2 * time.Second):
			}
		}
		if c.Seq == 2 {
			select {
			case <-second:
			default:
				close(second)
			}
		}
	}
	db := openCache(t, m, func(c *state.LeaderEngine) { c.MaxInFlight = depth })
	first := make(chan error, 1)
	go func() {
		_, err := db.Grant(ctx, "r", "a", time.Minute, time.Now())
		first <- err
	}()
	time.Sleep(20 * time.Millisecond) // commit 1 is sent and held
	// Built on commit 1: r is held by a, so b is refused... unless commit 1
	// failed, which the DB learns only later; so b's grant goes on s.
	tok, err := db.Grant(ctx, "s", "b", time.Minute, time.Now())
	if err != nil || tok != 1 {
		t.Fatalf("the Grant sent after the failed commit=%d, %v; want it sent again and applied", tok, err)
	}
	if err := <-first; !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("the Grant of the refused commit: %v, want unavailable", err)
	}
	if db.Err() != nil {
		t.Fatalf("Err()=%v, want the DB in service", db.Err())
	}
	if m.refuseN != 0 {
		t.Fatalf("%d refusals left: commit 2 was not sent carrying commit 1 while it was in flight", m.refuseN)
	}
	if _, ok := m.resources["r"]; ok {
		t.Fatal("the engine has r, whose commit was refused")
	}
	if got, _ := db.Fence(ctx, "r"); got != 0 {
		t.Fatalf("the DB says r's last fence is %d, want 0: its commit was refused", got)
	}
	if tok, err := db.Grant(ctx, "r", "a", time.Minute, time.Now()); err != nil || tok != 1 {
		t.Fatalf("a Grant of r after=%d, %v; want token 1", tok, err)
	}
}

// TestLeaderEngine_ReadIndex checks that reads are confirmed by an epoch
// check that writes nothing (no numbered commit), and that a deposed
// leader's reads fail with not_leader.
func TestLeaderEngine_ReadIndex(t *testing.T) {
	ctx := t.Context()
	m := newMemRemote()
	db := openCache(t, m)
	if _, err := db.Grant(ctx, "r", "a", time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	seq := m.seq
	for range 3 {
		if got, err := db.Fence(ctx, "r"); err != nil || got != 1 {
			t.Fatalf("LastFence=%d, %v", got, err)
		}
	}
	if m.seq != seq {
		t.Fatalf("reads made %d numbered commits, want none", m.seq-seq)
	}
	m.lead() // another server takes over
	if _, err := db.Fence(ctx, "r"); !errors.Is(err, fence.ErrNotLeader) {
		t.Fatalf("a deposed leader's read: %v, want not_leader", err)
	}
}
