package state_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/state"
)

// anyTokenTx is a mapTx on which every token counts as issued: guards know
// no lock service, and the guard suite writes with tokens of its own choice.
type anyTokenTx struct{ *mapTx }

func (t anyTokenTx) Resource(name string) (state.Resource, error) {
	r, err := t.mapTx.Resource(name)
	r.LastToken = fence.MaxToken
	return r, err
}

// lockedEngine runs every transaction under one mutex.
type lockedEngine struct {
	mu sync.Mutex
	tx state.Tx
}

func (e *lockedEngine) Update(ctx context.Context, fn func(state.Tx) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fn(e.tx)
}

func (e *lockedEngine) View(ctx context.Context, fn func(state.Tx) error) error {
	return e.Update(ctx, fn)
}

// guarded adapts fence's own storage rules (state.DB) to fencetest.Guarded:
// a guarded write is a txn with the resource's fence.
type guarded struct{ db *state.DB }

func (g guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	txn := &fence.Txn{Fences: map[string]fence.Token{resource: token}}
	for k, v := range writes {
		op := fence.Op{Kind: fence.OpPut, Resource: resource, Key: k, Value: v}
		if v == nil {
			op.Kind = fence.OpDelete
		}
		txn.Then = append(txn.Then, op)
	}
	_, err := g.db.Txn(t.Context(), txn)
	return err
}

func (g guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	item, err := g.db.Get(t.Context(), resource, key)
	if errors.Is(err, fence.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return item.Value, true
}

func (g guarded) Fence(t *testing.T, resource string) fence.Token {
	f, err := g.db.Fence(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGuard runs the guards' conformance suite on fence's own storage rules.
func TestGuard(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded {
		return guarded{state.NewDB("state", &lockedEngine{tx: anyTokenTx{newTx()}})}
	})
}
