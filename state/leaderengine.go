package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
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
	// epoch, and returns after it is durable (replicated, as the engine
	// defines it). It returns an error wrapping ErrDeposed when epoch is not
	// current (nothing applied), ErrNotApplied when the engine certainly
	// applied nothing (a limit), and any other error when the outcome is
	// unknown. An empty c checks the epoch only: it confirms that reads made
	// before it were current.
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
}

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

// LeaderEngine is the Engine of a leader on a Remote, for one writer epoch: every
// resource in memory (loaded when the term starts), entries read through
// and kept up to a size, and every transaction committed to the Remote on
// the condition that the epoch is still current. It is safe as long as this
// leader is the Remote's only writer, which the epoch check guarantees: a
// commit after another server has raised the epoch applies nothing and
// returns ErrDeposed, and the DB on the LeaderEngine then stops.
//
// LeaderEngine is not a Viewer: a DB sends reads through Update, so that the
// commit's epoch check confirms them (a deposed leader never answers from
// stale memory).
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

	remote Remote
	epoch  Epoch

	mu         sync.Mutex // guards what follows; Update runs one at a time anyway
	resources  map[string]Resource
	rev        fence.Rev
	entries    map[EntryID]Entry
	entryBytes int
}

var _ Engine = (*LeaderEngine)(nil)

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

// Limits implements Limiter with the Remote's limits, if it has any.
func (c *LeaderEngine) Limits() (maxChanges, maxBytes int) {
	if l, ok := c.remote.(Limiter); ok {
		return l.Limits()
	}
	return 0, 0
}

// Len returns the number of resources with state.
func (c *LeaderEngine) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resources)
}

// Update implements Engine: fn runs on an overlay of the cache, whose
// writes are committed to the Remote and then, if applied, kept.
func (c *LeaderEngine) Update(ctx context.Context, fn func(tx Tx) error) error {
	tx := NewOverlay(cacheBase{c})
	if err := fn(tx); err != nil {
		return err
	}
	ch, err := tx.Changes()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(c.CommitTimeout, DefaultCommitTimeout))
	err = c.commit(cctx, ch)
	cancel()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.Copy(c.resources, ch.Resources)
	if ch.RevSet {
		c.rev = ch.Rev
	}
	for id, e := range ch.Entries {
		c.dropLocked(id)
		if e != nil {
			c.keepLocked(id, *e)
		}
	}
	return nil
}

// Resender is implemented by Remotes whose commits may be sent again after
// an unknown outcome: they number the commits of an epoch, so that a commit
// sent again applies once, and an attempt that arrives late never applies
// after a later commit (etcd's commit key).
type Resender interface {
	Resends() bool
}

// commit commits ch to the Remote. On a Resender, a commit whose outcome is
// unknown (a connection lost to an engine node that died, an engine
// electing a new leader) is sent again, the same changes under the same
// epoch, until one is certainly applied or ctx ends: a Remote's changes
// are values to store, never increments, so applying them twice is
// applying them once, and the Remote keeps a late attempt from applying
// after the next commit. So the engine's own recovery (a new etcd leader
// elected in a few seconds) costs this leader its term no more. Only a
// success settles an unknown outcome: a refusal of a later attempt
// (deposed, not applied) says nothing of the first, which stays unknown.
func (c *LeaderEngine) commit(ctx context.Context, ch *Changes) error {
	// Each attempt gets a tenth of the time, so that one sent while the
	// engine elects a leader (etcd holds it until its own timeout) or to a
	// node that no longer answers is sent again soon.
	timeout := cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	attempt := func() error {
		actx, cancel := context.WithTimeout(ctx, timeout/10)
		defer cancel()
		return c.remote.Commit(actx, c.epoch, ch)
	}
	r, ok := c.remote.(Resender)
	if !ok || !r.Resends() {
		return c.remote.Commit(ctx, c.epoch, ch)
	}
	first := attempt()
	if first == nil || errors.Is(first, ErrDeposed) || errors.Is(first, ErrNotApplied) {
		return first
	}
	backoff := 20 * time.Millisecond
	for n := 2; ; n++ {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (sent %d times in %s)", first, n-1, timeout)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
		switch err := attempt(); {
		case err == nil:
			return nil
		case errors.Is(err, ErrDeposed), errors.Is(err, ErrNotApplied):
			return fmt.Errorf("%w (sent again, it was refused: %v; the first may have been applied)", first, err)
		}
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
