package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/state"
)

// FileName is the name of the database file inside the data directory.
const FileName = "fence.db"

// DefaultMaxBatch is the default number of changes one commit may carry.
const DefaultMaxBatch = 512

var (
	bucketMeta      = []byte("meta")
	bucketResources = []byte("resources")
	bucketEntries   = []byte("entries")
	keyRev          = []byte("rev")
)

// rules is the shared implementation; the alias keeps the embedded field unexported.
type rules = state.DB

// DB is fence's durable state in one bbolt file. It implements fence.Store
// (Put, Get, Delete, Fence, Claim, Txn) and fence.Ledger (Grant, Refresh, End, Revoke,
// Leases, LastToken) with the rules of package internal/state, and is safe
// for concurrent use. Every change returns after it is fsynced.
type DB struct {
	*rules
	bdb      *bbolt.DB
	maxBatch int

	mu        sync.RWMutex // guards closed; held for reading while a change is queued or a read runs
	closed    bool
	closeOnce sync.Once
	closeErr  error

	failMu sync.Mutex
	failed error // set when a commit failed; changes are refused from then on
	opC    chan *op
	stopC  chan struct{}
	doneC  chan struct{}
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// op is one change waiting for a commit. fn may run more than once (when a
// shared commit fails, each change is retried alone), so it keeps its results
// in variables it overwrites on every run.
type op struct {
	fn    func(tx state.Tx) error
	err   error
	doneC chan struct{}
}

// Open opens or creates the state in directory dir and starts the commit loop.
// It fails if another process has the directory open.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bolt: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("bolt: open %s: in use by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketResources, bucketEntries} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		bdb.Close()
		return nil, fmt.Errorf("bolt: open %s: create buckets: %w", path, err)
	}
	db := &DB{
		bdb:      bdb,
		maxBatch: DefaultMaxBatch,
		opC:      make(chan *op, DefaultMaxBatch),
		stopC:    make(chan struct{}),
		doneC:    make(chan struct{}),
	}
	db.rules = state.NewDB("bolt", engine{db})
	go db.commitLoop()
	return db, nil
}

// Close finishes the changes already queued, stops the commit loop and closes
// the file. Later calls return fence.ErrClosed; a second Close returns when the
// first is done.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		// Every change queued before closed was set is in opC now: senders
		// hold mu for reading until their send is done.
		close(db.stopC)
		<-db.doneC
		// Readers hold mu for reading too: none is inside bbolt now.
		db.mu.Lock()
		db.closeErr = db.bdb.Close()
		db.mu.Unlock()
	})
	return db.closeErr
}

// Check reports whether the database is open and readable, for readiness probes.
func (db *DB) Check() error {
	if err := db.failure(); err != nil {
		return err
	}
	return db.view(func(tx state.Tx) error {
		_, err := tx.Rev()
		return err
	})
}

// engine implements state.Engine.
type engine struct{ db *DB }

func (e engine) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	return e.db.update(ctx, fn)
}

func (e engine) View(ctx context.Context, fn func(tx state.Tx) error) error {
	return e.db.view(fn)
}

// update queues fn for the next commit and waits until that commit is durable.
// It returns fn's rejection, or the commit's failure. It does not give up when
// ctx ends once fn is queued: the outcome would be unknown, and commits are short.
func (db *DB) update(ctx context.Context, fn func(tx state.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.failure(); err != nil {
		return err
	}
	o := &op{fn: fn, doneC: make(chan struct{})}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fence.ErrClosed
	}
	db.opC <- o
	db.mu.RUnlock()
	<-o.doneC
	return o.err
}

func (db *DB) commitLoop() {
	defer close(db.doneC)
	batch := make([]*op, 0, db.maxBatch)
	for {
		select {
		case o := <-db.opC:
			batch = append(batch[:0], o)
		case <-db.stopC:
			for {
				select {
				case o := <-db.opC:
					db.commit([]*op{o})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < db.maxBatch {
			select {
			case o := <-db.opC:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		db.commit(batch)
	}
}

// commit applies batch in one transaction. A rejection is that change's own
// answer. A change that fails otherwise rolls the whole transaction back, and
// then each change is retried alone, so that one failing change does not fail
// the others. A commit that fails is different: bbolt may have written part of
// it (its meta page is read back from the file), so no change is retried, all
// get the error, and the store stops taking changes until it is reopened —
// the answer PostgreSQL gives to a failed fsync.
func (db *DB) commit(batch []*op) {
	start := time.Now()
	applied := false
	err := db.bdb.Update(func(btx *bbolt.Tx) error {
		tx := newTx(btx)
		for _, o := range batch {
			o.err = o.fn(tx)
			if o.err != nil && !state.IsRejection(o.err) {
				return o.err
			}
		}
		applied = true
		return nil
	})
	commitDuration.Observe(time.Since(start).Seconds())
	commitBatchSize.Observe(float64(len(batch)))
	switch {
	case err != nil && applied:
		db.fail(fmt.Errorf("bolt: commit failed, outcome unknown: %w", err))
	case err != nil && len(batch) > 1:
		for _, o := range batch {
			db.commit([]*op{o})
		}
		return
	case err != nil:
		batch[0].err = fmt.Errorf("bolt: %w", err)
	}
	if failed := db.failure(); failed != nil {
		for _, o := range batch {
			o.err = failed
		}
	}
	for _, o := range batch {
		close(o.doneC)
	}
}

// fail puts the store out of service for changes: every later change, and
// Check, returns err.
func (db *DB) fail(err error) {
	db.failMu.Lock()
	defer db.failMu.Unlock()
	if db.failed == nil {
		db.failed = err
	}
}

func (db *DB) failure() error {
	db.failMu.Lock()
	defer db.failMu.Unlock()
	return db.failed
}

// view runs fn in a read-only transaction, or returns fence.ErrClosed.
func (db *DB) view(fn func(tx state.Tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return fence.ErrClosed
	}
	return db.bdb.View(func(btx *bbolt.Tx) error { return fn(newTx(btx)) })
}

// boltTx implements state.Tx on a bbolt transaction.
type boltTx struct {
	meta, resources, entries *bbolt.Bucket
}

func newTx(btx *bbolt.Tx) *boltTx {
	return &boltTx{
		meta:      btx.Bucket(bucketMeta),
		resources: btx.Bucket(bucketResources),
		entries:   btx.Bucket(bucketEntries),
	}
}

func (t *boltTx) Resource(name string) (state.Resource, error) {
	b := t.resources.Get([]byte(name))
	if b == nil {
		return state.Resource{}, nil
	}
	r, err := decodeResource(b)
	if err != nil {
		return state.Resource{}, fmt.Errorf("%w %q", err, name)
	}
	return r, nil
}

func (t *boltTx) SetResource(name string, r state.Resource) error {
	return t.resources.Put([]byte(name), encodeResource(r))
}

func (t *boltTx) Entry(resource, key string) (state.Entry, bool, error) {
	b := t.entries.Get(entryKey(resource, key))
	if b == nil {
		return state.Entry{}, false, nil
	}
	e, err := decodeEntry(b)
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("%w %q/%q", err, resource, key)
	}
	return e, true, nil
}

func (t *boltTx) SetEntry(resource, key string, e state.Entry) error {
	return t.entries.Put(entryKey(resource, key), encodeEntry(e))
}

func (t *boltTx) DeleteEntry(resource, key string) error {
	return t.entries.Delete(entryKey(resource, key))
}

func (t *boltTx) Rev() (fence.Rev, error) {
	b := t.meta.Get(keyRev)
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: revision", errCorrupt)
	}
	return fence.Rev(binary.BigEndian.Uint64(b)), nil
}

func (t *boltTx) SetRev(rev fence.Rev) error {
	return t.meta.Put(keyRev, binary.BigEndian.AppendUint64(nil, uint64(rev)))
}

func (t *boltTx) Resources(fn func(name string, r state.Resource) error) error {
	return t.resources.ForEach(func(k, v []byte) error {
		r, err := decodeResource(v)
		if err != nil {
			return fmt.Errorf("%w %q", err, k)
		}
		return fn(string(k), r)
	})
}
