// Package client is the Go client of a fence server: acquire a lease that
// keeps itself alive, and write through it so that every write carries its
// fencing token.
//
//	c, err := client.New("http://127.0.0.1:7700")
//	lease, err := c.Acquire(ctx, "orders", fence.WithTTL(10*time.Second))
//	defer lease.Release(ctx)
//	_, err = lease.Put(lease.Context(), "total", []byte("42")) // carries lease.Token()
//
// A Lease is a fence.Session (keepalive, Done, Context, Err, Release) plus the
// storage calls of the fence server, each stamped with the lease's token, and
// an http.RoundTripper that stamps it on the requests to any other service.
// When the server signs its grants, the lease's sequencer goes with the token
// in a Fence-Sequencer header.
//
// The address may list the servers of a cluster, separated by commas
// ("http://a:7700,http://b:7700"): the client stays on the server that
// answers and moves to the next one after a transport error or a 503, and
// retries calls that are safe to repeat (renewals among them) for up to
// API.RetryFor, so that a lease's keepalive carries on across a
// leader failover. See API for which calls are resent and when.
// Errors are the typed errors of package fence: errors.Is(err,
// fence.ErrFenced), errors.As(err, &fencedErr).
package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// Client talks to a fence server, or to the servers of a cluster with
// failover between them. It is safe for concurrent use.
type Client struct {
	api *API
}

// Option configures a Client in New.
type Option func(*Client)

// WithAuthToken makes the client send token as a bearer token
// ("Authorization: Bearer <token>") with every request.
func WithAuthToken(token string) Option {
	return func(c *Client) { c.api.AuthToken = token }
}

// New returns a client of the server at addr, e.g. "http://127.0.0.1:7700",
// or of the servers of a cluster, their base URLs separated by commas
// ("http://a:7700,http://b:7700"), as NewAPI takes them.
func New(addr string, opts ...Option) (*Client, error) {
	api, err := NewAPI(addr)
	if err != nil {
		return nil, err
	}
	c := &Client{api: api}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// API returns the underlying fence.Locker and fence.Store, for calls that
// take explicit tokens, and for its settings (HTTPClient, RetryFor, Retries).
func (c *Client) API() *API { return c.api }

// Acquire acquires resource and returns a lease that renews itself until
// Release or loss. It returns *fence.LockHeldError if another holder kept
// the lock for all of fence.WithWait.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...fence.SessionOption) (*Lease, error) {
	s, err := fence.NewSession(ctx, c.api, resource, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resource, err)
	}
	return &Lease{Session: s, store: c.api}, nil
}

// AcquireAll acquires every one of resources at once, all or none, and
// returns a lease per resource, in their order, each renewing itself until
// Release or loss. It returns *fence.LockHeldError, naming a resource that
// another holder kept for all of fence.WithWait, and then holds none.
func (c *Client) AcquireAll(ctx context.Context, resources []string, opts ...fence.SessionOption) ([]*Lease, error) {
	ss, err := fence.NewSessions(ctx, c.api, resources, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resources, err)
	}
	ls := make([]*Lease, len(ss))
	for i, s := range ss {
		ls[i] = &Lease{Session: s, store: c.api}
	}
	return ls, nil
}

// WithLock runs fn under a lease on resource and releases it after. fn's ctx
// is cancelled as soon as the lease is lost. It returns fn's error; if fn
// succeeded but the lease was lost while it ran, the loss (so that the caller
// knows some writes may have been fenced); else the release's error.
func (c *Client) WithLock(ctx context.Context, resource string, fn func(ctx context.Context, l *Lease) error, opts ...fence.SessionOption) error {
	l, err := c.Acquire(ctx, resource, opts...)
	if err != nil {
		return err
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(l.Err()) })
	defer stop()
	fnErr := fn(workCtx, l)
	lost := l.Err()
	relErr := l.Release(context.WithoutCancel(ctx))
	switch {
	case fnErr != nil:
		return fnErr
	case lost != nil:
		return fmt.Errorf("client: lease on %q lost while the work ran: %w", resource, lost)
	}
	return relErr
}

// Status returns the lock's status.
func (c *Client) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	return c.api.Status(ctx, resource)
}

// Get returns the item stored under resource/key.
func (c *Client) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	return c.api.Get(ctx, resource, key)
}

// Fence returns the resource's last fence.
func (c *Client) Fence(ctx context.Context, resource string) (fence.Token, error) {
	return c.api.Fence(ctx, resource)
}

// Lease is a held lock: a fence.Session whose writes carry its token.
type Lease struct {
	*fence.Session
	store fence.Store
}

// check refuses a write once the lease has ended: the server would most
// likely reject it, and the caller should stop.
func (l *Lease) check() error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("client: lease on %q has ended: %w", l.Resource(), err)
	}
	return nil
}

// Put writes value under key in the lease's resource, with its token.
func (l *Lease) Put(ctx context.Context, key string, value []byte) (fence.WriteResult, error) {
	return l.PutIf(ctx, key, value, fence.Cond{})
}

// PutIf writes value under key if cond holds.
func (l *Lease) PutIf(ctx context.Context, key string, value []byte, cond fence.Cond) (fence.WriteResult, error) {
	if err := l.check(); err != nil {
		return fence.WriteResult{}, err
	}
	return l.store.Put(l.stamp(ctx), l.Resource(), key, value, l.Token(), cond)
}

// CompareAndSwap writes value under key only if the key is at revision rev
// (0: only if it does not exist); otherwise it returns fence.ErrPreconditionFailed.
func (l *Lease) CompareAndSwap(ctx context.Context, key string, value []byte, rev fence.Rev) (fence.WriteResult, error) {
	if rev == 0 {
		return l.PutIf(ctx, key, value, fence.Cond{IfAbsent: true})
	}
	return l.PutIf(ctx, key, value, fence.Cond{IfMatch: rev})
}

// Get reads key from the lease's resource.
func (l *Lease) Get(ctx context.Context, key string) (fence.Item, error) {
	return l.store.Get(ctx, l.Resource(), key)
}

// Delete deletes key from the lease's resource, with its token.
func (l *Lease) Delete(ctx context.Context, key string) (fence.WriteResult, error) {
	if err := l.check(); err != nil {
		return fence.WriteResult{}, err
	}
	return l.store.Delete(l.stamp(ctx), l.Resource(), key, l.Token(), fence.Cond{})
}

// Claim raises the resource's fence to the lease's token without writing, so
// that any older holder is rejected from now on.
func (l *Lease) Claim(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	_, err := l.store.Claim(l.stamp(ctx), l.Resource(), l.Token())
	return err
}

// Txn applies t with the lease's token as the fence of its resource; fences
// of other resources (from other leases) stay as t has them.
func (l *Lease) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	c := *t
	c.Fences = map[string]fence.Token{}
	for r, tok := range t.Fences {
		c.Fences[r] = tok
	}
	c.Fences[l.Resource()] = l.Token()
	return l.store.Txn(l.stamp(ctx), &c)
}

// stamp returns ctx with the lease's sequencer, if it has one, for the
// Fence-Sequencer header of a write (WithSequencer).
func (l *Lease) stamp(ctx context.Context) context.Context {
	if s := l.Sequencer(); s != "" {
		return WithSequencer(ctx, s)
	}
	return ctx
}

// Transport returns an http.RoundTripper that adds the header
// "Fencing-Token: <token>" to every mutating request (POST, PUT, PATCH,
// DELETE) it sends through base (http.DefaultTransport if nil), so that any
// service that checks fencing tokens can reject this holder once it is stale.
// When the lease has a sequencer it adds "Fence-Sequencer: <sequencer>" too.
// After the lease has ended it fails mutating requests without sending them.
func (l *Lease) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &fencingTransport{lease: l, base: base}
}

type fencingTransport struct {
	lease *Lease
	base  http.RoundTripper
}

func (t *fencingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return t.base.RoundTrip(req)
	}
	if err := t.lease.check(); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on errors
		}
		return nil, err
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set("Fencing-Token", t.lease.Token().String())
	if s := t.lease.Sequencer(); s != "" {
		r.Header.Set(wire.SequencerHeader, s)
	}
	return t.base.RoundTrip(r)
}

// IsLost reports whether err means the lease is gone (lost, expired or
// fenced): the caller must stop working under it.
func IsLost(err error) bool {
	return errors.Is(err, fence.ErrLeaseLost) || errors.Is(err, fence.ErrLeaseExpired) || errors.Is(err, fence.ErrFenced)
}
