package state

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
)

// Engine runs the transactions of a backend.
type Engine interface {
	// Update runs fn in one atomic transaction and returns after it is
	// durable. fn may run more than once (a backend may retry it alone after
	// a shared commit failed), so it keeps its results in variables it
	// overwrites. A rejection from fn is returned as it is.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(tx Tx) error) error
}

// DB implements fence.Store and fence.Ledger with the rules of this package
// on an Engine, so that every backend answers exactly alike. Values it
// returns are copies: the backend's memory is valid only inside a transaction.
type DB struct {
	name   string // the backend's package name, which prefixes errors
	engine Engine
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// NewDB returns a DB on engine; name prefixes its errors ("bolt: put ...").
func NewDB(name string, engine Engine) *DB { return &DB{name: name, engine: engine} }

// Put implements fence.Store.
func (db *DB) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := checkValue(value)
	if err == nil {
		err = validateName(resource, key)
	}
	if err == nil {
		err = db.engine.Update(ctx, func(tx Tx) (err error) {
			res, err = Put(tx, resource, key, value, token, c)
			return err
		})
	}
	return res, db.wrap(err, "put %q/%q", resource, key)
}

// Delete implements fence.Store.
func (db *DB) Delete(ctx context.Context, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := validateName(resource, key)
	if err == nil {
		err = db.engine.Update(ctx, func(tx Tx) (err error) {
			res, err = Delete(tx, resource, key, token, c)
			return err
		})
	}
	return res, db.wrap(err, "delete %q/%q", resource, key)
}

// Get implements fence.Store.
func (db *DB) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	item := fence.Item{Resource: resource, Key: key}
	err := validateName(resource, key)
	if err == nil {
		err = db.engine.View(ctx, func(tx Tx) error {
			e, ok, err := tx.Entry(resource, key)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: key %q", fence.ErrNotFound, key)
			}
			item.Value, item.Rev, item.Token = bytes.Clone(e.Value), e.Rev, e.Token
			return nil
		})
	}
	if err != nil {
		return fence.Item{}, db.wrap(err, "get %q/%q", resource, key)
	}
	return item, nil
}

// Fence implements fence.Store.
func (db *DB) Fence(ctx context.Context, resource string) (fence.Token, error) {
	r, err := db.resource(ctx, resource)
	return r.LastFence, err
}

// LastToken implements fence.Ledger.
func (db *DB) LastToken(ctx context.Context, resource string) (fence.Token, error) {
	r, err := db.resource(ctx, resource)
	return r.LastToken, err
}

func (db *DB) resource(ctx context.Context, name string) (Resource, error) {
	var r Resource
	err := fence.ValidateResource(name)
	if err == nil {
		err = db.engine.View(ctx, func(tx Tx) (err error) {
			r, err = tx.Resource(name)
			return err
		})
	}
	return r, db.wrap(err, "read %q", name)
}

// Claim implements fence.Store.
func (db *DB) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := fence.ValidateResource(resource)
	if err == nil {
		err = db.engine.Update(ctx, func(tx Tx) (err error) {
			res, err = Claim(tx, resource, token)
			return err
		})
	}
	return res, db.wrap(err, "claim %q", resource)
}

// Txn implements fence.Store.
func (db *DB) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	var rev fence.Rev
	err := db.engine.Update(ctx, func(tx Tx) (err error) {
		rev, err = Txn(tx, t)
		return err
	})
	return rev, db.wrap(err, "txn")
}

// Grant implements fence.Ledger.
func (db *DB) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var token fence.Token
	err := db.engine.Update(ctx, func(tx Tx) (err error) {
		token, err = Grant(tx, resource, holder, ttl, expires)
		return err
	})
	return token, db.wrap(err, "grant %q", resource)
}

// Refresh implements fence.Ledger.
func (db *DB) Refresh(ctx context.Context, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var lastFence fence.Token
	err := db.engine.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = Refresh(tx, resource, token, ttl, expires)
		return err
	})
	return lastFence, db.wrap(err, "refresh %q", resource)
}

// End implements fence.Ledger.
func (db *DB) End(ctx context.Context, resource string, token fence.Token) (fence.Token, error) {
	var lastFence fence.Token
	err := db.engine.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = End(tx, resource, token)
		return err
	})
	return lastFence, db.wrap(err, "end %q", resource)
}

// Revoke implements fence.Ledger.
func (db *DB) Revoke(ctx context.Context, resource string) (lastFence, revoked fence.Token, err error) {
	err = fence.ValidateResource(resource)
	if err == nil {
		err = db.engine.Update(ctx, func(tx Tx) (err error) {
			lastFence, revoked, err = Revoke(tx, resource)
			return err
		})
	}
	return lastFence, revoked, db.wrap(err, "revoke %q", resource)
}

// Leases implements fence.Ledger.
func (db *DB) Leases(ctx context.Context) ([]fence.Lease, error) {
	var leases []fence.Lease
	err := db.engine.View(ctx, func(tx Tx) error {
		leases = leases[:0]
		return tx.Resources(func(name string, r Resource) error {
			if l, ok := r.Lease(name); ok {
				leases = append(leases, l)
			}
			return nil
		})
	})
	if err != nil {
		return nil, db.wrap(err, "leases")
	}
	return leases, nil
}

// wrap prefixes err with the backend and the operation; nil stays nil.
func (db *DB) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", db.name, fmt.Sprintf(format, args...), err)
}

func checkValue(value []byte) error {
	if len(value) > fence.MaxValueSize {
		return fmt.Errorf("%w: value is %d bytes, more than %d", fence.ErrTooLarge, len(value), fence.MaxValueSize)
	}
	return nil
}
