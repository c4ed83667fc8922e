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
// for concurrent use, but a DB never runs two Updates at once (nor, on a
// Sender, two Sends).
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

// Viewer is implemented by engines that can read committed state without a
// transaction of their own (a local file, memory): linearizably, or, on a
// Confirmer, once confirmed. A DB sends the reads of other engines through
// Update, so that they are confirmed by the same commit as the writes.
type Viewer interface {
	// View runs fn in a read-only transaction on committed state.
	View(ctx context.Context, fn func(tx Tx) error) error
}

// Sender is implemented by engines that pipeline commits: a transaction is
// built on the ones sent before it and sent before they are durable, so
// that several are in flight at once (a replicated engine's round trips
// overlap). A DB acknowledges each only after it and every one sent before
// it are durable.
type Sender interface {
	// Send runs fn in a transaction over the state that every transaction
	// sent before it leaves, as if they were applied, sends it, and returns
	// without waiting: the channel yields, once, what Update would return.
	// When fn fails (or the engine cannot send), Send returns that error
	// and sends nothing.
	//
	// A transaction applies only after the one sent before it: when one
	// fails, the engine makes every one sent after it fail too, with an
	// error wrapping ErrNotApplied (unless its own outcome is unknown).
	Send(fn func(tx Tx) error) (<-chan error, error)
	// Settle forgets the transactions that were sent and failed, so that
	// the next Send builds on what is applied. A DB calls it after a
	// failure, once every transaction it sent has answered.
	Settle()
	// Depth is how many transactions may be in flight at once.
	Depth() int
}

// Confirmer is implemented by engines whose reads of committed state are
// confirmed by a check of their own that writes nothing (a leader's epoch
// check): a DB confirms every read waiting with one Confirm, beside the
// commits (a read index), instead of sending reads through Update.
type Confirmer interface {
	Viewer
	// Confirm returns nil once everything this engine acknowledged before
	// it was called is known to be current: no other writer can have
	// changed the state before Confirm started.
	Confirm(ctx context.Context) error
}

// Limiter is implemented by engines that cap the size of one transaction:
// a DB puts at most Limits() changes, and values of at most maxBytes bytes
// in all, in one Update (a single change larger than that goes alone).
type Limiter interface {
	Limits() (maxChanges, maxBytes int)
}

// ErrNotApplied means an engine certainly applied nothing of a transaction.
var ErrNotApplied = errors.New("state: transaction not applied")

// ErrOutOfOrder means that a commit was not applied because one before it
// was not: a Remote found the commits before the ones it carries not
// applied, or a LeaderEngine had built it on one that failed.
var ErrOutOfOrder = fmt.Errorf("state: the commit before it was not applied: %w", ErrNotApplied)

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
// commits every change queued so far in one transaction, and the changes
// queued meanwhile go in the next, committed by a goroutine of the DB. On an
// engine that is a Sender, up to its Depth transactions are in flight at
// once, each built on the ones before it; they are acknowledged in order.
// When a commit fails in a way that leaves its outcome unknown (or the
// engine's epoch is deposed), the DB stops taking changes: every later
// change returns that failure (wrapping fence.ErrClosed, or ErrDeposed),
// and Done is closed.
type DB struct {
	name     string // the engine's package name, which prefixes errors
	engine   Engine
	sender   Sender
	viewer   Viewer    // nil: reads go through Update
	confirm  Confirmer // nil: reads need no confirmation, or ride a commit
	maxBatch int
	maxBytes int // 0: no limit

	mu       sync.Mutex
	queue    []*op
	working  bool          // a goroutine runs work; it goes on until nothing is queued or in flight
	kick     chan struct{} // a change was queued while work waits for a commit
	inflight []*flight     // sent, in order, not yet answered
	failedAt *flight       // the first that failed since the last settle; nothing is sent meanwhile
	after    []*flight     // the ones that answered after failedAt
	idle     *sync.Cond    // signalled when working becomes false
	closed   bool
	failed   error
	failedC  chan struct{} // closed when failed is set

	reads reads // the read index: reads waiting for a Confirm
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

// flight is a batch sent to the engine.
type flight struct {
	batch  []*op
	result <-chan error
	err    error // its answer, once received
	unsent bool  // Send refused it: nothing was sent
	start  time.Time
}

// NewDB returns a DB on engine; name prefixes its errors ("bolt: put ...").
// It starts nothing: commits run on the goroutines of the callers and of
// the DB while changes are queued.
func NewDB(name string, engine Engine) *DB {
	db := &DB{name: name, engine: engine, maxBatch: DefaultMaxBatch, failedC: make(chan struct{}), kick: make(chan struct{}, 1)}
	db.idle = sync.NewCond(&db.mu)
	db.sender = syncSender{engine}
	if s, ok := engine.(Sender); ok && s.Depth() > 1 {
		db.sender = s
	}
	if v, ok := engine.(Viewer); ok {
		db.viewer = v
	}
	if c, ok := engine.(Confirmer); ok {
		db.viewer, db.confirm = c, c
	}
	if l, ok := engine.(Limiter); ok {
		if n, b := l.Limits(); n > 0 {
			db.maxBatch, db.maxBytes = n, b
		}
	}
	return db
}

// syncSender sends the transactions of an engine that is not a Sender one
// at a time: Send commits and returns the answer.
type syncSender struct{ e Engine }

func (s syncSender) Send(fn func(tx Tx) error) (<-chan error, error) {
	applied := false
	err := s.e.Update(context.Background(), func(tx Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if !applied {
		return nil, err
	}
	c := make(chan error, 1)
	c <- err
	return c, nil
}

func (syncSender) Settle()    {}
func (syncSender) Depth() int { return 1 }

// Close finishes the changes already queued; changes and reads after it
// return fence.ErrClosed. It does not close the engine. A second Close
// returns when the first is done.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.closed = true
	for db.working {
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
	lead := !db.working
	db.working = true
	db.mu.Unlock()
	if lead {
		// No commit was running: this caller sends o (first in the next
		// batch) and answers what comes back until o is answered.
		db.work(o)
	} else {
		select {
		case db.kick <- struct{}{}:
		default:
		}
	}
	<-o.doneC
	return o.err
}

// work sends batches while the engine has room for them and answers them
// in order, until nothing is queued or in flight. A caller runs it for its
// own change (mine) and hands what is left to a goroutine once that change
// is answered; the goroutine runs it with mine nil.
func (db *DB) work(mine *op) {
	db.mu.Lock()
	for {
		if mine != nil && isDone(mine) {
			// The caller's change is answered: what is left goes on in a
			// goroutine, so that the caller answers its client now.
			if len(db.queue) > 0 || len(db.inflight) > 0 || db.failedAt != nil {
				db.mu.Unlock()
				go db.work(nil)
				return
			}
			db.working = false
			db.idle.Broadcast()
			db.mu.Unlock()
			return
		}
		if db.canSendLocked() {
			batch := db.takeLocked()
			db.mu.Unlock()
			f := db.send(batch)
			db.mu.Lock()
			db.inflight = append(db.inflight, f)
			continue
		}
		if len(db.inflight) == 0 {
			if db.failedAt != nil {
				db.mu.Unlock()
				db.recover()
				db.mu.Lock()
				continue
			}
			if len(db.queue) == 0 {
				db.working = false
				db.idle.Broadcast()
				db.mu.Unlock()
				return
			}
			continue
		}
		f := db.inflight[0]
		db.mu.Unlock()
		if f.result != nil {
			select {
			case f.err = <-f.result:
				f.result = nil
			case <-db.kick:
				db.mu.Lock()
				continue
			}
		}
		commitDuration.Observe(time.Since(f.start).Seconds())
		db.mu.Lock()
		db.inflight = db.inflight[1:]
		switch {
		case db.failedAt != nil:
			db.after = append(db.after, f)
		case f.err != nil || f.unsent:
			db.failedAt = f
		default:
			db.mu.Unlock()
			db.finish(f.batch, nil)
			db.mu.Lock()
		}
	}
}

// canSendLocked reports whether work sends the next batch now: changes are
// queued, the engine has room, and no commit has failed since the last
// recover. Nor has Send refused the last batch: the changes after it wait
// until it is dealt with, alone.
func (db *DB) canSendLocked() bool {
	if db.failedAt != nil || len(db.queue) == 0 || len(db.inflight) >= db.sender.Depth() {
		return false
	}
	return len(db.inflight) == 0 || !db.inflight[len(db.inflight)-1].unsent
}

func isDone(o *op) bool {
	select {
	case <-o.doneC:
		return true
	default:
		return false
	}
}

// takeLocked takes the next batch off the queue.
func (db *DB) takeLocked() []*op {
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
	return batch
}

// send sends batch in one transaction. A change's rejection is its own
// answer; a change that fails otherwise fails the transaction, which is
// then not sent.
func (db *DB) send(batch []*op) *flight {
	f := &flight{batch: batch, start: time.Now()}
	commitBatchSize.Observe(float64(len(batch)))
	if err := db.Err(); err != nil {
		// Failed while these were queued.
		f.err, f.unsent = err, true
		return f
	}
	f.result, f.err = db.sender.Send(batchFn(batch))
	f.unsent = f.err != nil
	return f
}

// batchFn runs the changes of batch in one transaction.
func batchFn(batch []*op) func(tx Tx) error {
	return func(tx Tx) error {
		tx = withFloor(tx)
		for _, o := range batch {
			o.err = o.fn(tx)
			if o.err != nil && !IsRejection(o.err) {
				return o.err
			}
		}
		return nil
	}
}

// recover deals with a failed transaction once nothing is in flight: a
// change that failed otherwise than by a rejection rolls back its whole
// transaction, and then each change of it is retried alone, so that one
// failing change does not fail the others; so does a transaction the engine
// certainly did not apply (a limit). The transactions sent after it were not
// applied either (see Sender): their changes are queued again, first. A
// commit whose outcome is unknown is different: the engine may have applied
// it, so no change is retried, all get the error, and the DB takes no more
// changes — the answer PostgreSQL gives to a failed fsync.
func (db *DB) recover() {
	db.mu.Lock()
	f, after := db.failedAt, db.after
	db.failedAt, db.after = nil, nil
	db.mu.Unlock()
	db.sender.Settle()
	db.settle(f.batch, f.err, f.unsent)
	var again []*op
	for _, a := range after {
		switch {
		case db.Err() != nil:
			db.finish(a.batch, db.Err())
		case a.unsent, errors.Is(a.err, ErrNotApplied):
			again = append(again, a.batch...)
		case a.err == nil:
			// Applied after one that failed, against the Sender's
			// contract: nothing it built on can be trusted.
			db.fail(fmt.Errorf("%s: a commit applied after one that failed: %w", db.name, fence.ErrClosed))
			db.finish(a.batch, db.Err())
		default:
			db.settle(a.batch, a.err, false)
		}
	}
	if len(again) > 0 {
		db.mu.Lock()
		db.queue = append(again, db.queue...)
		db.mu.Unlock()
	}
}

// settle answers a batch whose transaction failed with err, nothing else in
// flight (see recover). unsent says that it was never sent: fn failed.
func (db *DB) settle(batch []*op, err error, unsent bool) {
	switch {
	case db.Err() != nil:
	case errors.Is(err, ErrDeposed):
		db.fail(err)
	case !unsent && !errors.Is(err, ErrNotApplied):
		// fence.ErrClosed: the API answers 503 unavailable, which says
		// that the outcome is unknown and lets clients retry what is safe
		// to repeat, on another server after a failover.
		db.fail(fmt.Errorf("%s: commit failed, outcome unknown: %w: %w", db.name, fence.ErrClosed, err))
	case len(batch) > 1:
		for _, o := range batch {
			db.commitAlone(o)
		}
		return
	default:
		// The engine certainly applied nothing (ErrNotApplied), or fn
		// failed to read the engine: an engine's failure, not a bug, and
		// nothing changed, so the client may retry (503 unavailable). A
		// limit the engine names (fence.ErrTooLarge) keeps its own answer.
		batch[0].err = unavailable(err)
	}
	db.finish(batch, db.Err())
}

// commitAlone commits o in a transaction of its own, nothing else in flight.
func (db *DB) commitAlone(o *op) {
	f := db.send([]*op{o})
	if !f.unsent {
		f.err = <-f.result
		commitDuration.Observe(time.Since(f.start).Seconds())
		if f.err == nil {
			db.finish(f.batch, nil)
			return
		}
		db.sender.Settle()
	}
	db.settle(f.batch, f.err, f.unsent)
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

// View runs fn on committed state: directly if the engine is a Viewer
// (then, on a Confirmer, confirmed by the read index), else in the next
// commit, which confirms it.
func (db *DB) View(ctx context.Context, fn func(tx Tx) error) error {
	if db.viewer == nil {
		return db.update(ctx, fn, 0)
	}
	db.mu.Lock()
	closed, failed := db.closed, db.failed
	db.mu.Unlock()
	switch {
	case closed:
		return fence.ErrClosed
	case failed != nil && db.confirm != nil:
		return failed
	}
	if err := db.viewer.View(ctx, func(tx Tx) error { return fn(withFloor(tx)) }); err != nil {
		if IsRejection(err) {
			return err
		}
		// A read the engine failed (a replicated engine's node that does
		// not answer): nothing changed, the client may retry.
		return unavailable(err)
	}
	if db.confirm == nil {
		return nil
	}
	return db.confirmRead(ctx)
}

// Barrier returns once everything committed before it was called is
// confirmed current: at once on an engine that reads locally (a Viewer),
// by the read index on a Confirmer (a leader's LeaderEngine, which then
// confirms its epoch). A read of memory kept beside the DB (the lock
// service's) followed by Barrier is linearizable.
func (db *DB) Barrier(ctx context.Context) error {
	return db.wrap(db.View(ctx, func(Tx) error { return nil }), "barrier")
}

// reads is the read index: reads of committed state waiting for a Confirm.
// One Confirm runs at a time; the reads that arrive during it wait for the
// next one, which starts when it ends, because a Confirm vouches only for
// reads made before it started.
type reads struct {
	mu      sync.Mutex
	running bool
	next    *readBatch // the reads waiting for the next Confirm, nil if none
}

// readBatch is the reads that one Confirm answers.
type readBatch struct {
	done chan struct{}
	err  error
}

// confirmRead returns once a Confirm that started after it was called has
// succeeded: the read made before it was of current state.
func (db *DB) confirmRead(ctx context.Context) error {
	r := &db.reads
	r.mu.Lock()
	if r.next == nil {
		r.next = &readBatch{done: make(chan struct{})}
	}
	b := r.next
	lead := !r.running
	if lead {
		r.running, r.next = true, nil
	}
	r.mu.Unlock()
	if lead {
		db.runConfirm(b)
		r.mu.Lock()
		if next := r.next; next != nil {
			r.next = nil
			r.mu.Unlock()
			go db.confirmAll(next)
		} else {
			r.running = false
			r.mu.Unlock()
		}
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// confirmAll confirms b, then the batches that wait, until none does.
func (db *DB) confirmAll(b *readBatch) {
	r := &db.reads
	for {
		db.runConfirm(b)
		r.mu.Lock()
		if b = r.next; b == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.next = nil
		r.mu.Unlock()
	}
}

// runConfirm answers the reads of b with one Confirm. A deposed epoch puts
// the DB out of service, as a commit's does; any other failure is only the
// reads' (503 unavailable: nothing changed, retry).
func (db *DB) runConfirm(b *readBatch) {
	err := db.Err()
	if err == nil {
		start := time.Now()
		err = db.confirm.Confirm(context.Background())
		confirmDuration.Observe(time.Since(start).Seconds())
		switch {
		case err == nil:
		case errors.Is(err, ErrDeposed):
			db.fail(err)
		default:
			err = unavailable(err)
		}
	}
	b.err = err
	close(b.done)
}

// wrap prefixes err with the engine and the operation; nil stays nil.
func (db *DB) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", db.name, fmt.Sprintf(format, args...), err)
}
