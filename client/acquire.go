package client

import (
	"context"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// The acquires: of a lock, of a semaphore's permit, of several locks at
// once, of a shared hold (and its renew and release).

var (
	_ fence.PermitAcquirer = (*API)(nil)
	_ fence.MultiAcquirer  = (*API)(nil)
	_ fence.SharedAcquirer = (*API)(nil)
)

// Acquire implements fence.Locker. ttl is rounded to whole milliseconds; 0
// is the server's default TTL, or in a session the session's. With
// fence.WithSession in ctx the lease joins that session (see
// fence.SessionResource).
func (c *API) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	body := jsonBody(wire.AcquireRequest{Holder: holder, TTLMS: ttl.Milliseconds(), WaitMS: wait.Milliseconds(),
		Session: wire.NewSessionRef(fence.SessionOf(ctx))})
	var lr wire.Lease
	sent := time.Now()
	if err := c.doJSON(ctx, send(wire.OpAcquireLock, resource, "", request{body: body, retryable: true}), &lr); err != nil {
		return fence.Lease{}, err
	}
	c.clock.learn(sent, time.Now(), lr)
	return lr.Decode()
}

// AcquirePermit implements fence.PermitAcquirer: POST
// /v1/locks/{resource}/acquire with a limit. The lease names the permit's
// slot resource, which Renew and Release take.
func (c *API) AcquirePermit(ctx context.Context, resource, holder string, limit int, ttl, wait time.Duration) (fence.Lease, error) {
	body := jsonBody(wire.AcquireRequest{Holder: holder, TTLMS: ttl.Milliseconds(), WaitMS: wait.Milliseconds(), Limit: limit,
		Session: wire.NewSessionRef(fence.SessionOf(ctx))})
	var lr wire.Lease
	if err := c.doJSON(ctx, send(wire.OpAcquireLock, resource, "", request{body: body, retryable: true}), &lr); err != nil {
		return fence.Lease{}, err
	}
	return lr.Decode()
}

// AcquireAll implements fence.MultiAcquirer: POST /v1/locks, every
// resource granted in one change or none, the leases in the order of
// resources.
func (c *API) AcquireAll(ctx context.Context, resources []string, holder string, ttl, wait time.Duration) ([]fence.Lease, error) {
	body := jsonBody(wire.AcquireAllRequest{Resources: resources, Holder: holder, TTLMS: ttl.Milliseconds(), WaitMS: wait.Milliseconds(),
		Session: wire.NewSessionRef(fence.SessionOf(ctx))})
	var resp wire.AcquireAllResponse
	if err := c.doJSON(ctx, send(wire.OpAcquireLocks, "", "", request{body: body, retryable: true}), &resp); err != nil {
		return nil, err
	}
	ls := make([]fence.Lease, len(resp.Leases))
	for i, lr := range resp.Leases {
		var err error
		if ls[i], err = lr.Decode(); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// AcquireShared implements fence.SharedAcquirer: POST
// /v1/locks/{resource}/acquire with "mode": "shared".
func (c *API) AcquireShared(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	body := jsonBody(wire.AcquireRequest{Holder: holder, TTLMS: ttl.Milliseconds(), WaitMS: wait.Milliseconds(), Mode: wire.ModeShared})
	var lr wire.Lease
	if err := c.doJSON(ctx, send(wire.OpAcquireLock, resource, "", request{body: body, retryable: true}), &lr); err != nil {
		return fence.Lease{}, err
	}
	return lr.Decode()
}

// RenewShared implements fence.SharedAcquirer: a renew that names its
// holder.
func (c *API) RenewShared(ctx context.Context, resource, holder string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	return c.renew(ctx, resource, wire.RenewRequest{Token: token, TTLMS: ttl.Milliseconds(), Holder: holder})
}

// ReleaseShared implements fence.SharedAcquirer: a release that names its
// holder.
func (c *API) ReleaseShared(ctx context.Context, resource, holder string, token fence.Token) error {
	return c.release(ctx, resource, wire.ReleaseRequest{Token: token, Holder: holder})
}
