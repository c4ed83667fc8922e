package bolt

import (
	"bytes"
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
	"github.com/fence-lock/fence/state"
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

// stateDB is package state's DB: the operations' rules and the group
// commit over this engine. The alias embeds it as an unexported field, so
// that its methods are the DB's and the field is not.
type stateDB = state.DB

// DB is fence's durable state in one bbolt file. It implements fence.Store
// and fence.Ledger with the rules and the group commit of package state, and
// is safe for concurrent use. Every change returns after it is fsynced.
type DB struct {
	*stateDB
	bdb *bbolt.DB

	mu        sync.RWMutex // held for reading while a read or a commit is inside bbolt
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// Open opens or creates the state in directory dir. It fails if another
// process has the directory open.
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
	db := &DB{bdb: bdb}
	db.stateDB = state.NewDB("bolt", engine{db})
	return db, nil
}

// Close finishes the changes already queued and closes the file. Later calls
// return fence.ErrClosed; a second Close returns when the first is done.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.stateDB.Close()
		// Readers hold mu for reading: none is inside bbolt after this.
		db.mu.Lock()
		db.closed = true
		db.closeErr = db.bdb.Close()
		db.mu.Unlock()
	})
	return db.closeErr
}

// Check reports whether the database is open and readable, for readiness probes.
func (db *DB) Check() error {
	if err := db.Err(); err != nil {
		return err
	}
	return db.View(context.Background(), func(tx state.Tx) error {
		_, err := tx.Rev()
		return err
	})
}

// engine implements state.Engine and state.Viewer on the bbolt file. A
// failed bbolt commit may have written part of the transaction (its meta page
// is read back from the file), so its outcome is unknown, and the DB stops
// taking changes.
type engine struct{ db *DB }

func (e engine) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	e.db.mu.RLock()
	defer e.db.mu.RUnlock()
	if e.db.closed {
		return fmt.Errorf("%w: %w", state.ErrNotApplied, fence.ErrClosed)
	}
	return e.db.bdb.Update(func(btx *bbolt.Tx) error { return fn(newTx(btx)) })
}

func (e engine) View(ctx context.Context, fn func(tx state.Tx) error) error {
	e.db.mu.RLock()
	defer e.db.mu.RUnlock()
	if e.db.closed {
		return fence.ErrClosed
	}
	return e.db.bdb.View(func(btx *bbolt.Tx) error { return fn(newTx(btx)) })
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
	r, err := state.DecodeResource(b)
	if err != nil {
		return state.Resource{}, fmt.Errorf("%w %q", err, name)
	}
	return r, nil
}

func (t *boltTx) SetResource(name string, r state.Resource) error {
	return t.resources.Put([]byte(name), state.EncodeResource(r))
}

func (t *boltTx) Entry(resource, key string) (state.Entry, bool, error) {
	b := t.entries.Get(state.EntryKey(resource, key))
	if b == nil {
		return state.Entry{}, false, nil
	}
	e, err := state.DecodeEntry(b)
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("%w %q/%q", err, resource, key)
	}
	return e, true, nil
}

func (t *boltTx) SetEntry(resource, key string, e state.Entry) error {
	return t.entries.Put(state.EntryKey(resource, key), state.EncodeEntry(e))
}

func (t *boltTx) DeleteEntry(resource, key string) error {
	return t.entries.Delete(state.EntryKey(resource, key))
}

func (t *boltTx) Rev() (fence.Rev, error) {
	b := t.meta.Get(keyRev)
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: revision", state.ErrCorrupt)
	}
	return fence.Rev(binary.BigEndian.Uint64(b)), nil
}

func (t *boltTx) SetRev(rev fence.Rev) error {
	return t.meta.Put(keyRev, binary.BigEndian.AppendUint64(nil, uint64(rev)))
}

func (t *boltTx) Resources(fn func(name string, r state.Resource) error) error {
	return t.resources.ForEach(func(k, v []byte) error {
		r, err := state.DecodeResource(v)
		if err != nil {
			return fmt.Errorf("%w %q", err, k)
		}
		return fn(string(k), r)
	})
}

// Export calls resource for every resource with state and entry for every
// entry, in one read-only transaction, and returns the store revision: what
// fence migrate copies into a shared store. Values passed to entry are
// valid only during the call.
func (db *DB) Export(ctx context.Context, resource func(name string, r state.Resource) error, entry func(resource, key string, e state.Entry) error) (fence.Rev, error) {
	var rev fence.Rev
	err := engine{db}.View(ctx, func(tx state.Tx) error {
		var err error
		if rev, err = tx.Rev(); err != nil {
			return err
		}
		if err := tx.Resources(resource); err != nil {
			return err
		}
		return tx.(*boltTx).entries.ForEach(func(k, v []byte) error {
			res, key, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return fmt.Errorf("%w: entry key %q", state.ErrCorrupt, k)
			}
			e, err := state.DecodeEntry(v)
			if err != nil {
				return fmt.Errorf("%w %q", err, k)
			}
			return entry(string(res), string(key), e)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: export: %w", err)
	}
	return rev, nil
}
