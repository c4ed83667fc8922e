// Package memory is fence's state held in memory: a fence.Store and
// fence.Ledger with exactly the rules of the durable store (both run package
// internal/state), for tests and for running without a disk. Nothing survives
// the process.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/state"
)

// DB is state in memory. It implements fence.Store and fence.Ledger and is
// safe for concurrent use. The zero DB is not usable; call New.
type DB struct {
	mu sync.Mutex // serialises every transaction
	tx mapTx
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// New returns an empty DB.
func New() *DB {
	return &DB{tx: mapTx{resources: map[string]state.Resource{}, entries: map[entryKey]state.Entry{}}}
}

// do runs fn as one transaction. The state rules check before they change, so
// a rejected fn has changed nothing, and maps cannot fail half-way.
func (db *DB) do(ctx context.Context, fn func(tx state.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return fn(&db.tx)
}

// Put implements fence.Store.
func (db *DB) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (res fence.WriteResult, err error) {
	if len(value) > fence.MaxValueSize {
		return res, fmt.Errorf("memory: put: %w: value is %d bytes", fence.ErrTooLarge, len(value))
	}
	if err := validate(resource, key); err != nil {
		return res, err
	}
	value = bytes.Clone(value)
	err = db.do(ctx, func(tx state.Tx) error {
		res, err = state.Put(tx, resource, key, value, token, c)
		return err
	})
	return res, wrap("put", err)
}

// Delete implements fence.Store.
func (db *DB) Delete(ctx context.Context, resource, key string, token fence.Token, c fence.Cond) (res fence.WriteResult, err error) {
	if err := validate(resource, key); err != nil {
		return res, err
	}
	err = db.do(ctx, func(tx state.Tx) error {
		res, err = state.Delete(tx, resource, key, token, c)
		return err
	})
	return res, wrap("delete", err)
}

// Get implements fence.Store.
func (db *DB) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	if err := validate(resource, key); err != nil {
		return fence.Item{}, err
	}
	db.mu.Lock()
	e, ok, _ := db.tx.Entry(resource, key)
	db.mu.Unlock()
	if !ok {
		return fence.Item{}, fmt.Errorf("memory: get: %w: key %q", fence.ErrNotFound, key)
	}
	return fence.Item{Resource: resource, Key: key, Value: bytes.Clone(e.Value), Rev: e.Rev, Token: e.Token}, nil
}

// Fence implements fence.Store.
func (db *DB) Fence(ctx context.Context, resource string) (fence.Token, error) {
	r, err := db.resource(resource)
	return r.LastFence, err
}

// LastToken implements fence.Ledger.
func (db *DB) LastToken(ctx context.Context, resource string) (fence.Token, error) {
	r, err := db.resource(resource)
	return r.LastToken, err
}

func (db *DB) resource(name string) (state.Resource, error) {
	if err := fence.ValidateResource(name); err != nil {
		return state.Resource{}, fmt.Errorf("memory: %w", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.tx.resources[name], nil
}

// Claim implements fence.Store.
func (db *DB) Claim(ctx context.Context, resource string, token fence.Token) (res fence.WriteResult, err error) {
	if err := fence.ValidateResource(resource); err != nil {
		return res, fmt.Errorf("memory: claim: %w", err)
	}
	err = db.do(ctx, func(tx state.Tx) error {
		res, err = state.Claim(tx, resource, token)
		return err
	})
	return res, wrap("claim", err)
}

// Txn implements fence.Store.
func (db *DB) Txn(ctx context.Context, t *fence.Txn) (rev fence.Rev, err error) {
	if err := state.ValidateTxn(t); err != nil {
		return 0, fmt.Errorf("memory: txn: %w", err)
	}
	c := *t
	c.Then = make([]fence.Op, len(t.Then))
	for i, op := range t.Then {
		op.Value = bytes.Clone(op.Value)
		c.Then[i] = op
	}
	err = db.do(ctx, func(tx state.Tx) error {
		rev, err = state.Txn(tx, &c)
		return err
	})
	return rev, wrap("txn", err)
}

// Grant implements fence.Ledger.
func (db *DB) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (token fence.Token, err error) {
	err = db.do(ctx, func(tx state.Tx) error {
		token, err = state.Grant(tx, resource, holder, ttl, expires)
		return err
	})
	return token, wrap("grant", err)
}

// Refresh implements fence.Ledger.
func (db *DB) Refresh(ctx context.Context, resource string, token fence.Token, ttl time.Duration, expires time.Time) (lastFence fence.Token, err error) {
	err = db.do(ctx, func(tx state.Tx) error {
		lastFence, err = state.Refresh(tx, resource, token, ttl, expires)
		return err
	})
	return lastFence, wrap("refresh", err)
}

// End implements fence.Ledger.
func (db *DB) End(ctx context.Context, resource string, token fence.Token) (lastFence fence.Token, err error) {
	err = db.do(ctx, func(tx state.Tx) error {
		lastFence, err = state.End(tx, resource, token)
		return err
	})
	return lastFence, wrap("end", err)
}

// Leases implements fence.Ledger.
func (db *DB) Leases(ctx context.Context) ([]fence.Lease, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	var leases []fence.Lease
	for name, r := range db.tx.resources {
		if l, ok := r.Lease(name); ok {
			leases = append(leases, l)
		}
	}
	return leases, nil
}

func validate(resource, key string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := fence.ValidateKey(key); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("memory: %s: %w", op, err)
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

func (t *mapTx) SetEntry(resource, key string, e state.Entry) error {
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
