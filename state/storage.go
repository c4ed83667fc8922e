package state

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/fence-lock/fence"
)

// The operations of fence.Store, each as its rule over a Tx (what it
// checks and changes, the same for every engine) and then the DB method
// that validates its input, commits the rule in a group commit and wraps
// its error: one place per operation.

// Put stores value under resource/key if the token is accepted and c holds.
func Put(tx Tx, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, value, token, c, false, false)
}

// Put implements fence.Store.
func (db *DB) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := checkValue(value)
	if err == nil {
		err = validateName(resource, key)
	}
	if err == nil {
		err = db.update(ctx, func(tx Tx) (err error) {
			res, err = Put(tx, resource, key, value, token, c)
			return err
		}, len(value))
	}
	return res, db.wrap(err, "put %q/%q", resource, key)
}

// Delete removes resource/key if the token is accepted, c holds and the key exists.
func Delete(tx Tx, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, nil, token, c, true, false)
}

// Delete implements fence.Store.
func (db *DB) Delete(ctx context.Context, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := validateName(resource, key)
	if err == nil {
		err = db.Update(ctx, func(tx Tx) (err error) {
			res, err = Delete(tx, resource, key, token, c)
			return err
		})
	}
	return res, db.wrap(err, "delete %q/%q", resource, key)
}

// PutUnfenced stores value under resource/key if c holds, without fencing:
// the fence is neither checked nor raised (see fence.UnfencedStore).
func PutUnfenced(tx Tx, resource, key string, value []byte, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, value, 0, c, false, true)
}

var _ fence.UnfencedStore = (*DB)(nil)

// PutUnfenced implements fence.UnfencedStore.
func (db *DB) PutUnfenced(ctx context.Context, resource, key string, value []byte, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := checkValue(value)
	if err == nil {
		err = validateName(resource, key)
	}
	if err == nil {
		err = db.update(ctx, func(tx Tx) (err error) {
			res, err = PutUnfenced(tx, resource, key, value, c)
			return err
		}, len(value))
	}
	return res, db.wrap(err, "put %q/%q", resource, key)
}

// DeleteUnfenced removes resource/key if c holds and the key exists, without
// fencing.
func DeleteUnfenced(tx Tx, resource, key string, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, nil, 0, c, true, true)
}

// DeleteUnfenced implements fence.UnfencedStore.
func (db *DB) DeleteUnfenced(ctx context.Context, resource, key string, c fence.Cond) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := validateName(resource, key)
	if err == nil {
		err = db.Update(ctx, func(tx Tx) (err error) {
			res, err = DeleteUnfenced(tx, resource, key, c)
			return err
		})
	}
	return res, db.wrap(err, "delete %q/%q", resource, key)
}

func write(tx Tx, resource, key string, value []byte, token fence.Token, c fence.Cond, del, unfenced bool) (fence.WriteResult, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if !unfenced {
		if err := checkToken(resource, r, token); err != nil {
			return fence.WriteResult{}, err
		}
	}
	e, exists, err := tx.Entry(resource, key)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := checkCond(c, e, exists); err != nil {
		return fence.WriteResult{}, err
	}
	if del && !exists {
		return fence.WriteResult{}, fmt.Errorf("%w: key %q", fence.ErrNotFound, key)
	}
	rev, err := nextRev(tx)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if del {
		err = tx.DeleteEntry(resource, key)
	} else {
		err = tx.SetEntry(resource, key, Entry{Value: value, Rev: rev, Token: token})
	}
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := tx.SetRev(rev); err != nil {
		return fence.WriteResult{}, err
	}
	if unfenced {
		// The fence is neither checked nor raised.
		return fence.WriteResult{Rev: rev, LastFence: r.LastFence}, nil
	}
	r.LastFence = token
	if err := tx.SetResource(resource, r); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: rev, LastFence: token, Holder: holderOf(r, token)}, nil
}

func checkValue(value []byte) error {
	if len(value) > fence.MaxValueSize {
		return fmt.Errorf("%w: value is %d bytes, more than %d", fence.ErrTooLarge, len(value), fence.MaxValueSize)
	}
	return nil
}

// Get implements fence.Store.
func (db *DB) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	item := fence.Item{Resource: resource, Key: key}
	err := validateName(resource, key)
	if err == nil {
		err = db.View(ctx, func(tx Tx) error {
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
		err = db.View(ctx, func(tx Tx) (err error) {
			r, err = tx.Resource(name)
			return err
		})
	}
	return r, db.wrap(err, "read %q", name)
}

// Claim raises the resource's fence to token without writing a key.
func Claim(tx Tx, resource string, token fence.Token) (fence.WriteResult, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := checkToken(resource, r, token); err != nil {
		return fence.WriteResult{}, err
	}
	rev, err := tx.Rev()
	if err != nil {
		return fence.WriteResult{}, err
	}
	if r.LastFence != token {
		r.LastFence = token
		if err := tx.SetResource(resource, r); err != nil {
			return fence.WriteResult{}, err
		}
	}
	return fence.WriteResult{Rev: rev, LastFence: token, Holder: holderOf(r, token)}, nil
}

// Claim implements fence.Store.
func (db *DB) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	var res fence.WriteResult
	err := fence.ValidateResource(resource)
	if err == nil {
		err = db.Update(ctx, func(tx Tx) (err error) {
			res, err = Claim(tx, resource, token)
			return err
		})
	}
	return res, db.wrap(err, "claim %q", resource)
}

// ValidateTxn checks the shape of t, before any state is read, in the API's
// order of precedence: too_large, bad_request (names, op kinds),
// fence_required (an op's resource without a fences entry), invalid_token.
// Where several entries fail the same way, the first op, or the first
// resource in byte order, is named.
func ValidateTxn(t *fence.Txn) error {
	for _, part := range []struct {
		what string
		n    int
	}{{"fences", len(t.Fences)}, {"if", len(t.If)}, {"then", len(t.Then)}} {
		if part.n > fence.MaxTxnEntries {
			return fmt.Errorf("txn %s: %w: %d entries, more than %d", part.what, fence.ErrTooLarge, part.n, fence.MaxTxnEntries)
		}
	}
	for i, op := range t.Then {
		if len(op.Value) > fence.MaxValueSize {
			return fmt.Errorf("txn then[%d]: %w: value is %d bytes, more than %d", i, fence.ErrTooLarge, len(op.Value), fence.MaxValueSize)
		}
	}
	names := slices.Sorted(maps.Keys(t.Fences))
	for _, name := range names {
		if err := fence.ValidateResource(name); err != nil {
			return fmt.Errorf("txn fences: %w", err)
		}
	}
	for i, c := range t.If {
		if err := validateName(c.Resource, c.Key); err != nil {
			return fmt.Errorf("txn if[%d]: %w", i, err)
		}
	}
	for i, op := range t.Then {
		if err := validateName(op.Resource, op.Key); err != nil {
			return fmt.Errorf("txn then[%d]: %w", i, err)
		}
		if op.Kind != fence.OpPut && op.Kind != fence.OpDelete {
			return fmt.Errorf("txn then[%d]: %w: unknown op %q", i, fence.ErrBadRequest, op.Kind)
		}
	}
	for i, op := range t.Then {
		if _, ok := t.Fences[op.Resource]; !ok {
			return fmt.Errorf("txn then[%d]: %w: resource %q has no entry in fences", i, fence.ErrFenceRequired, op.Resource)
		}
	}
	for _, name := range names {
		if token := t.Fences[name]; !token.Valid() {
			return fmt.Errorf("txn fences: %w: %q: %d", fence.ErrInvalidToken, name, token)
		}
	}
	return nil
}

func validateName(resource, key string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	return fence.ValidateKey(key)
}

// Txn applies t all or nothing. Errors name the first failing resource in byte
// order, and follow the API's precedence: token_not_issued, fenced, precondition_failed.
func Txn(tx Tx, t *fence.Txn) (fence.Rev, error) {
	if err := ValidateTxn(t); err != nil {
		return 0, err
	}
	names := make([]string, 0, len(t.Fences))
	for name := range t.Fences {
		names = append(names, name)
	}
	slices.Sort(names)
	states := make([]Resource, len(names))
	for i, name := range names {
		r, err := tx.Resource(name)
		if err != nil {
			return 0, err
		}
		states[i] = r
	}
	for i, name := range names {
		if token := t.Fences[name]; token > states[i].LastToken {
			return 0, &fence.TokenNotIssuedError{Resource: name, Presented: token, LastToken: states[i].LastToken}
		}
	}
	for i, name := range names {
		if token := t.Fences[name]; token < states[i].LastFence {
			return 0, &fence.FencedError{Resource: name, Presented: token, LastFence: states[i].LastFence}
		}
	}
	for i, c := range t.If {
		e, exists, err := tx.Entry(c.Resource, c.Key)
		if err != nil {
			return 0, err
		}
		if c.Rev == 0 && exists || c.Rev != 0 && (!exists || e.Rev != c.Rev) {
			return 0, fmt.Errorf("%w: if[%d]: %q/%q is at revision %d, not %d",
				fence.ErrPreconditionFailed, i, c.Resource, c.Key, e.Rev, c.Rev)
		}
	}
	rev, err := tx.Rev()
	if err != nil {
		return 0, err
	}
	if len(t.Then) > 0 {
		rev++
		for _, op := range t.Then {
			if op.Kind == fence.OpPut {
				err = tx.SetEntry(op.Resource, op.Key, Entry{Value: op.Value, Rev: rev, Token: t.Fences[op.Resource]})
			} else {
				err = tx.DeleteEntry(op.Resource, op.Key)
			}
			if err != nil {
				return 0, err
			}
		}
		if err := tx.SetRev(rev); err != nil {
			return 0, err
		}
	}
	for i, name := range names {
		if token := t.Fences[name]; token != states[i].LastFence {
			states[i].LastFence = token
			if err := tx.SetResource(name, states[i]); err != nil {
				return 0, err
			}
		}
	}
	return rev, nil
}

// Txn implements fence.Store.
func (db *DB) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	var rev fence.Rev
	size := 0
	for _, op := range t.Then {
		size += len(op.Value)
	}
	err := db.update(ctx, func(tx Tx) (err error) {
		rev, err = Txn(tx, t)
		return err
	}, size)
	return rev, db.wrap(err, "txn")
}
