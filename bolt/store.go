package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/state"
)

// Put implements fence.Store.
func (db *DB) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	if len(value) > fence.MaxValueSize {
		return fence.WriteResult{}, fmt.Errorf("bolt: put %q/%q: %w: value is %d bytes", resource, key, fence.ErrTooLarge, len(value))
	}
	if err := validate(resource, key); err != nil {
		return fence.WriteResult{}, err
	}
	var res fence.WriteResult
	err := db.update(ctx, func(tx state.Tx) (err error) {
		res, err = state.Put(tx, resource, key, value, token, c)
		return err
	})
	if err != nil {
		return fence.WriteResult{}, fmt.Errorf("bolt: put %q/%q: %w", resource, key, err)
	}
	return res, nil
}

// Delete implements fence.Store.
func (db *DB) Delete(ctx context.Context, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	if err := validate(resource, key); err != nil {
		return fence.WriteResult{}, err
	}
	var res fence.WriteResult
	err := db.update(ctx, func(tx state.Tx) (err error) {
		res, err = state.Delete(tx, resource, key, token, c)
		return err
	})
	if err != nil {
		return fence.WriteResult{}, fmt.Errorf("bolt: delete %q/%q: %w", resource, key, err)
	}
	return res, nil
}

// Get implements fence.Store.
func (db *DB) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	if err := validate(resource, key); err != nil {
		return fence.Item{}, err
	}
	item := fence.Item{Resource: resource, Key: key}
	err := db.view(func(tx state.Tx) error {
		e, ok, err := tx.Entry(resource, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: key %q", fence.ErrNotFound, key)
		}
		item.Value = bytes.Clone(e.Value) // bbolt's memory is valid only inside the transaction
		item.Rev, item.Token = e.Rev, e.Token
		return nil
	})
	if err != nil {
		return fence.Item{}, fmt.Errorf("bolt: get %q/%q: %w", resource, key, err)
	}
	return item, nil
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
		return state.Resource{}, fmt.Errorf("bolt: %w", err)
	}
	var r state.Resource
	err := db.view(func(tx state.Tx) (err error) {
		r, err = tx.Resource(name)
		return err
	})
	if err != nil {
		return state.Resource{}, fmt.Errorf("bolt: read %q: %w", name, err)
	}
	return r, nil
}

// Claim implements fence.Store.
func (db *DB) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.WriteResult{}, fmt.Errorf("bolt: claim: %w", err)
	}
	var res fence.WriteResult
	err := db.update(ctx, func(tx state.Tx) (err error) {
		res, err = state.Claim(tx, resource, token)
		return err
	})
	if err != nil {
		return fence.WriteResult{}, fmt.Errorf("bolt: claim %q: %w", resource, err)
	}
	return res, nil
}

// Txn implements fence.Store.
func (db *DB) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	if err := state.ValidateTxn(t); err != nil {
		return 0, fmt.Errorf("bolt: txn: %w", err)
	}
	var rev fence.Rev
	err := db.update(ctx, func(tx state.Tx) (err error) {
		rev, err = state.Txn(tx, t)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: txn: %w", err)
	}
	return rev, nil
}

// Grant implements fence.Ledger.
func (db *DB) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var token fence.Token
	err := db.update(ctx, func(tx state.Tx) (err error) {
		token, err = state.Grant(tx, resource, holder, ttl, expires)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: grant %q: %w", resource, err)
	}
	return token, nil
}

// Refresh implements fence.Ledger.
func (db *DB) Refresh(ctx context.Context, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var lastFence fence.Token
	err := db.update(ctx, func(tx state.Tx) (err error) {
		lastFence, err = state.Refresh(tx, resource, token, ttl, expires)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: refresh %q: %w", resource, err)
	}
	return lastFence, nil
}

// End implements fence.Ledger.
func (db *DB) End(ctx context.Context, resource string, token fence.Token) (fence.Token, error) {
	var lastFence fence.Token
	err := db.update(ctx, func(tx state.Tx) (err error) {
		lastFence, err = state.End(tx, resource, token)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: end %q: %w", resource, err)
	}
	return lastFence, nil
}

// Leases implements fence.Ledger.
func (db *DB) Leases(ctx context.Context) ([]fence.Lease, error) {
	var leases []fence.Lease
	err := db.viewBolt(func(btx *bbolt.Tx) error {
		return btx.Bucket(bucketResources).ForEach(func(k, v []byte) error {
			r, err := decodeResource(v)
			if err != nil {
				return fmt.Errorf("%w %q", err, k)
			}
			if l, ok := r.Lease(string(k)); ok {
				leases = append(leases, l)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: leases: %w", err)
	}
	return leases, nil
}

func validate(resource, key string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return fmt.Errorf("bolt: %w", err)
	}
	if err := fence.ValidateKey(key); err != nil {
		return fmt.Errorf("bolt: %w", err)
	}
	return nil
}
