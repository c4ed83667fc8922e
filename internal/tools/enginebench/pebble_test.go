package enginebench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// Key prefixes: one byte, then the name. Resource names and keys contain no
// control characters, so the zero byte that ends a resource name in an
// entry's key cannot occur inside either.
const (
	prefixResource = 'r' // 'r' resource                 -> state.EncodeResource
	prefixEntry    = 'e' // 'e' resource 0x00 key        -> state.EncodeEntry
	prefixMeta     = 'm' // 'm' name                     -> metadata
)

var keyRev = []byte{prefixMeta, 'r', 'e', 'v'}

// pebbleDB is fence's state in a pebble store (github.com/cockroachdb/pebble,
// CockroachDB's log-structured engine), kept here, in the benchmarks only,
// as the other candidate the embedded engine was chosen against: each
// group commit one pebble batch with one WAL sync.
type pebbleDB struct {
	*state.DB
	pdb  *cpebble.DB
	lock *cpebble.Lock // the directory's lock, held until Close

	mu        sync.RWMutex // held for reading while a read or a commit is inside pebble
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// cacheBytes is the block cache: enough for the hot part of the store; the
// state is small and read mostly through the memtable.
const cacheBytes = 16 << 20

// openPebble opens or creates the state in directory dir.
func openPebble(dir string) (*pebbleDB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebble: create data directory: %w", err)
	}
	lock, err := cpebble.LockDirectory(dir, vfs.Default)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return nil, fmt.Errorf("pebble: open %s: in use by another process", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	cache := cpebble.NewCache(cacheBytes)
	defer cache.Unref()
	pdb, err := cpebble.Open(dir, &cpebble.Options{
		Cache:              cache,
		Lock:               lock,
		FormatMajorVersion: cpebble.FormatNewest,
		Logger:             quietLogger{},
	})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	db := &pebbleDB{pdb: pdb, lock: lock}
	db.DB = state.NewDB("pebble", pebbleEngine{db})
	return db, nil
}

// Close finishes the changes already queued and closes the store. Later
// calls return fence.ErrClosed; a second Close returns when the first is
// done.
func (db *pebbleDB) Close() error {
	db.closeOnce.Do(func() {
		db.DB.Close()
		// Readers hold mu for reading: none is inside pebble after this.
		db.mu.Lock()
		db.closed = true
		db.closeErr = errors.Join(db.pdb.Close(), db.lock.Close())
		db.mu.Unlock()
	})
	return db.closeErr
}

// pebbleEngine implements state.Engine and state.Viewer on pebble. A batch whose
// commit fails may be in the log (pebble wrote it before the sync failed),
// so its outcome is unknown, and the DB stops taking changes.
type pebbleEngine struct{ db *pebbleDB }

func (e pebbleEngine) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	e.db.mu.RLock()
	defer e.db.mu.RUnlock()
	if e.db.closed {
		return fmt.Errorf("%w: %w", state.ErrNotApplied, fence.ErrClosed)
	}
	b := e.db.pdb.NewIndexedBatch()
	defer b.Close()
	if err := fn(&pebbleTx{r: b, w: b}); err != nil {
		return err
	}
	if b.Empty() {
		return nil // reads and rejections only: nothing to make durable
	}
	return b.Commit(cpebble.Sync)
}

func (e pebbleEngine) View(ctx context.Context, fn func(tx state.Tx) error) error {
	e.db.mu.RLock()
	defer e.db.mu.RUnlock()
	if e.db.closed {
		return fence.ErrClosed
	}
	snap := e.db.pdb.NewSnapshot()
	defer snap.Close()
	return fn(&pebbleTx{r: snap})
}

// pebbleTx implements state.Tx on a pebble reader (an indexed batch, which
// sees its own writes, or a snapshot) and, for changes, the batch.
type pebbleTx struct {
	r reader
	w *cpebble.Batch // nil in a View
}

// reader is what pebble's batches and snapshots share.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *cpebble.IterOptions) (*cpebble.Iterator, error)
}

// get returns a copy of the value under key, or nil and false.
func (t *pebbleTx) get(key []byte) ([]byte, bool, error) {
	v, closer, err := t.r.Get(key)
	if errors.Is(err, cpebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(v) // valid only until closer.Close
	closer.Close()
	return v, true, nil
}

func (t *pebbleTx) set(key, value []byte) error {
	if t.w == nil {
		return errors.New("pebble: write in a read-only transaction")
	}
	return t.w.Set(key, value, nil)
}

func resourceKey(name string) []byte {
	return append([]byte{prefixResource}, name...)
}

func entryKey(resource, key string) []byte {
	b := make([]byte, 0, 2+len(resource)+len(key))
	b = append(b, prefixEntry)
	b = append(b, resource...)
	b = append(b, 0)
	return append(b, key...)
}

func (t *pebbleTx) Resource(name string) (state.Resource, error) {
	v, ok, err := t.get(resourceKey(name))
	if err != nil || !ok {
		return state.Resource{}, err
	}
	r, err := state.DecodeResource(v)
	if err != nil {
		return state.Resource{}, fmt.Errorf("%w %q", err, name)
	}
	return r, nil
}

func (t *pebbleTx) SetResource(name string, r state.Resource) error {
	return t.set(resourceKey(name), state.EncodeResource(r))
}

func (t *pebbleTx) Entry(resource, key string) (state.Entry, bool, error) {
	v, ok, err := t.get(entryKey(resource, key))
	if err != nil || !ok {
		return state.Entry{}, false, err
	}
	e, err := state.DecodeEntry(v)
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("%w %q/%q", err, resource, key)
	}
	return e, true, nil
}

func (t *pebbleTx) SetEntry(resource, key string, e state.Entry) error {
	return t.set(entryKey(resource, key), state.EncodeEntry(e))
}

func (t *pebbleTx) DeleteEntry(resource, key string) error {
	if t.w == nil {
		return errors.New("pebble: write in a read-only transaction")
	}
	return t.w.Delete(entryKey(resource, key), nil)
}

func (t *pebbleTx) Rev() (fence.Rev, error) {
	v, ok, err := t.get(keyRev)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: revision", state.ErrCorrupt)
	}
	return fence.Rev(binary.BigEndian.Uint64(v)), nil
}

func (t *pebbleTx) SetRev(rev fence.Rev) error {
	return t.set(keyRev, binary.BigEndian.AppendUint64(nil, uint64(rev)))
}

func (t *pebbleTx) Resources(fn func(name string, r state.Resource) error) error {
	it, err := t.r.NewIter(&cpebble.IterOptions{LowerBound: []byte{prefixResource}, UpperBound: []byte{prefixResource + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[1:])
		r, err := state.DecodeResource(it.Value())
		if err != nil {
			return fmt.Errorf("%w %q", err, name)
		}
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return it.Error()
}

// quietLogger drops pebble's informational lines (fence's engines do not
// log; they return errors) and keeps its fatal ones, which end the process.
type quietLogger struct{}

func (quietLogger) Infof(format string, args ...any)  {}
func (quietLogger) Errorf(format string, args ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	cpebble.DefaultLogger.Fatalf(format, args...)
}
