package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fence-lock/fence"
)

// Engine is the transactional storage under a DB. Implementations are safe
// for concurrent use, but a DB never runs two Updates at once.
type Engine interface {
	// Update runs fn in one atomic transaction and returns after the
	// transaction is durable. When fn returns an error, nothing of the
	// transaction is applied and Update returns that error as it is.
	//
	// Otherwise Update returns nil when the transaction is applied; an
	// error wrapping ErrNotApplied when it is certainly not (a limit of the
	// engine); an error wrapping ErrDeposed when this writer's epoch is no
	// longer current, and nothing is applied; and any other error when the
	// outcome is unknown.
	Update(ctx context.Context, fn func(tx Tx) error) error
}

// Viewer is implemented by engines that can read committed state
// linearizably without a transaction of their own (a local file, memory).
// A DB sends the reads of other engines through Update, so that they are
// confirmed by the same commit as the writes.
type Viewer interface {
	// View runs fn in a read-only transaction on committed state.
	View(ctx context.Context, fn func(tx Tx) error) error
}

// Limiter is implemented by engines that cap the size of one transaction:
// a DB puts at most Limits() changes, and values of at most maxBytes bytes
// in all, in one Update (a single change larger than that goes alone).
type Limiter interface {
	Limits() (maxChanges, maxBytes int)
}

// ErrNotApplied means an engine certainly applied nothing of a transaction.
var ErrNotApplied = errors.New("state: transaction not applied")

// ErrDeposed means this server's writer epoch is no longer current: another
// server leads the store, and nothing was applied. A server that gets it must
// stop serving from its state. It wraps fence.ErrNotLeader, so the API
// answers not_leader and clients retry elsewhere.
var ErrDeposed = fmt.Errorf("state: deposed: another server leads the store (writer epoch replaced): %w", fence.ErrNotLeader)

// DefaultMaxBatch is the number of changes one commit carries at most when
// the engine sets no limit.
const DefaultMaxBatch = 512

// DB implements fence.Store and fence.Ledger with the rules of this package
// on an Engine, so that every engine answers exactly alike. It is safe for
// concurrent use. Values it returns are copies: an engine's memory is valid
// only inside a transaction.
//
// Changes are group-committed: a caller whose change finds no commit running
// commits every change queued so far in one Update, and the changes queued
// during that commit go in the next one, committed by a goroutine of the DB.
// When a commit fails in a way that leaves its outcome unknown (or the
// engine's epoch is deposed), the DB stops taking changes: every later change
// returns that failure (wrapping fence.ErrClosed, or ErrDeposed), and Done
// is closed.
type DB struct {
	name     string // the engine's package name, which prefixes errors
	engine   Engine
	viewer   Viewer // nil: reads go through Update
	maxBatch int
	maxBytes int // 0: no limit

	mu         sync.Mutex
	queue      []*op
	committing bool       // a goroutine is committing; it takes the queue until it is empty
	idle       *sync.Cond // signalled when committing becomes false
	closed     bool
	failed     error
	failedC    chan struct{} // closed when failed is set
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// op is one change or read waiting for a commit. fn may run more than once
// (when a shared commit fails, each change is retried alone), so it keeps
// its results in variables it overwrites on every run.
type op struct {
	fn    func(tx Tx) error
	size  int // bytes of values it writes, for the engine's limits
	err   error
	doneC chan struct{}
}

// NewDB returns a DB on engine; name prefixes its errors ("bolt: put ...").
// It starts nothing: commits run on the goroutines of the callers and of
// the DB while changes are queued.
func NewDB(name string, engine Engine) *DB {
	db := &DB{name: name, engine: engine, maxBatch: DefaultMaxBatch, failedC: make(chan struct{})}
	db.idle = sync.NewCond(&db.mu)
	if v, ok := engine.(Viewer); ok {
		db.viewer = v
	}
	if l, ok := engine.(Limiter); ok {
		if n, b := l.Limits(); n > 0 {
			db.maxBatch, db.maxBytes = n, b
		}
	}
	return db
}

// Close finishes the changes already queued; changes and reads after it
// return fence.ErrClosed. It does not close the engine. A second Close
// returns when the first is done.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.closed = true
	for db.committing {
		db.idle.Wait()
	}
	return nil
}

// Err returns the failure that put the DB out of service, nil while it serves.
func (db *DB) Err() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.failed
}

// Done is closed when the DB fails (see Err).
func (db *DB) Done() <-chan struct{} { return db.failedC }

// Update runs fn in a transaction of the next group commit and returns
// fn's rejection, or the commit's failure. It returns once the commit is
// durable, and does not give up when ctx ends after fn is queued: the
// outcome would be unknown, and commits are short. Like every change of the
// DB, fn must check before it changes (see IsRejection).
func (db *DB) Update(ctx context.Context, fn func(tx Tx) error) error {
	return db.update(ctx, fn, 0)
}

func (db *DB) update(ctx context.Context, fn func(tx Tx) error, size int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{fn: fn, size: size, doneC: make(chan struct{})}
	db.mu.Lock()
	switch {
	case db.closed:
		db.mu.Unlock()
		return fence.ErrClosed
	case db.failed != nil:
		err := db.failed
		db.mu.Unlock()
		return err
	}
	db.queue = append(db.queue, o)
	lead := !db.committing
	db.committing = true
	db.mu.Unlock()
	if lead {
		// The queue was empty: o is first in the next batch.
		if db.commitNext() {
			go db.commitAll()
		}
	}
	<-o.doneC
	return o.err
}

// commitAll commits batches until the queue is empty.
func (db *DB) commitAll() {
	for db.commitNext() {
	}
}

// commitNext commits the next batch of the queue, and reports whether
// changes are still queued; if not, it ends the committing role.
func (db *DB) commitNext() bool {
	db.mu.Lock()
	n, bytes := 0, 0
	for n < len(db.queue) && n < db.maxBatch {
		if n > 0 && db.maxBytes > 0 && bytes+db.queue[n].size > db.maxBytes {
			break
		}
		bytes += db.queue[n].size
		n++
	}
	batch := make([]*op, n)
	copy(batch, db.queue)
	db.queue = db.queue[:copy(db.queue, db.queue[n:])]
	db.mu.Unlock()

	db.commit(batch)

	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.queue) > 0 {
		return true
	}
	db.committing = false
	db.idle.Broadcast()
	return false
}

// commit applies batch in one transaction. A rejection is that change's own
// answer. A change that fails otherwise rolls the whole transaction back, and
// then each change is retried alone, so that one failing change does not fail
// the others; so does a transaction the engine certainly did not apply (a
// limit). A commit whose outcome is unknown is different: the engine may
// have applied it, so no change is retried, all get the error, and the DB
// takes no more changes — the answer PostgreSQL gives to a failed fsync.
func (db *DB) commit(batch []*op) {
	if err := db.Err(); err != nil {
		// Failed while these were queued.
		db.finish(batch, err)
		return
	}
	start := time.Now()
	applied := false
	err := db.engine.Update(context.Background(), func(tx Tx) error {
		tx = withFloor(tx)
		for _, o := range batch {
			o.err = o.fn(tx)
			if o.err != nil && !IsRejection(o.err) {
				return o.err
			}
		}
		applied = true
		return nil
	})
	commitDuration.Observe(time.Since(start).Seconds())
	commitBatchSize.Observe(float64(len(batch)))
	switch {
	case err == nil:
	case errors.Is(err, ErrDeposed):
		db.fail(err)
	case applied && !errors.Is(err, ErrNotApplied):
		// fence.ErrClosed: the API answers 503 unavailable, which says
		// that the outcome is unknown and lets clients retry what is safe
		// to repeat, on another server after a failover.
		db.fail(fmt.Errorf("%s: commit failed, outcome unknown: %w: %w", db.name, fence.ErrClosed, err))
	case len(batch) > 1:
		for _, o := range batch {
			db.commit([]*op{o})
		}
		return
	default:
		// The engine certainly applied nothing (ErrNotApplied), or fn
		// failed to read the engine: an engine's failure, not a bug, and
		// nothing changed, so the client may retry (503 unavailable). A
		// limit the engine names (fence.ErrTooLarge) keeps its own answer.
		batch[0].err = unavailable(batch[0].err)
		if applied {
			batch[0].err = unavailable(err)
		}
	}
	db.finish(batch, db.Err())
}

// unavailable marks an engine's failure as fence.ErrClosed, the API's 503
// unavailable, unless it already says so or says more (a limit, a deposed
// epoch: their own codes rank first).
func unavailable(err error) error {
	if errors.Is(err, fence.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", fence.ErrClosed, err)
}

// finish answers batch, with failed instead of each op's own answer if it is not nil.
func (db *DB) finish(batch []*op, failed error) {
	for _, o := range batch {
		if failed != nil {
			o.err = failed
		}
		close(o.doneC)
	}
}

// fail puts the DB out of service for changes: every later change returns err.
func (db *DB) fail(err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.failed == nil {
		db.failed = err
		close(db.failedC)
	}
}

// View runs fn on committed state: directly if the engine is a Viewer, else
// in the next commit, which confirms it.
func (db *DB) View(ctx context.Context, fn func(tx Tx) error) error {
	if db.viewer == nil {
		return db.update(ctx, fn, 0)
	}
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return fence.ErrClosed
	}
	return db.viewer.View(ctx, func(tx Tx) error { return fn(withFloor(tx)) })
}

// Barrier returns once everything committed before it was called is
// confirmed current: at once on an engine that reads locally (a Viewer),
// through a commit on one that does not (a leader's LeaderEngine, which then
// confirms its epoch). A read of memory kept beside the DB (the lock
// service's) followed by Barrier is linearizable.
func (db *DB) Barrier(ctx context.Context) error {
	return db.wrap(db.View(ctx, func(Tx) error { return nil }), "barrier")
}

// wrap prefixes err with the engine and the operation; nil stays nil.
func (db *DB) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", db.name, fmt.Sprintf(format, args...), err)
}
