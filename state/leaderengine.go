package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
)

// Epoch is a writer epoch: the number a server raised in the engine, with a
// durable compare-and-swap, when it became the leader. Every commit of the
// leader is conditional on it, so a server that another has replaced can
// commit nothing.
type Epoch uint64

// Remote is a replicated engine as its leader sees it (etcd, PostgreSQL).
// Implementations are safe for concurrent use.
type Remote interface {
	// Load calls fn for every resource with state, in any order, and returns
	// the store revision, all as of one consistent snapshot taken after the
	// caller's epoch was raised.
	Load(ctx context.Context, fn func(name string, r Resource) error) (fence.Rev, error)
	// Entry reads the entry under resource/key, linearizably.
	Entry(ctx context.Context, resource, key string) (Entry, bool, error)
	// Commit applies c atomically if epoch is still the current writer
	// epoch and the last commit applied in this epoch (the epoch starts at
	// 0) is one of c.Since-1 .. c.Seq-1: c carries the changes of every
	// commit from c.Since to c.Seq, merged, so it may apply before the
	// ones it carries arrive (several are in flight at once, and an engine
	// may take them in any order). When commit c.Seq or a later one was
	// applied, c's changes are applied already: Commit applies nothing
	// and returns nil. It returns after c is durable (replicated, as the
	// engine defines it), an error wrapping ErrDeposed when epoch is not
	// current (nothing applied), ErrOutOfOrder when the last commit
	// applied is before c.Since-1 (nothing applied), ErrNotApplied when
	// the engine certainly applied nothing otherwise (a limit, which then
	// refuses every commit that carries c too), and any other error when
	// the outcome is unknown. An empty c (Seq 0) checks the epoch only,
	// whatever commits are in flight: it confirms that reads made before
	// it were current.
	Commit(ctx context.Context, epoch Epoch, c *Changes) error
}

// EntryID names an entry.
type EntryID struct{ Resource, Key string }

// Changes are the writes of one commit to a Remote.
type Changes struct {
	Resources map[string]Resource // resources to store
	Entries   map[EntryID]*Entry  // entries to store; nil: delete
	Rev       fence.Rev           // the store revision after the commit
	RevSet    bool                // Rev changed in this commit
	Seq       uint64              // the commit's number in its epoch, from 1; 0 if it writes nothing
	// Since is the first commit whose changes these carry (see
	// Remote.Commit): Seq when they are the changes of commit Seq alone,
	// less when the commits before it in flight are merged in. 0 is Seq.
	Since uint64
}

// carry returns the changes of chs, in order, merged into one commit that
// carries them all: numbered as the last numbered one, Since the first.
func carry(chs []*Changes) *Changes {
	out := &Changes{Resources: map[string]Resource{}, Entries: map[EntryID]*Entry{}}
	for _, ch := range chs {
		maps.Copy(out.Resources, ch.Resources)
		maps.Copy(out.Entries, ch.Entries)
		if ch.RevSet {
			out.Rev, out.RevSet = ch.Rev, true
		}
		if ch.Seq > 0 {
			out.Seq = ch.Seq
			if out.Since == 0 {
				out.Since = ch.Seq
			}
		}
	}
	return out
}

// From returns the first commit c carries: Since, or Seq when Since is 0.
func (c *Changes) From() uint64 { return cmp.Or(c.Since, c.Seq) }

// Bytes returns the bytes of the values c writes.
func (c *Changes) Bytes() int {
	n := 0
	for _, e := range c.Entries {
		if e != nil {
			n += len(e.Value)
		}
	}
	return n
}

// Empty reports whether c writes nothing.
func (c *Changes) Empty() bool { return len(c.Resources) == 0 && len(c.Entries) == 0 && !c.RevSet }

// DefaultCacheBytes is the default LeaderEngine.MaxEntryBytes.
const DefaultCacheBytes = 64 << 20

// DefaultCommitTimeout is the default LeaderEngine.CommitTimeout.
const DefaultCommitTimeout = 10 * time.Second

// DefaultReadTimeout is the default LeaderEngine.ReadTimeout.
const DefaultReadTimeout = 5 * time.Second

// DefaultMaxInFlight is the default LeaderEngine.MaxInFlight: one commit at
// a time. Measured on etcd and PostgreSQL sharing 2 cores with fence and
// the clients, 4 in flight ran 0.63× (etcd) and 0.56× (PostgreSQL) as many
// cycles at 16 clients: the engine, not the round trip, was the limit, and
// 4 commits of a quarter of the changes each cost it more than one.
const DefaultMaxInFlight = 1

// LeaderEngine is the Engine of a leader on a Remote, for one writer epoch: every
// resource in memory (loaded when the term starts), entries read through
// and kept up to a size, and every transaction committed to the Remote on
// the condition that the epoch is still current. It is safe as long as this
// leader is the Remote's only writer, which the epoch check guarantees: a
// commit after another server has raised the epoch applies nothing and
// returns ErrDeposed, and the DB on the LeaderEngine then stops.
//
// Commits may be pipelined (a Sender): up to MaxInFlight are sent at once,
// each built on the ones before it, carrying their changes, and numbered in
// the epoch, so that whichever the Remote takes first applies all it
// carries, and none applies after a later one; each is kept in memory once
// it and every one before it are applied.
//
// Reads are of the committed state in memory, confirmed by the read index
// (a Confirmer): one epoch check, which writes nothing on etcd, for every
// read waiting, beside the commits. A deposed leader never answers from
// stale memory: its check fails.
type LeaderEngine struct {
	// MaxEntryBytes bounds the bytes of values kept in memory; entries
	// beyond it are dropped and read again from the Remote. Default
	// DefaultCacheBytes.
	MaxEntryBytes int
	// CommitTimeout bounds one commit, all of its attempts (each gets a
	// tenth of it; see commit); when it passes with none confirmed, the
	// outcome is unknown (and the term ends). Default DefaultCommitTimeout.
	CommitTimeout time.Duration
	// ReadTimeout bounds a read of an entry that is not in memory, all of
	// its attempts (each a fifth of it): the commits behind it wait for
	// it, so one engine node that does not answer must not hold them
	// longer. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxInFlight is how many commits may be in flight at once. Default
	// DefaultMaxInFlight; 1 sends each after the one before is applied,
	// with every change queued meanwhile.
	MaxInFlight int

	remote    Remote
	epoch     Epoch
	resending atomic.Int32 // commits being sent again after an unknown outcome

	mu         sync.Mutex // guards what follows
	resources  map[string]Resource
	rev        fence.Rev
	entries    map[EntryID]Entry
	entryBytes int
	pending    []*pendingCommit // sent and not yet applied, in order
	sent       uint64           // the number of the last commit sent
	applied    uint64           // the number of the last commit applied
}

// pendingCommit is a commit in flight.
type pendingCommit struct {
	ch   *Changes      // its own changes, kept in memory once applied
	sent *Changes      // what is committed: ch, carrying the commits in flight before it
	done chan struct{} // closed once it is applied and kept, or has failed
	err  error
}

var (
	_ Engine    = (*LeaderEngine)(nil)
	_ Sender    = (*LeaderEngine)(nil)
	_ Confirmer = (*LeaderEngine)(nil)
)

// NewLeaderEngine loads the state of remote for a leader of epoch. Call it after
// the epoch is raised.
func NewLeaderEngine(ctx context.Context, remote Remote, epoch Epoch) (*LeaderEngine, error) {
	c := &LeaderEngine{remote: remote, epoch: epoch, resources: map[string]Resource{}, entries: map[EntryID]Entry{}}
	rev, err := remote.Load(ctx, func(name string, r Resource) error {
		c.resources[name] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: load: %w", err)
	}
	c.rev = rev
	return c, nil
}

// Epoch returns the writer epoch the LeaderEngine commits under.
func (c *LeaderEngine) Epoch() Epoch { return c.epoch }

// Limits implements Limiter: the Remote's limits, if it has any, shared
// among the commits that may be in flight, since the last of them carries
// the changes of all (see build).
func (c *LeaderEngine) Limits() (maxChanges, maxBytes int) {
	maxChanges, maxBytes = c.remoteLimits()
	d := c.maxDepth()
	return ceilDiv(maxChanges, d), ceilDiv(maxBytes, d)
}

// remoteLimits returns the Remote's limits, 0 if it has none.
func (c *LeaderEngine) remoteLimits() (maxChanges, maxBytes int) {
	if l, ok := c.remote.(Limiter); ok {
		return l.Limits()
	}
	return 0, 0
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }

// Len returns the number of resources with state.
func (c *LeaderEngine) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resources)
}

// Update implements Engine: Send, waiting for the answer on the caller's
// goroutine.
func (c *LeaderEngine) Update(ctx context.Context, fn func(tx Tx) error) error {
	p, prev, err := c.build(fn)
	if err != nil {
		return err
	}
	if err := c.send(p, prev); err != nil {
		c.Settle()
		return err
	}
	return nil
}

// Depth implements Sender: MaxInFlight, or 1 while a commit is being sent
// again after an unknown outcome. A commit can apply only after the one
// before it, so while the engine fails attempts (a member cut off, an
// election), commits in flight wait for each other, each for attempts of
// its own: then the changes are better carried by one commit at a time,
// each with all the changes queued, as without a pipeline.
func (c *LeaderEngine) Depth() int {
	if c.resending.Load() > 0 {
		return 1
	}
	return c.maxDepth()
}

// maxDepth is MaxInFlight, or its default.
func (c *LeaderEngine) maxDepth() int { return max(1, cmp.Or(c.MaxInFlight, DefaultMaxInFlight)) }

// Send implements Sender: fn runs on an overlay of the cache and of the
// commits in flight, and its writes are committed to the Remote, numbered
// after them, in a goroutine of its own; once applied, and once every
// commit before it is, they are kept in memory.
func (c *LeaderEngine) Send(fn func(tx Tx) error) (<-chan error, error) {
	p, prev, err := c.build(fn)
	if err != nil {
		return nil, err
	}
	result := make(chan error, 1)
	go func() { result <- c.send(p, prev) }()
	return result, nil
}

// build runs fn on an overlay of the cache and of the commits in flight,
// and puts its changes in flight, numbered after them; prev is the one
// before it, nil if none.
//
// A commit that writes carries the changes of the commits in flight before
// it (Changes.Since): an engine may take commits sent at once in another
// order (etcd's members start the requests of one connection in
// goroutines), and then the first to arrive applies them all, and the
// others apply nothing, instead of being refused and sent again, one round
// trip each. When what it would carry is over the Remote's limits, it
// waits for the commits in flight and is built again without them.
func (c *LeaderEngine) build(fn func(tx Tx) error) (p, prev *pendingCommit, err error) {
	for {
		tx := NewOverlay(Pending{Committed: cacheBase{c}, InFlight: c.inFlight()})
		if err := fn(tx); err != nil {
			return nil, nil, err
		}
		ch, err := tx.Changes()
		if err != nil {
			return nil, nil, err
		}
		p = &pendingCommit{ch: ch, sent: ch, done: make(chan struct{})}
		c.mu.Lock()
		// Only the DB's one Send builds, so nothing was put in flight
		// since the overlay was made; some may have been applied, and
		// are then in memory, under the overlay.
		if n := len(c.pending); n > 0 {
			prev = c.pending[n-1]
		}
		if !ch.Empty() {
			ch.Seq = c.sent + 1
			if carried := c.carryLocked(ch); carried != nil {
				p.sent = carried
			} else if prev != nil {
				c.mu.Unlock()
				<-prev.done // too much to carry: build again once it is applied
				if prev.err != nil {
					return nil, nil, fmt.Errorf("state: %w", ErrOutOfOrder)
				}
				prev = nil
				continue
			}
			c.sent++
		}
		c.pending = append(c.pending, p)
		c.mu.Unlock()
		return p, prev, nil
	}
}

// carryLocked returns ch merged after the changes of the commits in flight
// that write, ch itself if none, or nil if that is over the Remote's limits.
func (c *LeaderEngine) carryLocked(ch *Changes) *Changes {
	if len(c.pending) == 0 {
		return ch // one commit at a time: nothing to carry
	}
	chs := make([]*Changes, 0, len(c.pending)+1)
	for _, p := range c.pending {
		if p.ch.Seq > 0 {
			chs = append(chs, p.ch)
		}
	}
	if len(chs) == 0 {
		return ch
	}
	merged := carry(append(chs, ch))
	maxChanges, maxBytes := c.remoteLimits()
	if maxChanges > 0 && len(merged.Resources)+len(merged.Entries) > maxChanges ||
		maxBytes > 0 && merged.Bytes() > maxBytes {
		return nil
	}
	return merged
}

// send commits p after prev and, once both are applied, keeps p in memory;
// it returns p's outcome.
func (c *LeaderEngine) send(p, prev *pendingCommit) error {
	cctx, cancel := context.WithTimeout(context.Background(), cmp.Or(c.CommitTimeout, DefaultCommitTimeout))
	err := c.commit(cctx, p.sent)
	cancel()
	if prev != nil {
		<-prev.done
		if prev.err != nil && err == nil {
			// Only a commit that writes nothing can apply after one
			// that failed; what it confirmed was built on that one.
			err = fmt.Errorf("state: %w", ErrOutOfOrder)
		}
	}
	if err == nil {
		c.keep(p)
	}
	p.err = err
	close(p.done)
	return err
}

// inFlight returns the changes of the commits in flight, oldest first.
func (c *LeaderEngine) inFlight() []*Changes {
	c.mu.Lock()
	defer c.mu.Unlock()
	chs := make([]*Changes, len(c.pending))
	for i, p := range c.pending {
		chs[i] = p.ch
	}
	return chs
}

// keep applies p, the oldest commit in flight, to memory.
func (c *LeaderEngine) keep(p *pendingCommit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 && c.pending[0] == p {
		c.pending = c.pending[1:]
	}
	ch := p.ch
	maps.Copy(c.resources, ch.Resources)
	if ch.RevSet {
		c.rev = ch.Rev
	}
	if ch.Seq > 0 {
		c.applied = ch.Seq
	}
	for id, e := range ch.Entries {
		c.dropLocked(id)
		if e != nil {
			c.keepLocked(id, *e)
		}
	}
}

// Settle implements Sender: the commits that failed are forgotten, and the
// next is numbered after the last one applied.
func (c *LeaderEngine) Settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = nil
	c.sent = c.applied
}

// View implements Viewer: fn reads the committed state in memory (and,
// for an entry not in memory, the Remote). Its writes are dropped.
func (c *LeaderEngine) View(ctx context.Context, fn func(tx Tx) error) error {
	return fn(NewOverlay(cacheBase{c}))
}

// Confirm implements Confirmer: an empty commit, which checks the epoch.
// It is tried again for up to ReadTimeout, each attempt for a fifth of it,
// unless the epoch moved: a check changes nothing.
func (c *LeaderEngine) Confirm(ctx context.Context) error {
	c.mu.Lock()
	rev := c.rev
	c.mu.Unlock()
	timeout := cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, timeout/5)
		err := c.remote.Commit(actx, c.epoch, &Changes{Rev: rev})
		acancel()
		if err == nil || errors.Is(err, ErrDeposed) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Resender is implemented by Remotes whose commits may be sent again after
// an unknown outcome: they number the commits of an epoch, so that a commit
// sent again applies once, and an attempt that arrives late never applies
// after a later commit (etcd's commit key).
type Resender interface {
	Resends() bool
}

// commit commits ch to the Remote.
//
// On a Resender, a commit whose outcome is unknown (a connection lost to an
// engine node that died, an engine electing a new leader) is sent again,
// the same changes under the same epoch and number, until one is certainly
// applied or ctx ends: a Remote's changes are values to store, never
// increments, so applying them twice is applying them once, and the Remote
// keeps a late attempt from applying after the next commit. So the engine's
// own recovery (a new etcd leader elected in a few seconds) costs this
// leader its term no more. Only a success settles an unknown outcome: a
// refusal of a later attempt (deposed, not applied) says nothing of the
// first, which stays unknown.
func (c *LeaderEngine) commit(ctx context.Context, ch *Changes) error {
	// Each attempt gets a tenth of the time, so that one sent while the
	// engine elects a leader (etcd holds it until its own timeout) or to a
	// node that no longer answers is sent again soon.
	timeout := cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	r, ok := c.remote.(Resender)
	resends := ok && r.Resends()
	attempt := func() error {
		if !resends {
			return c.remote.Commit(ctx, c.epoch, ch)
		}
		actx, cancel := context.WithTimeout(ctx, timeout/10)
		defer cancel()
		return c.remote.Commit(actx, c.epoch, ch)
	}
	var first error // the first unknown outcome
	backoff := 20 * time.Millisecond
	for n := 1; ; n++ {
		err := attempt()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrDeposed), errors.Is(err, ErrNotApplied):
			if first != nil {
				return fmt.Errorf("%w (sent again, it was refused: %v; the first may have been applied)", first, err)
			}
			return err
		case !resends:
			return err
		}
		if first == nil {
			first = err
			c.resending.Add(1)
			defer c.resending.Add(-1)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (sent %d times in %s)", first, n, timeout)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// keepLocked caches e, dropping other entries while the cache is over its size.
func (c *LeaderEngine) keepLocked(id EntryID, e Entry) {
	max := cmp.Or(c.MaxEntryBytes, DefaultCacheBytes)
	if len(e.Value) > max {
		return
	}
	for old := range c.entries {
		if c.entryBytes+len(e.Value) <= max {
			break
		}
		c.dropLocked(old) // deleting during range is allowed; which ones go is arbitrary
	}
	c.entries[id] = e
	c.entryBytes += len(e.Value)
}

func (c *LeaderEngine) dropLocked(id EntryID) {
	if old, ok := c.entries[id]; ok {
		c.entryBytes -= len(old.Value)
		delete(c.entries, id)
	}
}

// readEntry reads an entry from the Remote for up to ReadTimeout, each
// attempt for a fifth of it, so that one sent to a node that no longer
// answers is sent again, to another: a read changes nothing.
func (c *LeaderEngine) readEntry(resource, key string) (Entry, bool, error) {
	timeout := cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, timeout/5)
		e, ok, err := c.remote.Entry(actx, resource, key)
		acancel()
		if err == nil || ctx.Err() != nil {
			return e, ok, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return e, ok, err
		case <-t.C:
		}
	}
}

// cacheBase is the committed state of a LeaderEngine, as an Overlay reads it:
// resources from memory, entries from memory or, on a miss, from the Remote.
type cacheBase struct{ c *LeaderEngine }

func (b cacheBase) Resource(name string) (Resource, error) {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	return b.c.resources[name], nil
}

func (b cacheBase) Entry(resource, key string) (Entry, bool, error) {
	id := EntryID{resource, key}
	b.c.mu.Lock()
	e, ok := b.c.entries[id]
	b.c.mu.Unlock()
	if ok {
		return e, true, nil
	}
	// Not cached: read it. Only this leader writes, so what the Remote has
	// is what the cache would have; the commit's epoch check confirms it.
	e, ok, err := b.c.readEntry(resource, key)
	if err != nil {
		return Entry{}, false, fmt.Errorf("state: read %q/%q: %w", resource, key, err)
	}
	if ok {
		b.c.mu.Lock()
		b.c.keepLocked(id, e)
		b.c.mu.Unlock()
	}
	return e, ok, nil
}

func (b cacheBase) Rev() (fence.Rev, error) {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	return b.c.rev, nil
}

func (b cacheBase) Resources(fn func(name string, r Resource) error) error {
	b.c.mu.Lock()
	all := maps.Clone(b.c.resources)
	b.c.mu.Unlock()
	for name, r := range all {
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return nil
}
