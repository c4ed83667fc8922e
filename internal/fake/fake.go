// Package fake is fence's lock service and fenced store in memory for
// tests of the HTTP API's server and client: the real rules (package lock
// over package state, on engine/memory), with a clock that stands still, a
// count of the calls of each method, and injectable failures. It
// re-implements none of the rules: what the tests see over it is what a
// server answers.
package fake

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/state"
)

// Now is the fake's clock: it never moves, so leases expire only when a
// test says so (Expire).
var Now = time.Date(2025, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("X", 3600))

// Service is a lock.Service over an engine/memory store whose clock stands
// still at Now. The methods of fence.Locker, fence.Revoker, fence.Store and
// fence.UnfencedStore written below are wrapped: they count their calls
// (Calls, Mutations), return Err when it is set before they do anything,
// and panic with Panic. Every other method of the two embedded parts is
// theirs, promoted unwrapped (fence.Lister's List, say), so that a new
// operation reaches a test through the fake without an edit here; a test
// that wants it counted or failed adds its wrapper below. The embedded
// parts' fields (the lock service's Clock among them) are the fake's: a
// test that sets them breaks the clock that stands still. It is safe for
// concurrent use.
type Service struct {
	*lock.Service // the lock service, its clock the fake's
	*memory.DB    // the store under it

	mu    sync.Mutex
	clock time.Time      // the lock service's; Now but while Expire runs
	calls map[string]int // method name → calls

	Err   error // returned by every wrapped method; set it with SetErr while serving
	Panic bool  // makes every wrapped method panic
}

var (
	_ fence.Locker        = (*Service)(nil)
	_ fence.Revoker       = (*Service)(nil)
	_ fence.Lister        = (*Service)(nil)
	_ fence.Store         = (*Service)(nil)
	_ fence.UnfencedStore = (*Service)(nil)
)

// New returns an empty Service.
func New() *Service {
	f := &Service{DB: memory.New(), clock: Now, calls: map[string]int{}}
	f.Service = lock.NewService(f.DB)
	f.Service.Clock = f.now
	f.Service.Logger = slog.New(slog.DiscardHandler)
	if err := f.Service.Open(context.Background()); err != nil {
		panic(fmt.Sprintf("fake: %v", err)) // an empty store always opens
	}
	return f
}

func (f *Service) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

// enter counts a call and returns the injected error.
func (f *Service) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if f.Panic {
		panic("fake: " + method)
	}
	return f.Err
}

// SetErr makes every wrapped method fail with err (nil: none).
func (f *Service) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Err = err
}

// ResetCalls forgets the calls counted so far.
func (f *Service) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

// Calls returns how often method was called.
func (f *Service) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Mutations returns the calls of mutating methods.
func (f *Service) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range []string{"Acquire", "Renew", "Release", "Revoke", "Put", "Delete", "PutUnfenced", "DeleteUnfenced", "Claim", "Txn"} {
		n += f.calls[m]
	}
	return n
}

// SetLastFence sets resource's last fence, as if the store had missed a
// grant: the one change that no rule would make.
func (f *Service) SetLastFence(resource string, t fence.Token) {
	err := f.DB.Update(context.Background(), func(tx state.Tx) error {
		r, err := tx.Resource(resource)
		if err != nil {
			return err
		}
		r.LastFence = t
		return tx.SetResource(resource, r)
	})
	if err != nil {
		panic(fmt.Sprintf("fake: set last fence: %v", err)) // memory does not fail
	}
}

// Expire ends resource's lease as its TTL passing would: the clock moves to
// the lease's expiry while the lock service looks at the resource, and then
// back to Now.
func (f *Service) Expire(resource string) {
	st, err := f.Service.Status(context.Background(), resource)
	if err != nil || !st.Held {
		return
	}
	f.mu.Lock()
	f.clock = st.Expires
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.clock = Now
		f.mu.Unlock()
	}()
	f.Service.Status(context.Background(), resource) // notices the expiry
}

// Acquire implements fence.Locker.
func (f *Service) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	if err := f.enter("Acquire"); err != nil {
		return fence.Lease{}, err
	}
	return f.Service.Acquire(ctx, resource, holder, ttl, wait)
}

// Renew implements fence.Locker.
func (f *Service) Renew(ctx context.Context, resource string, t fence.Token, ttl time.Duration) (fence.Lease, error) {
	if err := f.enter("Renew"); err != nil {
		return fence.Lease{}, err
	}
	return f.Service.Renew(ctx, resource, t, ttl)
}

// Release implements fence.Locker.
func (f *Service) Release(ctx context.Context, resource string, t fence.Token) error {
	if err := f.enter("Release"); err != nil {
		return err
	}
	return f.Service.Release(ctx, resource, t)
}

// Revoke implements fence.Revoker.
func (f *Service) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	if err := f.enter("Revoke"); err != nil {
		return fence.RevokeResult{}, err
	}
	return f.Service.Revoke(ctx, resource)
}

// Status implements fence.Locker.
func (f *Service) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	if err := f.enter("Status"); err != nil {
		return fence.LockStatus{}, err
	}
	return f.Service.Status(ctx, resource)
}

// Put implements fence.Store.
func (f *Service) Put(ctx context.Context, resource, key string, value []byte, t fence.Token, c fence.Cond) (fence.WriteResult, error) {
	if err := f.enter("Put"); err != nil {
		return fence.WriteResult{}, err
	}
	return f.DB.Put(ctx, resource, key, value, t, c)
}

// Delete implements fence.Store.
func (f *Service) Delete(ctx context.Context, resource, key string, t fence.Token, c fence.Cond) (fence.WriteResult, error) {
	if err := f.enter("Delete"); err != nil {
		return fence.WriteResult{}, err
	}
	return f.DB.Delete(ctx, resource, key, t, c)
}

// Get implements fence.Store.
func (f *Service) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	if err := f.enter("Get"); err != nil {
		return fence.Item{}, err
	}
	return f.DB.Get(ctx, resource, key)
}

// Fence implements fence.Store.
func (f *Service) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := f.enter("Fence"); err != nil {
		return 0, err
	}
	return f.DB.Fence(ctx, resource)
}

// Claim implements fence.Store.
func (f *Service) Claim(ctx context.Context, resource string, t fence.Token) (fence.WriteResult, error) {
	if err := f.enter("Claim"); err != nil {
		return fence.WriteResult{}, err
	}
	return f.DB.Claim(ctx, resource, t)
}

// Txn implements fence.Store.
func (f *Service) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	if err := f.enter("Txn"); err != nil {
		return 0, err
	}
	return f.DB.Txn(ctx, t)
}

// PutUnfenced implements fence.UnfencedStore.
func (f *Service) PutUnfenced(ctx context.Context, resource, key string, value []byte, c fence.Cond) (fence.WriteResult, error) {
	if err := f.enter("PutUnfenced"); err != nil {
		return fence.WriteResult{}, err
	}
	return f.DB.PutUnfenced(ctx, resource, key, value, c)
}

// DeleteUnfenced implements fence.UnfencedStore.
func (f *Service) DeleteUnfenced(ctx context.Context, resource, key string, c fence.Cond) (fence.WriteResult, error) {
	if err := f.enter("DeleteUnfenced"); err != nil {
		return fence.WriteResult{}, err
	}
	return f.DB.DeleteUnfenced(ctx, resource, key, c)
}
