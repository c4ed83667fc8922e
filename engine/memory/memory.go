// Package memory is fence's state held in memory: a fence.Store and
// fence.Ledger with exactly the rules of the durable store (both run package
// state), for tests and for running without a disk. Nothing survives the
// process.
package memory

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// stateDB is package state's DB: the operations' rules and the group
// commit over this engine. The alias embeds it as an unexported field, so
// that its methods are the DB's and the field is not.
type stateDB = state.DB

// DB is state in memory. It implements fence.Store and fence.Ledger with the
// rules of package state, and is safe for concurrent use. It needs no Close.
// The zero DB is not usable; call New.
type DB struct {
	*stateDB
	mu sync.Mutex // serialises every transaction
	tx mapTx
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// New returns an empty DB.
func New() *DB {
	db := &DB{tx: mapTx{resources: map[string]state.Resource{}, entries: map[entryKey]state.Entry{}}}
	db.stateDB = state.NewDB("memory", engine{db})
	return db
}

// engine implements state.Engine and state.Viewer. The state rules check
// before they change, so a rejected change has changed nothing, and maps
// cannot fail half-way: no transaction needs a rollback.
type engine struct{ db *DB }

func (e engine) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	return e.View(ctx, fn)
}

func (e engine) View(ctx context.Context, fn func(tx state.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.db.mu.Lock()
	defer e.db.mu.Unlock()
	return fn(&e.db.tx)
}

type entryKey struct{ resource, key string }

// mapTx implements state.Tx on maps.
type mapTx struct {
	resources map[string]state.Resource
	entries   map[entryKey]state.Entry
	rev       fence.Rev
}

func (t *mapTx) Resource(name string) (state.Resource, error) { return t.resources[name], nil }

func (t *mapTx) SetResource(name string, r state.Resource) error {
	t.resources[name] = r
	return nil
}

func (t *mapTx) Entry(resource, key string) (state.Entry, bool, error) {
	e, ok := t.entries[entryKey{resource, key}]
	return e, ok, nil
}

// SetEntry keeps a copy of the value: the caller's buffer is not ours.
func (t *mapTx) SetEntry(resource, key string, e state.Entry) error {
	e.Value = bytes.Clone(e.Value)
	t.entries[entryKey{resource, key}] = e
	return nil
}

func (t *mapTx) DeleteEntry(resource, key string) error {
	delete(t.entries, entryKey{resource, key})
	return nil
}

func (t *mapTx) Rev() (fence.Rev, error) { return t.rev, nil }

func (t *mapTx) SetRev(rev fence.Rev) error {
	t.rev = rev
	return nil
}

func (t *mapTx) Resources(fn func(name string, r state.Resource) error) error {
	for _, name := range slices.Sorted(maps.Keys(t.resources)) {
		if err := fn(name, t.resources[name]); err != nil {
			return err
		}
	}
	return nil
}
