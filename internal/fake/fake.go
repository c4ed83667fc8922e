// Package fake is a small in-memory fence.Locker and fence.Store for tests
// of the HTTP API's server and client: pure logic, no I/O, a clock that
// stands still, and injectable failures.
package fake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fence-lock/fence"
)

// Now is the fake's clock: it never moves, so leases expire only when a
// test says so.
var Now = time.Date(2025, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("X", 3600))

// Service is a small in-memory fence.Locker and fence.Store for tests:
// pure logic, no I/O, a clock that stands still. Err, when set, is returned
// by every method; Panic makes every method panic. Leases belong to
// fence.OwnerOf the acquire's ctx, as in lock.Service: another owner's
// same-holder acquire, renew or release gets fence.ErrForbidden.
type Service struct {
	mu        sync.Mutex
	lastToken map[string]fence.Token
	lastFence map[string]fence.Token
	leases    map[string]fence.Lease
	items     map[[2]string]fence.Item
	rev       fence.Rev
	calls     map[string]int // method name → calls

	Err   error // returned by every method; set it with SetErr while serving
	Panic bool  // makes every method panic
}

var (
	_ fence.Locker  = (*Service)(nil)
	_ fence.Revoker = (*Service)(nil)
	_ fence.Store   = (*Service)(nil)
)

// New returns an empty Service.
func New() *Service {
	return &Service{
		lastToken: map[string]fence.Token{},
		lastFence: map[string]fence.Token{},
		leases:    map[string]fence.Lease{},
		items:     map[[2]string]fence.Item{},
		calls:     map[string]int{},
	}
}

// enter counts a call and returns the injected error.
func (f *Service) enter(method string) error {
	f.calls[method]++
	if f.Panic {
		panic("fake: " + method)
	}
	return f.Err
}

// SetErr makes every method fail with err (nil: none).
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

// SetLastFence sets resource's last fence, as if the store had missed a
// grant.
func (f *Service) SetLastFence(resource string, t fence.Token) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastFence[resource] = t
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
	for _, m := range []string{"Acquire", "Renew", "Release", "Revoke", "Put", "Delete", "Claim", "Txn"} {
		n += f.calls[m]
	}
	return n
}

// Expire ends resource's lease, as if its TTL had passed.
func (f *Service) Expire(resource string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases, resource)
}

// Acquire implements fence.Locker; it never queues.
func (f *Service) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Acquire"); err != nil {
		return fence.Lease{}, err
	}
	owner := fence.OwnerOf(ctx)
	if l, ok := f.leases[resource]; ok {
		if l.Holder == holder && !owns(l, owner) {
			return fence.Lease{}, errForbidden
		}
		if l.Holder != holder {
			if wait > 0 {
				// Nobody releases a fake lock while we wait: wait for the
				// client to go away, or for the wait to pass.
				f.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
				f.mu.Lock()
				if ctx.Err() != nil {
					return fence.Lease{}, ctx.Err()
				}
			}
			return fence.Lease{}, &fence.LockHeldError{Resource: resource, RetryAfter: l.Expires.Sub(Now)}
		}
		l.TTL, l.Expires = ttl, Now.Add(ttl)
		f.leases[resource] = l
		return l, nil
	}
	f.lastToken[resource]++
	t := f.lastToken[resource]
	f.lastFence[resource] = t
	l := fence.Lease{Resource: resource, Holder: holder, Owner: owner, Token: t, TTL: ttl, Expires: Now.Add(ttl)}
	f.leases[resource] = l
	return l, nil
}

// errForbidden is the fake's answer to a call on another owner's lease.
var errForbidden = fmt.Errorf("%w: the lease belongs to another principal", fence.ErrForbidden)

// owns reports whether owner may act on l: l has no owner, or it is owner.
func owns(l fence.Lease, owner string) bool { return l.Owner == "" || l.Owner == owner }

// lease returns resource's lease if its token is t and owner may act on it.
func (f *Service) lease(ctx context.Context, resource string, t fence.Token) (fence.Lease, error) {
	l, ok := f.leases[resource]
	if !ok || l.Token != t {
		return l, &fence.LeaseLostError{Resource: resource, Presented: t, Current: l.Token}
	}
	if !owns(l, fence.OwnerOf(ctx)) {
		return l, errForbidden
	}
	return l, nil
}

// Renew implements fence.Locker.
func (f *Service) Renew(ctx context.Context, resource string, t fence.Token, ttl time.Duration) (fence.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Renew"); err != nil {
		return fence.Lease{}, err
	}
	l, err := f.lease(ctx, resource, t)
	if err != nil {
		return fence.Lease{}, err
	}
	if ttl != 0 {
		l.TTL = ttl
	}
	l.Expires = Now.Add(l.TTL)
	f.leases[resource] = l
	return l, nil
}

// Release implements fence.Locker.
func (f *Service) Release(ctx context.Context, resource string, t fence.Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Release"); err != nil {
		return err
	}
	if _, err := f.lease(ctx, resource, t); err != nil {
		return err
	}
	delete(f.leases, resource)
	return nil
}

func (f *Service) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Revoke"); err != nil {
		return fence.RevokeResult{}, err
	}
	res := fence.RevokeResult{Resource: resource, Revoked: f.leases[resource].Token}
	delete(f.leases, resource)
	f.lastToken[resource]++
	res.LastFence = f.lastToken[resource]
	f.lastFence[resource] = res.LastFence
	return res, nil
}

func (f *Service) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Status"); err != nil {
		return fence.LockStatus{}, err
	}
	st := fence.LockStatus{Resource: resource, LastToken: f.lastToken[resource]}
	if l, ok := f.leases[resource]; ok {
		st.Held, st.Holder, st.Token, st.Expires = true, l.Holder, l.Token, l.Expires
	}
	return st, nil
}

// check applies the fencing rule: lastFence <= t <= lastToken.
func (f *Service) check(resource string, t fence.Token) error {
	if last := f.lastToken[resource]; t > last {
		return &fence.TokenNotIssuedError{Resource: resource, Presented: t, LastToken: last}
	}
	if last := f.lastFence[resource]; t < last {
		return &fence.FencedError{Resource: resource, Presented: t, LastFence: last}
	}
	return nil
}

func (f *Service) result(resource string, t fence.Token) fence.WriteResult {
	r := fence.WriteResult{Rev: f.rev, LastFence: f.lastFence[resource]}
	if l, ok := f.leases[resource]; ok && l.Token == t {
		r.Holder = l.Holder
	}
	return r
}

func (f *Service) holds(resource, key string, c fence.Cond) bool {
	it, ok := f.items[[2]string{resource, key}]
	switch {
	case c.IfMatch != 0:
		return ok && it.Rev == c.IfMatch
	case c.IfExists:
		return ok
	case c.IfAbsent:
		return !ok
	}
	return true
}

func (f *Service) Put(ctx context.Context, resource, key string, value []byte, t fence.Token, c fence.Cond) (fence.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Put"); err != nil {
		return fence.WriteResult{}, err
	}
	if err := f.check(resource, t); err != nil {
		return fence.WriteResult{}, err
	}
	if !f.holds(resource, key, c) {
		return fence.WriteResult{}, fence.ErrPreconditionFailed
	}
	f.rev++
	f.lastFence[resource] = t
	f.items[[2]string{resource, key}] = fence.Item{Resource: resource, Key: key, Value: slices.Clone(value), Rev: f.rev, Token: t}
	return f.result(resource, t), nil
}

func (f *Service) Delete(ctx context.Context, resource, key string, t fence.Token, c fence.Cond) (fence.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Delete"); err != nil {
		return fence.WriteResult{}, err
	}
	if err := f.check(resource, t); err != nil {
		return fence.WriteResult{}, err
	}
	if !f.holds(resource, key, c) {
		return fence.WriteResult{}, fence.ErrPreconditionFailed
	}
	if _, ok := f.items[[2]string{resource, key}]; !ok {
		return fence.WriteResult{}, fence.ErrNotFound
	}
	f.rev++
	f.lastFence[resource] = t
	delete(f.items, [2]string{resource, key})
	return f.result(resource, t), nil
}

func (f *Service) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Get"); err != nil {
		return fence.Item{}, err
	}
	it, ok := f.items[[2]string{resource, key}]
	if !ok {
		return fence.Item{}, fence.ErrNotFound
	}
	return it, nil
}

func (f *Service) Fence(ctx context.Context, resource string) (fence.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Fence"); err != nil {
		return 0, err
	}
	return f.lastFence[resource], nil
}

func (f *Service) Claim(ctx context.Context, resource string, t fence.Token) (fence.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Claim"); err != nil {
		return fence.WriteResult{}, err
	}
	if err := f.check(resource, t); err != nil {
		return fence.WriteResult{}, err
	}
	f.lastFence[resource] = t
	return f.result(resource, t), nil
}

func (f *Service) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Txn"); err != nil {
		return 0, err
	}
	resources := slices.Sorted(maps.Keys(t.Fences))
	for _, r := range resources {
		if err := f.check(r, t.Fences[r]); err != nil {
			return 0, err
		}
	}
	for _, c := range t.If {
		it, ok := f.items[[2]string{c.Resource, c.Key}]
		if c.Rev == 0 && ok || c.Rev != 0 && (!ok || it.Rev != c.Rev) {
			return 0, fence.ErrPreconditionFailed
		}
	}
	if len(t.Fences) == 0 && len(t.Then) == 0 {
		return f.rev, nil
	}
	f.rev++
	for _, r := range resources {
		f.lastFence[r] = t.Fences[r]
	}
	for _, op := range t.Then {
		k := [2]string{op.Resource, op.Key}
		if op.Kind == fence.OpPut {
			f.items[k] = fence.Item{Resource: op.Resource, Key: op.Key, Value: slices.Clone(op.Value), Rev: f.rev, Token: t.Fences[op.Resource]}
		} else {
			delete(f.items, k)
		}
	}
	return f.rev, nil
}
